"""How much work a run of a scenario will be, judged from its parameters alone.

A run's cost grows with what its scenario asks for: the requests that arrive
(the arrival rate over the arrival window, or a fixed list) and, with
sessions, their tool calls; the faults drawn from rates (per replica or
fleet-wide, over the fault window); the metric samples; the keys; the
replicas. ``estimate_work`` turns those into what a run's limits bound
(``simulator.run.limits``): kernel events, keys, and memory, with the
requests in flight at peak (Little's law: arrival rate times mean duration,
plus three standard deviations of a Poisson count) on the way.

Rules kept here:

* Nothing the run builds is built here (no key space, no fault plan): it is
  arithmetic on the parameters, in floats, so a parameter far too large gives
  a large figure at once, never a hang or a ``MemoryError``.
* It names no family. What sets a request's cost apart is where the store's
  record lives: in the replica (no messages), on a Redis server (each call a
  message there and back, script loads at boot) or in a service (batched
  transactions, and the periodic work its clients do by themselves).
* Each part names the scenario field that drives it, so a refusal can say
  which field to change.

The per-unit costs were measured on the committed scenarios (``run_info``'s
``kernel_events``, the trace's rows, peak RSS of fresh processes, including
``bench-scale-10k``: 10,000 replicas and 122,448 requests in flight in
738 MiB). ``tests/simulator/test_run_bounds.py`` holds the estimate to within
a factor of three of the measured events and memory for every committed
scenario (events within 3,000 where a run takes fewer than 10,000). Work the
parameters do not show -- a store's own periodic work set by its settings, a
retry storm a short timeout causes -- is left to the guard that watches the
run (``simulator.run.limits.RunGuard``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from simulator.backends import BackendSpec
from simulator.scenario.arrivals import Arrivals, Bursts, FixedArrivals, Poisson
from simulator.scenario.faults import FAULT_KINDS
from simulator.scenario.limits import count, format_bytes
from simulator.scenario.model import Scenario
from simulator.scenario.sessions import MAX_CALLS_PER_SESSION, Sessions
from stores.quantities import MAX_RATE_PER_SECOND

US = 1e6


@dataclass(frozen=True, slots=True)
class Costs:
    """What one unit of work costs a run, for one place the store's record lives."""

    events_per_request: float
    rows_per_request: float
    events_per_call: float
    """A session's tool call (its spend, work, refund)."""
    rows_per_call: float
    events_per_boot: float
    rows_per_boot: float
    bytes_per_key: float
    bytes_per_replica: float


IN_REPLICA = Costs(events_per_request=3.0, rows_per_request=4.0, events_per_call=3.0,
                   rows_per_call=4.0, events_per_boot=1.0, rows_per_boot=1.0,
                   bytes_per_key=350, bytes_per_replica=15_000)
ON_REDIS = Costs(events_per_request=10.0, rows_per_request=6.0, events_per_call=13.0,
                 rows_per_call=7.0, events_per_boot=7.0, rows_per_boot=3.0,
                 bytes_per_key=2_500, bytes_per_replica=25_000)
IN_SERVICE = Costs(events_per_request=3.5, rows_per_request=2.0, events_per_call=6.0,
                   rows_per_call=3.0, events_per_boot=4.0, rows_per_boot=2.0,
                   bytes_per_key=2_500, bytes_per_replica=25_000)

EVENTS_PER_WAKE = 2.0
ROWS_PER_WAKE = 0.5
"""A store's periodic wake-up: its timer, and now and then a call."""
EVENTS_PER_FAULT = 4.0
ROWS_PER_FAULT = 2.0
BYTES_PER_FAULT = 400
"""A planned fault, its heap entry and its trace rows' share."""
BYTES_PER_IN_FLIGHT = 2_500
"""A request in flight: its coroutine, its timers, the oracle's and the
store's holds (``bench-scale-10k``: 122,448 in flight)."""
BYTES_PER_TRACE_ROW = 410
"""A trace row: ten Python values kept until the run ends (about 260 bytes),
then its share of the Arrow table written to Parquet (about 150)."""
BYTES_PER_SAMPLE_ROW = 1_000
"""A metrics sample row: a dict of the oracle's figures."""
BASE_BYTES = 210 * 2**20
"""The process around a run: Python and the lab's libraries as ``run`` loads
them (about 180 MiB), and those that write its results."""
POISSON_PEAK_SIGMAS = 3.0
"""The peak of requests in flight: their mean plus this many standard deviations."""


@dataclass(frozen=True, slots=True)
class Part:
    """One source of a run's work, and the scenario field that drives it."""

    field: str
    what: str
    """What it is, counted: ``19,980 requests``."""
    events: float = 0.0
    trace_rows: float = 0.0
    memory_bytes: float = 0.0


@dataclass(frozen=True, slots=True)
class WorkEstimate:
    """A run's expected work, from its scenario's parameters."""

    parts: tuple[Part, ...]
    requests: float
    """Arrivals: requests, or sessions with ``workload.sessions``."""
    session_calls: float
    faults: float
    keys: float
    keys_driver: str
    in_flight_peak: float

    @property
    def kernel_events(self) -> float:
        return sum(part.events for part in self.parts)

    @property
    def trace_rows(self) -> float:
        return sum(part.trace_rows for part in self.parts)

    @property
    def memory_bytes(self) -> float:
        return BASE_BYTES + sum(part.memory_bytes for part in self.parts)

    @property
    def events_driver(self) -> str:
        return max(self.parts, key=lambda part: part.events).field

    @property
    def memory_driver(self) -> str:
        return max(self.parts, key=lambda part: part.memory_bytes).field

    @property
    def events_detail(self) -> str:
        return _largest(self.parts, lambda part: part.events)

    @property
    def memory_detail(self) -> str:
        return _largest(self.parts, lambda part: part.memory_bytes)

    def describe(self) -> str:
        """``about 137,000 kernel events, 400 keys, 145 requests in flight at peak, 160MiB``."""
        return (f"about {count(_round(self.kernel_events))} kernel events, "
                f"{count(self.keys)} keys, {count(_round(self.in_flight_peak))} requests in "
                f"flight at peak, {format_bytes(self.memory_bytes)} of memory")


def _largest(parts: tuple[Part, ...], size: Callable[[Part], float]) -> str:
    """The two largest parts by ``size``, in words: ``mostly 6 billion requests``."""
    ranked = sorted((part for part in parts if size(part) > 0), key=size, reverse=True)
    return "mostly " + " and ".join(part.what for part in ranked[:2]) if ranked else "nothing"


def _round(value: float) -> float:
    """Three significant figures: an estimate claims no more."""
    if not math.isfinite(value) or value <= 0:
        return value
    return round(value, 2 - int(math.floor(math.log10(value))))


def costs_for(scenario: Scenario, spec: BackendSpec) -> Costs:
    """The costs of the place the scenario's store keeps its record on ``spec``."""
    if scenario.kind.service is not None:
        return IN_SERVICE
    return ON_REDIS if spec.family == "redis" else IN_REPLICA


def estimate_work(scenario: Scenario, spec: BackendSpec) -> WorkEstimate:
    """The work of one run of ``scenario`` on the backend ``spec`` names."""
    costs = costs_for(scenario, spec)
    replicas = scenario.fleet.replicas
    window_s = scenario.duration_us / US
    horizon_s = (scenario.duration_us + scenario.drain_us) / US
    workload = scenario.workload
    sessions = workload.sessions
    requests = arrivals(workload.arrivals, replicas, scenario.duration_us)
    network = scenario.network
    # A lost command or reply is re-sent up to ``count`` times: the call's
    # messages again, as often as they are lost.
    lost = min(1.0, network.request_loss + network.reply_loss)
    retried = 1.0 + network.retries.count * lost
    keys_space = workload.keys.subjects + min(workload.keys.namespaces, workload.keys.subjects)

    parts = [Part("fleet.replicas", f"{count(replicas)} replicas",
                  events=replicas * costs.events_per_boot,
                  trace_rows=replicas * costs.rows_per_boot,
                  memory_bytes=replicas * costs.bytes_per_replica)]
    noun = "sessions" if sessions is not None else "requests"
    parts.append(Part("workload.arrivals", f"{count(requests)} {noun}",
                      events=requests * costs.events_per_request * retried,
                      trace_rows=requests * costs.rows_per_request * retried))
    calls = 0.0
    session_keys = 0.0
    if sessions is not None:
        calls = requests * calls_per_session(sessions, horizon_s)
        parts.append(Part("workload.sessions.call_every", f"{count(calls)} session calls",
                          events=calls * costs.events_per_call * retried,
                          trace_rows=calls * costs.rows_per_call * retried))
        counters = len(sessions.counters) + (sessions.tally is not None)
        owners = requests if sessions.prefix_from == "session" else workload.keys.subjects
        session_keys = owners * counters
    for setting, per_second in periodic_work(scenario.settings):
        wakes = replicas * horizon_s * per_second
        parts.append(Part(f"store_settings.{setting}", f"{count(wakes)} periodic wake-ups "
                          "of the stores", events=wakes * EVENTS_PER_WAKE,
                          trace_rows=wakes * ROWS_PER_WAKE))
    keys = keys_space + session_keys
    keys_driver = ("workload.keys.subjects" if keys_space >= session_keys
                   else "workload.arrivals")
    parts.append(Part(keys_driver, f"{count(keys)} keys", memory_bytes=keys * costs.bytes_per_key))

    in_flight = in_flight_peak(requests, window_s, horizon_s, scenario)
    parts.append(Part("workload.sessions.lifetime" if sessions is not None
                      else "workload.duration", f"{count(in_flight)} requests in flight",
                      memory_bytes=in_flight * BYTES_PER_IN_FLIGHT))

    faults_total = 0.0
    for field, number, restarts in planned_faults(scenario):
        faults_total += number
        parts.append(Part(field, f"{count(number)} faults",
                          events=number * (EVENTS_PER_FAULT + restarts * costs.events_per_boot),
                          trace_rows=number * ROWS_PER_FAULT,
                          memory_bytes=number * BYTES_PER_FAULT))

    metrics = scenario.metrics
    if metrics.sample_every_us > 0:
        samples = float((scenario.duration_us + scenario.drain_us)
                        // metrics.sample_every_us + 1)
        rows = samples * (1 + (keys_space if metrics.per_key else 0))
        parts.append(Part("metrics.per_key" if metrics.per_key else "metrics.sample_every",
                          f"{count(samples)} metric samples", events=samples,
                          memory_bytes=rows * BYTES_PER_SAMPLE_ROW))
    parts = [_with_trace_memory(part) for part in parts]
    return WorkEstimate(tuple(parts), requests, calls, faults_total, keys, keys_driver,
                        in_flight)


def _with_trace_memory(part: Part) -> Part:
    return Part(part.field, part.what, part.events, part.trace_rows,
                part.memory_bytes + part.trace_rows * BYTES_PER_TRACE_ROW)


def periodic_work(settings: BaseModel) -> list[tuple[str, float]]:
    """``(setting, wake-ups a second)`` for the work each replica's store does by
    itself: every store setting written ``..._every`` is taken for such a
    period (a client's flush, a sweep), held in microseconds, or in
    milliseconds when its name ends in ``_ms``."""
    found = []
    for name, field in type(settings).model_fields.items():
        written = field.alias or name
        period = getattr(settings, name)
        if not written.endswith("_every") or isinstance(period, bool) or not isinstance(
                period, int | float):
            continue
        period_s = period / (1e3 if name.endswith("_ms") else US)
        found.append((written, 1 / period_s if period_s > 0 else MAX_RATE_PER_SECOND))
    return found


def arrivals(process: Arrivals, replicas: int, window_us: int) -> float:
    """How many requests ``process`` brings in ``window_us`` to ``replicas``."""
    if isinstance(process, FixedArrivals):
        return float(len(process.at_us))
    if isinstance(process, Poisson):
        rate = process.rate_per_second * (replicas if process.per_replica else 1)
        # A replica's arrivals are at least a microsecond apart.
        rate = min(rate, replicas * MAX_RATE_PER_SECOND)
        if isinstance(process, Bursts):
            rate *= process.on_us / (process.on_us + process.off_us)
        return rate * window_us / US
    return 0.0


def calls_per_session(sessions: Sessions, horizon_s: float) -> float:
    """A typical session's tool calls: its lifetime (within the run) over the gap."""
    lifetime_s = min(_mean(sessions.lifetime) / US, horizon_s)
    gap_s = _mean(sessions.call_every) / US
    if gap_s <= 0:
        return float(MAX_CALLS_PER_SESSION)
    return min(float(MAX_CALLS_PER_SESSION), lifetime_s / gap_s)


def in_flight_peak(requests: float, window_s: float, horizon_s: float,
                   scenario: Scenario) -> float:
    """Requests (or sessions) open at once at the busiest moment."""
    workload = scenario.workload
    if requests <= 0 or window_s <= 0:
        return 0.0
    held = (workload.sessions.lifetime if workload.sessions is not None
            else workload.duration)
    mean = requests / window_s * min(_mean(held) / US, horizon_s)
    return min(requests, mean + POISSON_PEAK_SIGMAS * math.sqrt(mean))


def planned_faults(scenario: Scenario) -> list[tuple[str, float, int]]:
    """``(field, how many, restarts each)`` for every fault source the scenario sets."""
    faults = scenario.faults
    replicas = scenario.fleet.replicas
    window_s = (faults.until if faults.until is not None else scenario.duration_us) / US
    found = []
    for name in type(faults).model_fields:
        spec = getattr(faults, name)
        rate = getattr(spec, "rate", None)
        if rate is None:
            continue
        # Faults that hit one replica at a time are drawn for every replica.
        each = replicas if FAULT_KINDS[name].drawn_per_replica else 1
        restarts = 1 if name == "crash" and spec.restart_after is not None else 0
        found.append((f"faults.{name}.rate", rate * window_s * each, restarts))
    if faults.schedule:
        found.append(("faults.schedule", float(len(faults.schedule)), 0))
    return found


def _mean(distribution: object) -> float:
    """A distribution's mean, non-negative; ``inf`` where it has none or it overflows."""
    try:
        mean = float(distribution.mean)  # type: ignore[attr-defined]
    except (OverflowError, AttributeError):
        return math.inf
    return 0.0 if math.isnan(mean) else max(0.0, mean)
