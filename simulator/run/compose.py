"""One run of a scenario: build the world, run the kernel, measure, write.

The result's ``summary`` depends only on the scenario and the seed (and is
the same on every backend but for its ``backend`` field); wall time, memory
and versions go to ``run_info`` instead, since they depend on the machine.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.backends import (
    CLUSTER_KINDS,
    BackendError,
    BackendSpec,
    RedisBackend,
    open_redis_backend,
    require_loopback,
)
from simulator.backends.engine import ENGINE, engine_binary, say_fallback_once
from simulator.backends.redis_backend import SCRIPT_ERRORS
from simulator.backends.service_backend import ServiceRunner, open_service_backend
from simulator.backends.shards import ShardBackends, open_shard_backends
from simulator.engine.collector import long_lived_frozen
from simulator.engine.kernel import Kernel, describe_time
from simulator.engine.runtime import ReplicaClock
from simulator.engine.streams import Streams
from simulator.engine.trace import Trace
from simulator.families import family_of
from simulator.net.cluster import ClusterServer, spread_over_shards
from simulator.net.links import LinkSettings
from simulator.net.pipeline import DeferredOracle
from simulator.net.server import Eviction, Server
from simulator.net.service import ServiceNode
from simulator.plugin.contracts import exposed_by_key
from simulator.plugin.family import Family
from simulator.plugin.protocol import CORE_FACTS, Oracle, ReplicaObserver
from simulator.reach.lines import REPLAY_DIVERGED, STATE
from simulator.reach.record import ReachRecorder
from simulator.run.estimate import WorkEstimate, estimate_work
from simulator.run.exercise import first_boot_error, inconclusive_reason, store_answers
from simulator.run.limits import RunGuard, peak_resident_memory, refuse_beyond, run_limits
from simulator.run.metrics import Sampler
from simulator.run.results import json_writer, write_results
from simulator.run.stopping import raise_if_told
from simulator.run.summary import (
    COUNTED_EVENTS,
    INCONCLUSIVE,
    MIGRATION_TOTALS,
    STORE_ANSWERS,
    STORE_RAISED,
)
from simulator.scenario.model import Scenario, ScenarioError
from simulator.world.operations import PreparedMigration
from simulator.world.requests import KeySpace, RequestSource
from simulator.world.world import World
from stores import registry


@dataclass
class RunResult:
    summary: dict[str, Any]
    run_info: dict[str, Any]
    trace: Trace = field(repr=False)
    sampler: Sampler | None = field(default=None, repr=False)

    def writers(self) -> dict[str, Callable[[Path], None]]:
        """What writes each of the run's result files (``simulator.run.results``)."""
        writers = {"summary.json": json_writer(self.summary),
                   "run_info.json": json_writer(self.run_info),
                   "trace.parquet": self.trace.write_parquet}
        if self.sampler is not None and self.sampler.rows:
            writers["metrics.parquet"] = self.sampler.write_parquet
        return writers

    def write(self, out_dir: Path) -> list[Path]:
        """Write the run's results into ``out_dir``, whole (``write_results``)."""
        return write_results(out_dir, self.writers())


@contextlib.contextmanager
def quiet_store_logs() -> Any:
    """Stores log every lost call, as they should in production; inside a run
    those are thousands of lines the trace already holds, so they are muted."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


QUIET_LOGGERS = ("stores",)
"""The loggers a run mutes (``quiet_store_logs``)."""


def script_names(scenario: Scenario) -> dict[str, str]:
    """Every script the scenario's kinds run -- the fleet's and each migration
    target's -- named by its kind's script name, by the SHA1 it is sent as: a
    plugin's replacement ``settle_v1`` is ``settle_v1`` in the trace too."""
    names: dict[str, str] = {}
    for kind in [scenario.kind, *(registry.get(step.to) for step in scenario.migrations)]:
        names.update(kind.scripts.labels())
    return names


def resolve_backend(scenario: Scenario, backend: str | None) -> BackendSpec:
    """The backend a run of ``scenario`` executes on: the one asked for, else
    the scenario's, else its store's default, where a Redis store's is the
    lab's engine when it installed (``default_backend``)."""
    kind = scenario.kind
    try:
        spec = BackendSpec.parse(backend or scenario.backend or default_backend(kind))
    except ValueError as error:
        raise ScenarioError(f"backend: {error}") from None
    if spec.family not in kind.backends:
        wanted = " or ".join(BACKEND_WORDS.get(b, f"'{b}'") for b in kind.backends)
        raise ScenarioError(
            f"backend: the store {kind.name!r} runs on {wanted}, not {str(spec)!r}"
        )
    return spec


BACKEND_WORDS = {"redis": "'valkey', 'fakeredis' or 'redis://...'",
                 "postgresql": "'postgresql://...'"}


def default_backend(kind: Any) -> str:
    """A store kind's backend when nobody names one: a Redis store's is the
    lab's Valkey engine, or fakeredis where none installed (said once)."""
    named = kind.default_backend
    if named != "fakeredis":
        return named
    if engine_binary() is None:
        say_fallback_once()
        return named
    return ENGINE


def link_settings(scenario: Scenario) -> LinkSettings:
    network = scenario.network
    return LinkSettings(
        latency=network.latency,
        request_loss=network.request_loss,
        reply_loss=network.reply_loss,
        timeout_us=network.timeout_us,
        retries=network.retries.count,
        backoff_base_us=network.retries.backoff_base_us,
        backoff_cap_us=network.retries.backoff_cap_us,
        multiplexed=network.connection == "multiplexed",
        follows_redirects=scenario.server.cluster is None
        or scenario.server.cluster.follows_redirects,
    )


def run_scenario(scenario: Scenario, seed: int | None = None, backend: str | None = None,
                 allow_remote_redis: bool = False, progress: Any = None,
                 pipelined: bool = True, record_scripts: list | None = None,
                 record_transactions: list | None = None,
                 estimate: WorkEstimate | None = None, coverage: bool = False) -> RunResult:
    """Run ``scenario`` once. ``progress(done_us, total_us)`` is called as
    virtual time advances, when given. ``pipelined``: send the server's work
    to the backend in pipelines (``simulator.net.pipeline``); the results are the
    same either way, only faster. ``record_scripts``: a list to append every
    script the server runs to, as ``(body, keys, args)`` (for ``bench``);
    ``record_transactions``: the same for a service family's node, every
    transaction as ``(verb, args, now_ms)``. ``estimate``: the run's work as
    preflight already estimated it (``simulator.run.preflight.examine``), so it
    is not estimated twice. ``coverage``: record which lines of the store's
    code ran (``simulator.reach``), into the summary."""
    run = Run(scenario, seed, backend, allow_remote_redis=allow_remote_redis,
              pipelined=pipelined, record_scripts=record_scripts,
              record_transactions=record_transactions, estimate=estimate, coverage=coverage)
    run.advance(run.end_us + 1, progress)
    return run.finish()


class Run:
    """One run of a scenario, built and started, that the caller advances in
    virtual time and then finishes: ``run_scenario`` runs it to its end in
    one go. Until it is finished or stops on an error it holds its backend;
    an error closes it, as a run does."""

    def __init__(self, scenario: Scenario, seed: int | None = None, backend: str | None = None,
                 *, allow_remote_redis: bool = False, pipelined: bool = True,
                 record_scripts: list | None = None, record_transactions: list | None = None,
                 estimate: WorkEstimate | None = None, coverage: bool = False) -> None:
        self.started = (time.perf_counter(), time.process_time())
        self.scenario = scenario
        self.seed = seed = scenario.seed if seed is None else seed
        self.spec = spec = resolve_backend(scenario, backend)
        self.family = family = _family_of(scenario)
        self.kernel = kernel = Kernel(seed)
        _bound(scenario, spec, kernel, estimate)
        self.streams, self.trace = streams, trace = Streams(seed), Trace()
        self.oracle = oracle = family.oracle(scenario, scenario.kind, scenario.settings)
        keys = scenario.workload.keys
        key_space = KeySpace.of(keys)
        key_space.follow_pinned(scenario.workload.arrivals)
        with quiet_store_logs():
            try:
                self.side = side = _open_server_side(
                    scenario, spec, family, oracle, kernel, trace, streams, key_space,
                    allow_remote_redis, pipelined, record_scripts, record_transactions)
            except KeyboardInterrupt as stopped:  # told to stop while opening: it closed
                stopped.add_note(f"the run had not begun (seed {seed}); nothing was written, "
                                 "and it cleaned up")
                raise
        self.recorder = _reach_recorder(scenario, side) if coverage else None
        self.store_observer = family.replica_observer(oracle)
        # While the server holds queued commands, the world reports its facts to
        # the oracle behind them, in order (simulator.net.pipeline).
        self.world_oracle = (DeferredOracle(oracle, side.server,
                                            CORE_FACTS | family.oracle_facts)
                             if isinstance(side.server, Server) else oracle)
        self.end_us = scenario.duration_us + scenario.drain_us
        self.reached_us = 0
        """Every event before this instant has run, none at or after it."""
        self.sampler = Sampler(kernel, self.world_oracle, scenario.metrics.sample_every_us,
                               self.end_us, scenario.metrics.per_key)
        with self._stopping_cleanly():
            self.world = _build_world(scenario, kernel, streams, trace, self.world_oracle,
                                      family, self.store_observer, side.server,
                                      side.settings, key_space)
            if side.redis_backend is not None:
                self.world.as_embedded = side.redis_backend.as_embedded
            self._start()

    def _start(self) -> None:
        """Start the world, its faults and the sampler."""
        scenario, world = self.scenario, self.world
        # The oracle blames what the lab did: it hears of every message
        # fault, and judges deadlines by the clocks the lab gave the fleet.
        self.oracle.replica_clocks(world.clocks)
        world.fault_clock.listener = self.world_oracle.message_fault
        world.start(scenario.planned_faults(self.streams),
                    self.side.migrations, scenario.rolling_restarts,
                    scenario.reconfigurations)
        self.sampler.start()

    def advance(self, until_us: int, progress: Any = None) -> None:
        """Run every event before ``until_us`` (past the run's end: all of
        them), in steps of a hundredth of the run, each a point where a
        signal may stop it; ``progress(done_us, total_us)`` after each."""
        end_us, kernel = self.end_us, self.kernel
        step_us = max(1, end_us // 100)
        last_us = min(until_us - 1, end_us)
        with self._stopping_cleanly(), long_lived_frozen():
            while self.reached_us <= last_us:
                raise_if_told()
                step_end_us = min((self.reached_us // step_us + 1) * step_us, end_us, last_us)
                kernel.run(step_end_us)
                self.reached_us = step_end_us + 1
                if progress is not None:
                    progress(step_end_us, end_us)

    def finish(self) -> RunResult:
        """Check the books, count and close: the run's result."""
        kernel, side, world = self.kernel, self.side, self.world
        with self._stopping_cleanly():
            _check_books(side, self.store_observer, world, self.end_us)
            # Close what is left of dead replicas' coroutines before the
            # summary counts the I/O their cleanup code tries (and is denied).
            kernel.close()
            summary = _summarize(self.scenario, self.seed, self.spec, kernel, self.trace,
                                 self.oracle, self.family, world)
            summary.update(side.work_done())
            if self.recorder is not None:
                summary.update(self.recorder.reach().figures())
                if self.recorder.replayed is not None:
                    summary[REPLAY_DIVERGED] = self.recorder.replayed.diverged
                    summary[STATE] = self.recorder.replayed.state
            backend_work = side.backend_work()
            findings = _findings(world)
        kernel.close()
        side.close()
        run_info = _run_info(self.started, self.end_us, kernel, self.spec, backend_work) | findings
        return RunResult(summary, run_info, self.trace, self.sampler)

    @contextlib.contextmanager
    def _tracer_stopped_on_error(self) -> Iterator[None]:
        """A run that stops on an error stops tracing the store's lines too."""
        try:
            yield
        except BaseException:
            if getattr(self, "recorder", None) is not None:
                self.recorder.stop()
            raise

    @contextlib.contextmanager
    def _stopping_cleanly(self) -> Iterator[None]:
        """A run that stops on an error closes its backend and says where it stopped."""
        kernel, side, seed = self.kernel, self.side, self.seed
        with quiet_store_logs():
            try:
                with self._tracer_stopped_on_error():
                    yield
            except BackendError as stopped:
                kernel.close()
                cleanup = side.close_after(stopped)
                said = str(stopped).rstrip(".")
                raise BackendError(f"{said}; the run stopped at {describe_time(kernel.now)} "
                                   f"(seed {seed}) and is incomplete: nothing was written"
                                   f"{cleanup}") from None
            except BaseException as stopped:
                kernel.close()
                cleanup = side.close_after(stopped)
                if isinstance(stopped, KeyboardInterrupt):  # told to stop: say where it was
                    stopped.add_note(f"the run was at {describe_time(kernel.now)} "
                                     f"(seed {seed}); nothing was written"
                                     f"{cleanup or ', and it cleaned up'}")
                elif cleanup:
                    stopped.add_note(cleanup.removeprefix("; "))
                raise


EMBEDDED = ("memory", "fakeredis")
"""The backends that live in the lab's process: no server to reach."""
BOOT_CHECK_US = 60_000_000


class _NoTraffic:
    """A request source that never has a request (``boot_check``)."""

    def next_arrival(self, now_us: int) -> None:
        return None


NO_TRAFFIC = _NoTraffic()
"""How long, in virtual time, ``boot_check`` waits for its one replica to boot."""


def boot_check(scenario: Scenario, backend: str | None = None) -> str | None:
    """Boot one replica's store of ``scenario``'s kind as a run would, with
    no traffic and no faults: None when it booted, else its first refusal
    (``check`` catches a plugin whose store cannot be built). Only on the
    embedded backends (fakeredis, the in-process ledger): check touches no server."""
    spec = resolve_backend(scenario, backend)
    if spec.kind not in EMBEDDED:
        spec = BackendSpec.parse(scenario.kind.default_backend)  # the in-process one
    lone = scenario.model_copy(update={
        "fleet": scenario.fleet.model_copy(update={"replicas": 1})})
    family = _family_of(lone)
    kernel, streams, trace = Kernel(lone.seed), Streams(lone.seed), Trace()
    oracle = family.oracle(lone, lone.kind, lone.settings)
    keys = lone.workload.keys
    key_space = KeySpace.of(keys)
    key_space.follow_pinned(lone.workload.arrivals)
    side = _open_server_side(lone, spec, family, oracle, kernel, trace, streams, key_space,
                             False, True, None, None)
    with quiet_store_logs():
        try:
            world = _build_world(lone, kernel, streams, trace, oracle, family,
                                 family.replica_observer(oracle), side.server, side.settings,
                                 key_space, traffic=False)
            world.start([])
            kernel.run(BOOT_CHECK_US)
            if "replica_started" in trace.columns["kind"]:
                return None
            return first_boot_error(trace.columns) or "it did not boot within a minute"
        finally:
            kernel.close()
            side.close()


def _family_of(scenario: Scenario) -> Family:
    try:
        return family_of(scenario.kind)
    except ValueError as error:
        raise ScenarioError(f"store: {error}") from None


def _bound(scenario: Scenario, spec: BackendSpec, kernel: Kernel,
           estimate: WorkEstimate | None) -> None:
    """Judged before anything is built: a run past its limits is refused at
    once, and one that outgrows its estimate is stopped as it runs."""
    limits = run_limits(scenario.limits)
    if estimate is None:
        estimate = estimate_work(scenario, spec)
    refuse_beyond(estimate, limits)
    RunGuard(kernel, limits, estimate, scenario.end_us).install()


@dataclass
class ServerSide:
    """The run's server (a Redis node, a service node, or none for stores kept
    in the replicas), the backend under it and the observer of its record."""

    settings: Any
    """The store's settings, their key prefix under the run's own namespace."""
    server: Server | ServiceNode | None = None
    observer: Any = None
    redis_backend: RedisBackend | ShardBackends | None = None
    service_backend: ServiceRunner | None = None
    migrations: list[PreparedMigration] = field(default_factory=list)
    script_seconds_before: float | None = None

    def work_done(self) -> dict[str, Any]:
        """The server's work, for the summary (deterministic: counts)."""
        if self.redis_backend is not None:
            work: dict[str, Any] = {
                "scripts_executed": self.redis_backend.executed,
                "store_commands_executed": self.redis_backend.store_commands,
                SCRIPT_ERRORS: self.redis_backend.script_errors,
                **spread_over_shards(self.server)}
            if self.redis_backend.script_errors:  # a Redis backend: its server, one or a cluster
                # No fault acts inside a script: its own input on this call exposed it.
                work[exposed_by_key(SCRIPT_ERRORS)] = f"script_failed on {self.server.first_failed}"
            return work
        if self.service_backend is not None:
            return {"transactions_executed": self.server.transactions}
        return {}

    def backend_work(self) -> dict[str, float]:
        """How the backend did it, for ``run_info`` (machine-dependent)."""
        if self.redis_backend is None:
            return {}
        server = self.server
        work = {
            "backend_seconds": round(self.redis_backend.backend_seconds, 3),
            "pipelines_sent": server.pipelines_sent,
            "commands_per_pipeline": round(
                server.pipelined_commands / max(1, server.pipelines_sent), 2),
        }
        script_seconds = self.redis_backend.server_script_seconds()
        if script_seconds is not None and self.script_seconds_before is not None:
            work["server_script_seconds"] = round(script_seconds - self.script_seconds_before, 3)
        return work

    def close(self) -> None:
        if self.redis_backend is not None:
            self.redis_backend.close()
        if self.service_backend is not None:
            self.service_backend.close()

    def close_after(self, stopped: BaseException) -> str:
        """Close after the run stopped on ``stopped``: whatever the cleanup
        meets (the server that stopped the run is likely gone too) is said in
        words, never raised over the error that stopped it."""
        try:
            self.close()
        except Exception as error:  # noqa: BLE001 - the first error is the one to tell
            backend = self.redis_backend or self.service_backend
            left = backend.leftovers if backend is not None else ""
            return (f"; the cleanup failed too ({type(error).__name__}: {error})"
                    + (f": {left}" if left else ""))
        return ""


def _open_server_side(scenario: Scenario, spec: BackendSpec, family: Family, oracle: Oracle,
                      kernel: Kernel, trace: Trace, streams: Streams, key_space: KeySpace,
                      allow_remote_redis: bool, pipelined: bool,
                      record_scripts: list | None, record_transactions: list | None
                      ) -> ServerSide:
    kind, settings = scenario.kind, scenario.settings
    if spec.family == "redis" and scenario.server.cluster is not None:
        cluster = scenario.server.cluster
        try:
            backends = open_shard_backends(spec, cluster.shards, cluster.replicas_per_shard)
        except ValueError as error:
            raise ScenarioError(f"server.cluster: {error}; drop --backend, or server.cluster "
                                "to run on one server") from None
        with _closed_unless_returned(backends):
            return _redis_side(scenario, backends, family, oracle, kernel, trace, streams,
                               key_space, False, record_scripts)
    if spec.kind in CLUSTER_KINDS:
        raise ScenarioError(f"backend: '{spec.kind}' runs a cluster of the scenario's shape, "
                            "and it has none: set [server] cluster = { shards = 3 } (or more)")
    if spec.family == "redis":
        backend = open_redis_backend(spec, allow_remote=allow_remote_redis)
        with _closed_unless_returned(backend):
            return _redis_side(scenario, backend, family, oracle, kernel, trace, streams,
                               key_space, pipelined, record_scripts)
    if kind.service is not None:
        if spec.url is not None:
            try:
                require_loopback(spec.url, allow_remote_redis,
                                 "creates a schema of its own there (dropped afterwards)")
            except ValueError as error:
                raise ScenarioError(f"backend: {error}") from None
        runner = open_service_backend(kind, spec.url, settings, key_space.followed,
                                      throwaway=spec.kind == "postgresql" and spec.url is None)
        with _closed_unless_returned(runner):
            runner.recording = record_transactions
            observer = family.server_observer(oracle, [(kind, settings)], key_space.followed)
            server = ServiceNode(kernel, runner, trace, observer=observer)
            observer.attach(server)
            return ServerSide(settings, server, observer, service_backend=runner)
    return ServerSide(settings)


@contextlib.contextmanager
def _closed_unless_returned(backend: Any) -> Iterator[None]:
    """A backend just opened is closed again if what follows fails or is told
    to stop before the run takes it over: its keys, library or schema go."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            backend.close()
        raise


def _redis_side(scenario: Scenario, backend: Any, family: Family, oracle: Oracle,
                kernel: Kernel, trace: Trace, streams: Streams, key_space: KeySpace,
                pipelined: bool, record_scripts: list | None) -> ServerSide:
    """The server side of a run on a Redis backend (fakeredis or a real server)."""
    backend.recording = record_scripts
    settings = _prefixed(scenario.settings, backend)
    migrations = [
        PreparedMigration(index, step, registry.get(step.to),
                          _prefixed(scenario.settings_after(step), backend),
                          tuple(step.namespaces or key_space.followed_namespaces))
        for index, step in enumerate(scenario.operations)]
    layouts = [(scenario.kind, settings)] + [(m.kind, m.settings) for m in migrations]
    observer = family.server_observer(oracle, layouts, key_space.followed)
    server_settings = scenario.server

    def eviction(*shard: int) -> Eviction | None:
        if not server_settings.maxmemory_keys:
            return None
        return Eviction(server_settings.maxmemory_keys, server_settings.eviction_policy,
                        streams.get("server", "eviction", *shard))

    server: Server | ClusterServer
    if isinstance(backend, ShardBackends):
        # Each shard its own node, its own maxmemory; one observer hears them all.
        server = ClusterServer([Server(kernel, shard_backend, trace, observer=observer,
                                       eviction=eviction(index), pipelined=False)
                                for index, shard_backend in enumerate(backend)])
    else:
        server = Server(kernel, backend, trace, observer=observer, eviction=eviction(),
                        pipelined=pipelined)
    observer.attach(server)
    return ServerSide(settings, server, observer, redis_backend=backend,
                      migrations=migrations,
                      script_seconds_before=backend.server_script_seconds())


def _reach_recorder(scenario: Scenario, side: ServerSide) -> ReachRecorder:
    """The recorder of a run's reach, on the run's Redis backend if it has one,
    tracing from now on."""
    recorder = ReachRecorder([scenario.kind, *(registry.get(step.to)
                                               for step in scenario.operations)])
    if side.redis_backend is not None:
        recorder.attach(side.redis_backend)
    recorder.start()
    return recorder


def _check_books(side: ServerSide, store_observer: ReplicaObserver, world: World,
                 end_us: int) -> None:
    """The oracle's books must be exactly what the stores hold: a lab bug
    otherwise, and the run stops rather than report numbers it cannot vouch for."""
    if side.server is not None:
        side.server.flush()
        side.server.expire_due(end_us)
        side.observer.check(side.server)
    else:
        store_observer.check(world.live_replicas())


def _findings(world: World) -> dict[str, str]:
    """The tracebacks behind an inconclusive run, for ``run --verbose`` (in
    ``run_info.json``: paths and line numbers are this checkout's, not the run's)."""
    found = {}
    if world.first_raise is not None:
        found["store_raised_traceback"] = world.first_raise.traceback
    if world.first_boot_traceback is not None:
        found["first_boot_failure_traceback"] = world.first_boot_traceback
    return found


def _run_info(started: tuple[float, float], end_us: int, kernel: Kernel, spec: BackendSpec,
              backend_work: dict[str, float]) -> dict[str, Any]:
    """What the run cost on this machine (``run_info.json``). ``started``: the
    wall clock and this process's CPU time when the run began."""
    wall_seconds = time.perf_counter() - started[0]
    cpu_seconds = time.process_time() - started[1]
    events = max(1, kernel.events_run)
    return {
        "wall_seconds": round(wall_seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),
        # Three significant digits: a long run at 10,000 replicas is slower
        # than real time (0.0123), a quiet small one far faster (1,230).
        "virtual_seconds_per_wall_second": _three_digits(end_us / 1e6 / wall_seconds),
        "kernel_events": kernel.events_run,
        "kernel_events_per_wall_second": round(kernel.events_run / wall_seconds),
        # The lab's own CPU (a real server's is its own process's, not counted).
        "wall_ms_per_event": _three_digits(wall_seconds * 1e3 / events),
        "cpu_ms_per_event": _three_digits(cpu_seconds * 1e3 / events),
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "python": sys.version.split()[0],
        "backend": str(spec),
        **backend_work,
    }


def _three_digits(value: float) -> float:
    return float(f"{value:.3g}")


def _build_world(scenario: Scenario, kernel: Kernel, streams: Streams, trace: Trace,
                 oracle: Oracle, family: Family, store_observer: ReplicaObserver,
                 server: Server | None, settings: Any, key_space: KeySpace,
                 traffic: bool = True) -> World:
    """The run's world; without ``traffic``, its replicas boot and take no request."""
    fleet = scenario.fleet
    clocks, sources = [], []
    for index in range(fleet.replicas):
        clock_rng = streams.get("replica", index, "clock")
        clocks.append(ReplicaClock(offset_us=fleet.clock_offset.sample(clock_rng),
                                   drift_ppm=fleet.clock_drift_ppm.sample(clock_rng)))
        sources.append(RequestSource(scenario.workload, key_space, fleet.replicas, index,
                                     streams.get("replica", index, "workload"),
                                     until_us=scenario.duration_us) if traffic else NO_TRAFFIC)
    return World(kernel=kernel, streams=streams, trace=trace, oracle=oracle, family=family,
                 store_observer=store_observer, kind=scenario.kind, settings=settings,
                 server=server, server_settings=scenario.server, links=link_settings(scenario),
                 clocks=clocks, sources=sources, script_names=script_names(scenario),
                 until_us=scenario.duration_us, boot_retry_us=fleet.boot_retry_us)


def _prefixed(settings: Any, backend: RedisBackend) -> Any:
    """Settings whose key prefix lies under the run's own namespace on the backend."""
    return settings.model_copy(update={"key_prefix": backend.namespace + settings.key_prefix})


def _summarize(scenario: Scenario, seed: int, spec: BackendSpec, kernel: Kernel, trace: Trace,
               oracle: Oracle, family: Family, world: World) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "store": scenario.kind.name,
        "backend": spec.kind,
        "seed": seed,
        "replicas": scenario.fleet.replicas,
        "virtual_duration_us": scenario.duration_us + scenario.drain_us,
        **family.summary.run_facts(scenario.kind),
    }
    summary.update(oracle.summary(kernel.now, world.fault_clock.last_fault_us))
    counts = _trace_counts(trace)
    for kind_name in COUNTED_EVENTS + family.counted_events:
        summary[f"{kind_name}_count"] = counts.get(kind_name, 0)
    for name in (*MIGRATION_TOTALS, *(name for name, _ in family.migration_totals)):
        summary[name] = world.counts.get(name, 0)
    summary["noscript_replies_count"] = sum(
        1 for outcome in trace.columns["outcome"] if outcome == "error:NOSCRIPT")
    summary["swallowed_io_by_dead_replicas"] = kernel.swallowed_io
    summary[STORE_ANSWERS] = store_answers(counts, family.timeline.served,
                                           family.timeline.refused)
    if world.first_raise is not None:
        summary[STORE_RAISED] = world.first_raise.line
    reason = inconclusive_reason(summary, first_boot_error(trace.columns))
    if reason is not None:
        summary[INCONCLUSIVE] = reason
    summary["trace_events"] = len(trace)
    summary["trace_fingerprint"] = trace.fingerprint
    return summary


def _trace_counts(trace: Trace) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in trace.columns["kind"]:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _peak_rss_mib() -> float:
    return peak_resident_memory() / 2**20
