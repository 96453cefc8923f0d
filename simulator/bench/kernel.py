"""The kernel line of ``python -m simulator bench``: the lab's kernel against SimPy.

The same model is built twice, once on ``simulator.engine.kernel.Kernel`` and once on
``simpy.Environment``, and both are timed in the same process, turn about, so
that the ratio says what the lab's kernel costs against a well-known
discrete-event engine on the work a run actually gives it.

The model is a run's skeleton without a store: ``replicas`` gateway replicas,
each looping forever over

* a think time (exponential),
* a ``reserve`` call: the request reaches an instantaneous server after one
  latency, the reply comes back after another, racing the caller's timeout
  (a timed-out reserve denies the request, which goes back to thinking),
* the upstream work (lognormal),
* a ``settle`` call, raced against its timeout in the same way.

The lab's side uses the kernel the way ``simulator.net.links`` does: a ``Send``
trap hands the call to a link, which schedules the arrival and the timeout
with ``Kernel.after`` and wakes the caller by returning its wake-up. SimPy's
side is written the fastest equivalent way SimPy offers (timeouts with
callbacks settling a reply event, rather than an ``AnyOf`` condition), so that
the ratio is not flattered by a slow SimPy model: written the usual way, with
the server as a process and ``yield reply | env.timeout(...)``, SimPy takes
about twice as long over the same model.

Each replica draws from its own ``random.Random`` seeded from the run seed and
its index, in the same order on both sides (all of a call's latencies when it
is sent), so both sides simulate exactly the same requests in the same virtual
time; ``ModelCounts`` says so, and the tests check it.

**How events are counted.** Both sides count the same modelled happenings
(``ModelCounts.happenings``), incremented by the same model code: a think time
ending, a work duration ending, a call arriving at the server, a reply
arriving at the caller and a timeout firing (even one that lost the race,
since both engines still process it). This is the lab's ``events_run`` less
the one start-up event of each replica. SimPy processes more engine events
than that for the same model (the reply event a call succeeds, each process's
``Initialize``), which are the engine's mechanism, not the model's work; they
are not counted, so events per second on both sides are the same count over
each side's time.

**How time is measured.** CPU time of this process (``time.process_time``),
from the first process started to the end of the run, so that other work on a
shared machine does not count against whichever side it happened to overlap;
each side runs several times, turn about, and the ratio is the median of
the rounds' own ratios (``measure_kernel`` says why). Both
sides run the way ``run_scenario`` runs the lab: with the objects alive at
the start out of the garbage collector's sight (``simulator.engine.collector``), so
neither pays for walking the other's imports.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import simpy

from simulator.bench.lines import BenchLine
from simulator.engine.collector import long_lived_frozen
from simulator.engine.kernel import Kernel, Process, WakeUp
from simulator.engine.traps import Send, Sleep

THINK_MEAN_US = 100_000
"""Mean think time between a replica's requests."""
LATENCY_MEDIAN_US = 1_000
LATENCY_SIGMA = 0.6
"""One-way latency, lognormal: long enough a tail that a call now and then
loses the race against its timeout."""
WORK_MEDIAN_US = 50_000
WORK_SIGMA = 0.7
TIMEOUT_US = 5_000
"""How long a caller waits for a reply."""
_THINK_RATE = 1.0 / THINK_MEAN_US
_LATENCY_MU = math.log(LATENCY_MEDIAN_US)
_WORK_MU = math.log(WORK_MEDIAN_US)

RESERVE = "reserve"
SETTLE = "settle"


@dataclass(frozen=True, slots=True)
class ModelSize:
    """How much the model simulates, and with what seed."""

    replicas: int
    virtual_us: int
    seed: int = 1


QUICK = ModelSize(replicas=1_000, virtual_us=2_000_000)
FULL = ModelSize(replicas=10_000, virtual_us=2_000_000)
QUICK_ROUNDS = 3
FULL_ROUNDS = 5


class ModelCounts:
    """What one side simulated; equal on both sides for the same ``ModelSize``."""

    __slots__ = ("requests", "completed", "denied_by_timeout", "settle_timeouts",
                 "executions", "happenings")

    def __init__(self) -> None:
        self.requests = 0
        """Requests started (a reserve sent)."""
        self.completed = 0
        """Requests whose settle got its reply."""
        self.denied_by_timeout = 0
        self.settle_timeouts = 0
        self.executions = 0
        """Calls the server executed (a timed-out call may have executed)."""
        self.happenings = 0
        """Modelled happenings: the events both sides count (see the module)."""

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class ReplicaDraws:
    """One replica's randomness: the same numbers, in the same order, on both sides."""

    __slots__ = ("rng",)

    def __init__(self, seed: int, replica: int) -> None:
        self.rng = random.Random(f"bench-kernel:{seed}:{replica}")

    def think_us(self) -> int:
        return round(self.rng.expovariate(_THINK_RATE))

    def latency_us(self) -> int:
        return round(self.rng.lognormvariate(_LATENCY_MU, LATENCY_SIGMA))

    def work_us(self) -> int:
        return round(self.rng.lognormvariate(_WORK_MU, WORK_SIGMA))


def _cpu_seconds(simulate: Callable[[], None]) -> float:
    """CPU seconds ``simulate`` takes, run the way ``run_scenario`` runs the lab
    (the objects alive at the start frozen out of the garbage collector's sight)."""
    with long_lived_frozen():
        started = time.process_time()
        simulate()
        return time.process_time() - started


def _draws(size: ModelSize) -> list[ReplicaDraws]:
    """Every replica's stream, made before the clock starts (seeding is not the
    engine's work), after a full collection (so that neither side pays for
    the other's garbage)."""
    fleet = [ReplicaDraws(size.seed, replica) for replica in range(size.replicas)]
    gc.collect()
    return fleet


# -- the lab's side -------------------------------------------------------------


class _LabCall:
    __slots__ = ("process", "token", "resolved")

    def __init__(self, process: Process) -> None:
        self.process = process
        # The token of the wait the caller is suspended in (as network.py keeps it).
        self.token = process.token
        self.resolved = False


class _LabLink:
    """``simulator.net.links.Link`` reduced to its schedule: no loss, no trace."""

    __slots__ = ("kernel", "draws", "counts")

    def __init__(self, kernel: Kernel, draws: ReplicaDraws, counts: ModelCounts) -> None:
        self.kernel = kernel
        self.draws = draws
        self.counts = counts

    def send(self, process: Process, command: str) -> None:
        call = _LabCall(process)
        request_latency_us = self.draws.latency_us()
        reply_latency_us = self.draws.latency_us()
        self.kernel.after(request_latency_us, self._arrive, call, reply_latency_us)
        self.kernel.after(TIMEOUT_US, self._time_out, call)

    def _arrive(self, call: _LabCall, reply_latency_us: int) -> None:
        self.counts.happenings += 1
        self.counts.executions += 1
        self.kernel.after(reply_latency_us, self._deliver, call)

    def _deliver(self, call: _LabCall) -> WakeUp | None:
        self.counts.happenings += 1
        if call.resolved:
            return None
        call.resolved = True
        return (call.process, call.token, True, None)

    def _time_out(self, call: _LabCall) -> WakeUp | None:
        self.counts.happenings += 1
        if call.resolved:
            return None
        call.resolved = True
        return (call.process, call.token, None, TimeoutError())


async def _lab_replica(link: _LabLink, draws: ReplicaDraws, counts: ModelCounts) -> None:
    while True:
        await Sleep(draws.think_us())
        counts.happenings += 1
        counts.requests += 1
        try:
            await Send(link, RESERVE)
        except TimeoutError:
            counts.denied_by_timeout += 1
            continue
        await Sleep(draws.work_us())
        counts.happenings += 1
        try:
            await Send(link, SETTLE)
        except TimeoutError:
            counts.settle_timeouts += 1
            continue
        counts.completed += 1


def run_lab(size: ModelSize) -> tuple[ModelCounts, float]:
    """Simulate ``size`` on the lab's kernel: the counts and the CPU seconds."""
    counts = ModelCounts()
    kernel = Kernel(size.seed)
    fleet = _draws(size)

    def simulate() -> None:
        for replica, draws in enumerate(fleet):
            link = _LabLink(kernel, draws, counts)
            kernel.spawn(_lab_replica(link, draws, counts),
                         kernel.new_owner(f"replica-{replica}"), "replica")
        # Integer microseconds on both sides: SimPy's run(until) stops before
        # events due at ``until``, the lab's run(until) after them.
        kernel.run(size.virtual_us - 1)

    cpu_seconds = _cpu_seconds(simulate)
    kernel.close()
    return counts, cpu_seconds


# -- SimPy's side ---------------------------------------------------------------


class _SimpyCall:
    """One call in flight: its arrival, reply and timeout are SimPy timeouts whose
    callbacks settle ``reply``, the event the caller waits on."""

    __slots__ = ("env", "counts", "reply", "reply_latency_us")

    def __init__(self, env: simpy.Environment, counts: ModelCounts, draws: ReplicaDraws) -> None:
        self.env = env
        self.counts = counts
        self.reply = env.event()
        request_latency_us = draws.latency_us()
        self.reply_latency_us = draws.latency_us()
        env.timeout(request_latency_us).callbacks.append(self._arrive)
        env.timeout(TIMEOUT_US).callbacks.append(self._time_out)

    def _arrive(self, _: simpy.Event) -> None:
        self.counts.happenings += 1
        self.counts.executions += 1
        self.env.timeout(self.reply_latency_us).callbacks.append(self._deliver)

    def _deliver(self, _: simpy.Event) -> None:
        self.counts.happenings += 1
        if self.reply.triggered:
            return
        self.reply.succeed(True)

    def _time_out(self, _: simpy.Event) -> None:
        self.counts.happenings += 1
        if self.reply.triggered:
            return
        self.reply.fail(TimeoutError())


def _simpy_replica(env: simpy.Environment, draws: ReplicaDraws,
                   counts: ModelCounts) -> Generator[simpy.Event, Any, None]:
    timeout = env.timeout
    while True:
        yield timeout(draws.think_us())
        counts.happenings += 1
        counts.requests += 1
        try:
            yield _SimpyCall(env, counts, draws).reply
        except TimeoutError:
            counts.denied_by_timeout += 1
            continue
        yield timeout(draws.work_us())
        counts.happenings += 1
        try:
            yield _SimpyCall(env, counts, draws).reply
        except TimeoutError:
            counts.settle_timeouts += 1
            continue
        counts.completed += 1


def run_simpy(size: ModelSize) -> tuple[ModelCounts, float]:
    """Simulate ``size`` on SimPy: the counts and the CPU seconds."""
    counts = ModelCounts()
    env = simpy.Environment()
    fleet = _draws(size)

    def simulate() -> None:
        for draws in fleet:
            env.process(_simpy_replica(env, draws, counts))
        env.run(until=size.virtual_us)

    return counts, _cpu_seconds(simulate)


# -- the measurement ------------------------------------------------------------


def _paired_rounds(rounds: int,
                   sides: dict[str, Callable[[ModelSize], tuple[ModelCounts, float]]],
                   size: ModelSize) -> tuple[dict[str, ModelCounts], dict[str, list[float]]]:
    """Run each side ``rounds`` times, turn about (the side that goes first
    alternates), and return every CPU time, round by round."""
    counts: dict[str, ModelCounts] = {}
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for round_number in range(rounds):
        for name in order if round_number % 2 == 0 else reversed(order):
            counts[name], cpu_seconds = sides[name](size)
            times[name].append(cpu_seconds)
    return counts, times


def measure_kernel(quick: bool) -> BenchLine:
    """Events per CPU second of the lab's kernel and of SimPy on the same model.

    The ratio is the median over rounds of each round's own ratio: the two
    runs of a round follow each other, so a slow spell of the machine (which,
    here, can cost either side a fifth of its speed for seconds at a time)
    mostly falls on both. The ratio of each side's fastest run is printed
    beside it."""
    size = QUICK if quick else FULL
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    counts, times = _paired_rounds(rounds, {"lab": run_lab, "simpy": run_simpy}, size)
    lab, simpy_counts = counts["lab"].as_dict(), counts["simpy"].as_dict()
    if lab != simpy_counts:
        # Different work on the two sides would make the ratio meaningless.
        raise RuntimeError(f"the two kernel models diverged: lab {lab}, SimPy {simpy_counts}")
    events = lab["happenings"]
    paired = statistics.median(simpy_seconds / lab_seconds for lab_seconds, simpy_seconds
                               in zip(times["lab"], times["simpy"], strict=True))
    fastest = min(times["simpy"]) / min(times["lab"])
    figures = (
        f"{size.replicas:,} replicas, {size.virtual_us / 1e6:g} virtual s, "
        f"{lab['requests']:,} requests, {events:,} events each; "
        f"lab {events / statistics.median(times['lab']):,.0f} events/s, "
        f"SimPy {events / statistics.median(times['simpy']):,.0f} events/s "
        f"(CPU time, medians of {rounds} rounds, turn about; fastest runs' ratio "
        f"{fastest:.2f})"
    )
    return BenchLine("kernel", figures, "lab / SimPy (median of rounds)", paired, ">= 2.0")
