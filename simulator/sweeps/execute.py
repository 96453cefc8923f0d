"""Running a sweep's runs in parallel: local processes, or a Dask cluster.

Rules kept here:

* A worker runs one task and returns its summary, run info and metric rows;
  only this driver writes results (``ResultsDir``), one run at a time, as each
  finishes.
* Every run opens its own backend (a server of the lab's engine to itself, a
  fresh fakeredis, or its own key prefix on a shared Redis), so runs never
  see each other's keys.
* A worker that dies takes only its unfinished runs with it: the local pool
  is rebuilt and those runs are submitted again (a Dask scheduler does the
  same by itself). A run that fails on its own (a simulation error) is
  reported and the others go on.
* A worker imports the run's plugins (its scenario's ``plugins``) before it
  runs, so a store kind registered from outside the lab exists there too. It
  finds them on its ``sys.path``: a local worker starts with the driver's as
  it is when the worker starts (multiprocessing hands it over, even to a fork
  server started earlier); a Dask worker needs them on its own ``PYTHONPATH``.
* Nothing is left behind. Local workers hold the driver's lifeline
  (``simulator.sweeps.lifeline``): when the driver dies, by any signal, they
  exit within a second, even mid-run, and the forkserver and resource tracker
  follow. Ctrl-C or SIGTERM stops the sweep at once: the workers are cut off,
  the runs already finished are kept (``read_results`` reads them) and
  ``SweepInterrupted`` says how many; running the sweep again runs the rest.
  Dask workers belong to their cluster, not to the driver: when the driver
  goes, the scheduler sees its client leave and forgets the runs it had not
  started; a run already in a worker's thread finishes there and is dropped.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.backends import BackendError
from simulator.run.compose import run_scenario
from simulator.run.stopping import signal_of, terminate_as_interrupt
from simulator.sweeps.design import Sweep, Task
from simulator.sweeps.lifeline import Lifeline
from simulator.sweeps.progress import progress_bar
from simulator.sweeps.results import ResultsDir
from stores import registry

ATTEMPTS_PER_RUN = 3
"""How often a run is tried when its worker dies under it (not when it fails)."""


@dataclass
class SweepOutcome:
    """What a call to ``run_sweep`` did."""

    out: Path
    runs_total: int
    already_done: int
    completed: int = 0
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        """Stop, naming every failed run: a figure must not quietly miss one."""
        if self.failed:
            failures = "; ".join(f"{run}: {error}" for run, error in self.failed.items())
            raise RuntimeError(f"{len(self.failed)} run(s) of the sweep in {self.out} "
                               f"failed: {failures}")


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by a signal (Ctrl-C, SIGTERM) before its end, its finished
    runs kept. A ``KeyboardInterrupt``, so whatever stops on Ctrl-C stops on it."""

    def __init__(self, sweep: str, outcome: SweepOutcome, signum: int) -> None:
        self.outcome = outcome
        self.signum = signum
        kept = outcome.already_done + outcome.completed
        super().__init__(
            f"sweep {sweep} stopped by {signal.Signals(signum).name}: {kept} of "
            f"{outcome.runs_total} run(s) finished, kept in {outcome.out}; run the same "
            "command again to run the rest")


def run_task(task: Task, allow_remote_redis: bool = False) -> tuple[dict, dict, list[dict]]:
    """One run, in a worker. Returns plain data, cheap to ship back."""
    registry.load_plugins(task.scenario.plugins)
    result = run_scenario(task.scenario, seed=task.seed, backend=task.backend,
                          allow_remote_redis=allow_remote_redis, coverage=task.coverage)
    rows = result.sampler.rows if result.sampler is not None else []
    return result.summary, result.run_info, rows


def run_sweep(sweep: Sweep, out: str | Path, workers: int | None = None,
              scheduler: str | None = None, progress: bool = True,
              allow_remote_redis: bool = False) -> SweepOutcome:
    """Run every run of ``sweep`` not yet done in ``out``, then write
    ``out/results.parquet``. ``workers``: local processes (default: one per
    core); ``scheduler``: a Dask scheduler address, instead of local processes."""
    results = ResultsDir(out)
    tasks = sweep.tasks()
    results.claim(sweep)
    pending = [task for task in tasks if not results.is_done(task)]
    outcome = SweepOutcome(results.root, len(tasks), len(tasks) - len(pending))
    try:
        with terminate_as_interrupt(), progress_bar(
                total=len(tasks), initial=outcome.already_done, desc=sweep.name,
                unit="run", disable=not progress, dynamic_ncols=True) as bar:
            def finished(task: Task, future: Future) -> None:
                error = future.exception()
                if error is not None:
                    outcome.failed[task.run_id] = f"{type(error).__name__}: {error}"
                else:
                    results.record(task, *future.result())
                    outcome.completed += 1
                bar.update(1)
                bar.set_postfix(failed=len(outcome.failed), refresh=False)

            def notice(message: str) -> None:
                bar.write(message, file=sys.stderr)

            with _executor(workers, scheduler) as (executor, rebuild):
                _drain(executor, rebuild, pending, finished, notice, allow_remote_redis)
    except KeyboardInterrupt as stop:
        # The signal may land between a run's file being written and its count:
        # what is kept is what is on disk.
        outcome.completed = sum(map(results.is_done, tasks)) - outcome.already_done
        # No results.parquet: it marks a finished sweep (read_results reads the
        # run files until then).
        raise SweepInterrupted(sweep.name, outcome, signal_of(stop)) from None
    results.consolidate(tasks)
    return outcome


def _drain(executor: Executor, rebuild: Callable[[], Executor], pending: list[Task],
           finished: Callable[[Task, Future], None], notice: Callable[[str], None],
           allow_remote_redis: bool) -> None:
    attempts = dict.fromkeys((task.run_id for task in pending), 0)
    while pending:
        futures = {}
        for task in pending:
            attempts[task.run_id] += 1
            futures[executor.submit(run_task, task, allow_remote_redis)] = task
        pending = []
        for future in as_completed(futures):
            task = futures[future]
            if isinstance(future.exception(), BrokenProcessPool) and (
                    attempts[task.run_id] < ATTEMPTS_PER_RUN):
                pending.append(task)  # its worker died: try it again
            else:
                finished(task, future)
        if pending:
            notice(f"a worker died: starting new workers for its {len(pending)} "
                   "unfinished run(s)")
            executor = rebuild()


SCHEDULER_TIMEOUT = "15s"
"""How long a Dask scheduler is tried before it is said to be unreachable."""


@contextmanager
def dask_executor(scheduler: str) -> Iterator[tuple[Executor, Any]]:
    """An executor on the Dask cluster at ``scheduler``, and its client, for
    the block (``sweep`` and ``hunt``): an address that is none, or a
    scheduler that does not answer, is a ``BackendError`` naming it."""
    from distributed import Client

    try:
        client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
    except ValueError as error:
        raise BackendError(f"--scheduler: {scheduler!r} is no Dask scheduler address such as "
                           f"tcp://HOST:8786 ({error})") from None
    except (OSError, TimeoutError) as error:
        raise BackendError(f"cannot reach the Dask scheduler at {scheduler}: {error}") from None
    with client:
        yield client.get_executor(pure=False), client


@contextmanager
def _executor(workers: int | None, scheduler: str | None
              ) -> Iterator[tuple[Executor, Callable[[], Executor]]]:
    """A ``concurrent.futures`` executor and a way to rebuild it after a worker died."""
    if scheduler is not None:
        with dask_executor(scheduler) as (executor, _):
            yield executor, lambda: executor
        return
    count = workers or os.cpu_count() or 1
    # forkserver: workers start from a clean process, not a fork of one that
    # may hold threads (a progress bar's, Jupyter's) or open connections.
    context = multiprocessing.get_context("forkserver")
    # Workers fork from a server that has imported the lab already, so a pool
    # (re)starts in a fraction of a second rather than re-importing it each time.
    context.set_forkserver_preload(["simulator.sweeps.execute"])
    with Lifeline() as lifeline:
        pools = [lifeline.pool(count, context)]

        def rebuild() -> Executor:
            pools[-1].shutdown(wait=False, cancel_futures=True)
            pools.append(lifeline.pool(count, context))
            return pools[-1]

        try:
            yield pools[0], rebuild
        except BaseException:
            # Interrupted (or failing): stop the runs in progress now rather
            # than wait for them, so shutting down below is immediate.
            lifeline.cut()
            raise
        finally:
            pools[-1].shutdown(wait=True, cancel_futures=True)
