"""Snapshots of a paused run, forked: schedules branch from them instead of
re-running the prefix they share.

Two runs of one scenario and seed that differ only in faults run the same
events until the first fault in which they differ (every source of
randomness has its own stream, and a fault's event is placed where the run's
start would have put it: ``World.replan``). So a hunt need not simulate each
schedule from t = 0: a *trunk* process runs the scenario with a base
schedule (the hunt's: none) and, at each instant of a ladder, forks a
*keeper*, a paused copy of the whole run (kernel, fakeredis or the
in-process ledger, oracle, streams), which waits. The trunk walks only as
far up the ladder as a schedule has needed so far, while the asker waits,
so it never costs more than the runs it spares. A schedule is sent to the
keeper of the latest instant at or before its first difference from the
base; the keeper forks a *branch*, which takes the schedule's faults
(``Run.branch``), runs to the end and sends the summary back. The keeper is
left as it was, ready for the next schedule. A branched run is the run from
t = 0 with the same schedule, summary and fingerprint alike
(``tests/simulator/test_snapshots.py``).

The processes hang together by pipes alone, so that nothing outlives the
process that asked (*the asker*: the hunt's driver, or a worker): the trunk
and keepers form their own process group, ignore Ctrl-C (the asker handles
it), and exit at EOF on their request pipes, which the asker holds, so they
go when it closes the ladder or dies, whatever killed it; a keeper kills a
branch still running when that happens. The trunk keeps none of the asker's
descriptors but its own pipes, and reaps its keepers before it exits.

Memory: a fork shares every page with its parent until one side writes it,
so a keeper costs what the trunk dirtied after forking it (at most a run's
own heap, not the imported libraries, which ``gc.freeze`` keeps untouched):
``private_bytes`` measures it, and the hunt's bench line prints it.

Only runs whose backend lives in the lab's process can be forked (fakeredis,
the in-process ledger); a real Redis or PostgreSQL holds state a fork does
not copy (``forkable``), and those runs go from t = 0 as before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import warnings
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from simulator.engine.streams import Streams
from simulator.run.compose import EMBEDDED, Run, resolve_backend
from simulator.scenario.faults import FAULT_KINDS, PlannedFault
from simulator.scenario.model import Scenario

RUNGS = 16
"""A ladder's instants cut the scenario's arrival window in as many equal
parts: a schedule re-runs less than a sixteenth of the window before its
first fault."""
FIRST_RUNG = 8
"""The first instant a ladder keeps, in sixteenths of the window: half of it.
A branch costs two forks and the copies of every page the run then writes
(its copy-on-write faults): 10-40 ms on the plain hunt scenarios, about
what re-running a quarter of their window costs, so a shorter shared
prefix does not repay it."""

CLOSE_WAIT_S = 5.0
"""How long closing a ladder waits for its processes to go before it kills them."""


def forkable(scenario: Scenario, backend: str | None = None) -> str | None:
    """None when ``scenario``'s runs on ``backend`` (None: its own) can be
    forked; else why not, in words."""
    if not hasattr(os, "fork"):
        return "this platform cannot fork a process"
    if threading.current_thread() is not threading.main_thread():
        return "runs here are judged outside the main thread (a Dask worker)"
    spec = resolve_backend(scenario, backend)
    if spec.kind not in EMBEDDED:
        return (f"the backend {spec} keeps its state outside the lab's process, "
                "where a fork does not copy it")
    return None


def divergence_us(trunk: Scenario, other: Scenario, seed: int) -> int | None:
    """The first instant at which ``other``'s run may differ from
    ``trunk``'s, both with ``seed``: where their planned faults first
    differ (past the end when they never do). None when they differ in
    anything but the faults planned: settings, traffic, the operator's
    entries, which a branch cannot take."""
    first = _first_difference(_planned(trunk, seed), _planned(other, seed), trunk.end_us)
    return first if _but_faults(trunk) == _but_faults(other) else None


def _first_difference(ours: list[PlannedFault], theirs: list[PlannedFault],
                      end_us: int) -> int:
    """Where two fault plans first part (past ``end_us`` when they never do)."""
    for mine, other in itertools.zip_longest(ours, theirs):
        if mine != other:
            return min(fault.at_us for fault in (mine, other) if fault is not None)
    return end_us + 1


def _planned(scenario: Scenario, seed: int) -> list[PlannedFault]:
    return scenario.planned_faults(Streams(seed))


def _but_faults(scenario: Scenario) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """All of ``scenario`` that a branch cannot change: everything but its
    faults, and the schedule's entries an operator carries out (migrations,
    restarts, reconfigurations), which the run's start schedules."""
    return (scenario.model_dump(exclude={"faults"}),
            [entry.model_dump() for entry in scenario.faults.schedule
             if FAULT_KINDS[entry.fault].operator])


@dataclass(frozen=True)
class Branched:
    """What a branch sends back: ``summary`` and ``run_info`` of its run, or
    the error it stopped on (raised again where the run was asked for)."""

    summary: dict[str, Any] | None = None
    run_info: dict[str, Any] | None = None
    error: BaseException | None = None


class SnapshotLadder:
    """Paused copies of one trunk run at ``instants``, each forked on demand
    into branches (see the module's docstring). Open on the first ``run``;
    ``close`` (or leaving a ``with``) ends every process it started."""

    def __init__(self, trunk: Scenario, seed: int, instants: list[int],
                 backend: str | None = None) -> None:
        self.trunk = trunk
        self.seed = seed
        self.backend = backend
        """Where the runs go (None: the scenario's own); one ``forkable`` allows."""
        self.instants = sorted(set(instants))
        self._trunk_pid: int | None = None
        self._wants: Connection | None = None
        """To the trunk: the highest rung needed so far (it walks no further)."""
        self._wanted = 0
        """Rungs below this one were asked of the trunk."""
        self._asks: list[Connection] = []
        self._answers: list[Connection] = []
        self.branched = 0
        """Runs this ladder branched."""
        self._trunk_plan: list[PlannedFault] | None = None
        self._trunk_rest: tuple[dict[str, Any], list[dict[str, Any]]] | None = None
        """The trunk's plan and all else of it (``rung_for``), computed once."""
        self.rungs_alive = len(self.instants)
        """Rungs below this one have a keeper (or will have): the trunk got
        past them, as far as this process knows."""

    @classmethod
    def evenly(cls, trunk: Scenario, seed: int, backend: str | None = None) -> SnapshotLadder:
        """A ladder over ``trunk``'s arrival window: ``RUNGS`` equal steps,
        from the ``FIRST_RUNG``-th on."""
        step = trunk.duration_us / RUNGS
        return cls(trunk, seed, [round(step * rung) for rung in range(FIRST_RUNG, RUNGS)],
                   backend)

    def rung_for(self, other: Scenario) -> int | None:
        """The latest rung at or before ``other``'s first difference from the
        trunk: None when it cannot branch (``divergence_us``) or differs before the first rung."""
        # The plans first: most schedules part before the first rung, and
        # comparing the rest of two scenarios costs more than planning them.
        if self._trunk_plan is None:
            self._trunk_plan = _planned(self.trunk, self.seed)
        first = _first_difference(self._trunk_plan, _planned(other, self.seed),
                                  self.trunk.end_us)
        rungs = [index for index, instant in enumerate(self.instants) if instant <= first]
        if not rungs:
            return None
        if self._trunk_rest is None:
            self._trunk_rest = _but_faults(self.trunk)
        return rungs[-1] if _but_faults(other) == self._trunk_rest else None

    def summary_of(self, other: Scenario) -> dict[str, Any] | None:
        """``other``'s summary, branched from the latest rung before it
        differs from the trunk; None when it cannot branch, and the caller
        runs it from t = 0. An error the branch stopped on is raised here."""
        rung = self.rung_for(other)
        branched = None if rung is None else self.run(other, rung)
        if branched is None:
            return None
        if branched.error is not None:
            raise branched.error
        return branched.summary

    def run(self, other: Scenario, rung: int) -> Branched | None:
        """``other``'s run, branched from rung ``rung`` (``rung_for``); None
        when that rung is gone (the trunk stopped before it: the run from
        t = 0 will tell why). An error or a signal while it waits closes the
        ladder: a branch may still be running."""
        if self._trunk_pid is None:
            self._open()
        if rung >= self.rungs_alive:
            return None
        try:
            if rung >= self._wanted:
                self._wants.send(rung)
                self._wanted = rung + 1
            self._asks[rung].send(other)
            answer: Branched = self._answers[rung].recv()
        except (EOFError, BrokenPipeError):
            self.rungs_alive = rung
            return None
        except BaseException:
            self.close()
            raise
        self.branched += 1
        return answer

    # -- the processes -----------------------------------------------------------

    def _open(self) -> None:
        self.rungs_alive = len(self.instants)
        self._wanted = 0
        pipes = [(os.pipe(), os.pipe()) for _ in self.instants]
        wants_read, wants_write = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12 warns of fork in a process with threads (a pool's
            # manager); the trunk touches none of their locks: no logging, no
            # stdio, only its own pipes and the run.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(wants_write)
            for (ask, answer) in pipes:
                os.close(ask[1])
                os.close(answer[0])
            _trunk(self.trunk, self.seed, self.backend, self.instants, pipes,
                   wants_read)  # never returns
        self._trunk_pid = pid
        os.close(wants_read)
        self._wants = Connection(wants_write, readable=False)
        for (ask, answer) in pipes:
            os.close(ask[0])
            os.close(answer[1])
            self._asks.append(Connection(ask[1], readable=False))
            self._answers.append(Connection(answer[0], writable=False))

    def close(self) -> None:
        """End the trunk and its keepers (and any branch running): they exit
        at EOF on their requests; past ``CLOSE_WAIT_S``, they are killed."""
        pid, self._trunk_pid = self._trunk_pid, None
        for connection in [self._wants, *self._asks, *self._answers]:
            if connection is not None:
                connection.close()
        self._wants, self._asks, self._answers = None, [], []
        if pid is None:
            return
        if not _reaped_within(pid, CLOSE_WAIT_S):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)

    def private_bytes(self) -> int:
        """What the ladder's processes hold of their own (pages written since
        they were forked), now: the memory the snapshots cost."""
        if self._trunk_pid is None:
            return 0
        return sum(_private_dirty(pid) for pid in _group_members(self._trunk_pid))

    def __enter__(self) -> SnapshotLadder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reaped_within(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for child ``pid`` to exit and reap it."""
    waited = 0.0
    while waited < seconds:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        threading.Event().wait(0.01)
        waited += 0.01
    return False


def _trunk(trunk: Scenario, seed: int, backend: str | None, instants: list[int],
           pipes: list[tuple[tuple[int, int], tuple[int, int]]], wants: int) -> None:
    """The trunk process: run ``trunk`` up to each instant asked for
    (``wants``: the highest rung the asker needs so far) and fork its keeper there."""
    status = 0
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        mine = [wants, *(fd for (ask, answer) in pipes for fd in (ask[0], answer[1]))]
        _close_all_but(mine)
        wanted = Connection(wants, writable=False)
        run = Run(trunk, seed, backend)
        keepers: list[int] = []
        while len(keepers) < len(instants):
            try:
                rung = wanted.recv()
            except EOFError:
                break  # the asker is done: no more snapshots
            while len(keepers) <= rung:
                keepers.append(_fork_keeper(run, instants, pipes, len(keepers), wants))
        for (ask, answer) in pipes[len(keepers):]:
            os.close(ask[0])
            os.close(answer[1])
        for pid in keepers:
            os.waitpid(pid, 0)
    except BaseException:  # noqa: BLE001 - the asker sees EOF and runs from t = 0
        status = 1
    finally:
        os._exit(status)


def _fork_keeper(run: Run, instants: list[int],
                 pipes: list[tuple[tuple[int, int], tuple[int, int]]], index: int,
                 wants: int) -> int:
    """Advance ``run`` to rung ``index`` and fork its keeper: its pid."""
    run.advance(instants[index])
    (ask, _), (_, answer) = pipes[index]
    pid = os.fork()
    if pid == 0:
        for fd in [wants, *(fd for pair in pipes[index + 1:] for fd in (pair[0][0], pair[1][1]))]:
            os.close(fd)
        _keeper(run, Connection(ask, writable=False), Connection(answer, readable=False))
    os.close(ask)
    os.close(answer)
    return pid


def _keeper(run: Run, asks: Connection, answers: Connection) -> None:
    """A keeper process: fork a branch of ``run`` for each scenario asked."""
    status = 0
    try:
        while True:
            try:
                other = asks.recv()
            except EOFError:
                break
            answers.send(_branch_of(run, other, asks))
    except BaseException:  # noqa: BLE001 - the asker sees EOF
        status = 1
    finally:
        os._exit(status)


def _branch_of(run: Run, other: Scenario, asks: Connection) -> Branched:
    """Fork a branch that runs ``other`` from ``run`` and wait for its answer;
    if the asker goes meanwhile (EOF on ``asks``), kill it and exit."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        asks.close()
        _branch(run, other, Connection(writer, readable=False))
    os.close(writer)
    answer = Connection(reader, writable=False)
    try:
        ready = wait([answer, asks])
        if asks in ready:  # nothing is asked while a branch runs: the asker is gone
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os._exit(0)
        try:
            branched: Branched = answer.recv()
        except EOFError:
            branched = Branched(error=RuntimeError(
                "a branch of a snapshot ended without an answer "
                f"(its status: {_status_words(os.waitpid(pid, 0)[1])})"))
            pid = 0
        if pid:
            os.waitpid(pid, 0)
        return branched
    finally:
        answer.close()


def _branch(run: Run, other: Scenario, answers: Connection) -> None:
    """A branch process: ``run`` goes on as ``other``'s; its result is sent back."""
    try:
        try:
            run.branch(other)
            run.advance(run.end_us + 1)
            result = run.finish()
            branched = Branched(result.summary, result.run_info)
        except BaseException as error:  # noqa: BLE001 - raised again where it was asked
            branched = Branched(error=error)
        try:
            answers.send(branched)
        except Exception as unpicklable:  # noqa: BLE001 - its words, at least
            answers.send(Branched(error=RuntimeError(
                f"{type(branched.error).__name__}: {branched.error} "
                f"(not picklable: {unpicklable})")))
    finally:
        os._exit(0)


def _close_all_but(kept: list[int]) -> None:
    """Close every descriptor this process inherited but stdio and ``kept``:
    a pipe of the asker's held open here would keep its reader waiting."""
    keep = {0, 1, 2, *kept}
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _group_members(group: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.getpgid(int(name)) == group:
                    members.append(int(name))
    return members


def _private_dirty(pid: int) -> int:
    """The bytes process ``pid`` has written since it was forked (its private dirty pages)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Private_Dirty:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _status_words(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit {os.WEXITSTATUS(status)}"
