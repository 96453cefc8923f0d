"""One run of a scenario: build the world, run the kernel, measure, write.

The result's ``summary`` depends only on the scenario and the seed (and is
the same on every backend but for its ``backend`` field); wall time, memory
and versions go to ``run_info`` instead, since they depend on the machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import resource
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from simulator.backends import BackendSpec, RedisBackend, open_redis_backend
from simulator.fleet import Replica, start_replica
from simulator.kernel import Kernel
from simulator.network import LinkSettings
from simulator.oracle import BudgetOracle
from simulator.runtime import ReplicaClock
from simulator.scenario import Scenario, ScenarioError
from simulator.server import Server
from simulator.streams import Streams
from simulator.trace import Trace
from simulator.workload import KeySpace, RequestSource


@dataclass
class RunResult:
    summary: dict[str, Any]
    run_info: dict[str, Any]
    trace: Trace = field(repr=False)

    def write(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").write_text(json.dumps(self.summary, indent=2) + "\n")
        (out_dir / "run_info.json").write_text(json.dumps(self.run_info, indent=2) + "\n")
        self.trace.write_parquet(out_dir / "trace.parquet")


@contextlib.contextmanager
def quiet_store_logs() -> Any:
    """Stores log every lost call, as they should in production; inside a run
    those are thousands of lines the trace already holds, so they are muted."""
    logger = logging.getLogger("stores")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def script_names(package: str) -> dict[str, str]:
    """The Lua scripts shipped with a store family, by SHA1, named by file."""
    names = {}
    for entry in resources.files(package).iterdir():
        if entry.name.endswith(".lua"):
            names[hashlib.sha1(entry.read_bytes()).hexdigest()] = entry.name.removesuffix(".lua")
    return names


def resolve_backend(scenario: Scenario, backend: str | None) -> BackendSpec:
    kind = scenario.kind
    try:
        spec = BackendSpec.parse(backend or scenario.backend or kind.default_backend)
    except ValueError as error:
        raise ScenarioError(f"backend: {error}") from None
    if spec.family not in kind.backends:
        wanted = " or ".join("'fakeredis' or 'redis://...'" if b == "redis" else f"'{b}'"
                             for b in kind.backends)
        raise ScenarioError(
            f"backend: the store {kind.name!r} runs on {wanted}, not {str(spec)!r}"
        )
    return spec


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
    )


def run_scenario(scenario: Scenario, seed: int | None = None, backend: str | None = None,
                 allow_remote_redis: bool = False, progress: Any = None) -> RunResult:
    """Run ``scenario`` once. ``progress(done_us, total_us)`` is called as
    virtual time advances, when given."""
    started = time.perf_counter()
    seed = scenario.seed if seed is None else seed
    spec = resolve_backend(scenario, backend)
    settings = scenario.settings
    kernel = Kernel(seed)
    streams = Streams(seed)
    trace = Trace()
    oracle = BudgetOracle()

    redis_backend: RedisBackend | None = None
    server: Server | None = None
    if spec.family == "redis":
        redis_backend = open_redis_backend(spec, allow_remote=allow_remote_redis)
        settings = settings.model_copy(
            update={"key_prefix": redis_backend.namespace + settings.key_prefix})
        server = Server(kernel, redis_backend, trace)
    end_us = scenario.duration_us + scenario.drain_us
    with quiet_store_logs():
        try:
            replicas = _start_fleet(scenario, kernel, streams, trace, oracle, server, settings)
            step_us = max(1, end_us // 100)
            for until_us in range(step_us, end_us + step_us, step_us):
                kernel.run(min(until_us, end_us))
                if progress is not None:
                    progress(min(until_us, end_us), end_us)
            summary = _summarize(scenario, seed, spec, kernel, trace, oracle, server, replicas,
                                 settings)
        finally:
            kernel.close()
            if redis_backend is not None:
                redis_backend.close()
    wall_seconds = time.perf_counter() - started
    run_info = {
        "wall_seconds": round(wall_seconds, 3),
        "virtual_seconds_per_wall_second": round(end_us / 1e6 / wall_seconds, 1),
        "kernel_events_per_wall_second": round(kernel.events_run / wall_seconds),
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "python": sys.version.split()[0],
        "backend": str(spec),
    }
    return RunResult(summary, run_info, trace)


def _start_fleet(scenario: Scenario, kernel: Kernel, streams: Streams, trace: Trace,
                 oracle: BudgetOracle, server: Server | None, settings: Any) -> list[Replica]:
    kind = scenario.kind
    fleet = scenario.fleet
    names = script_names(kind.package)
    keys = scenario.workload.keys
    key_space = KeySpace(keys.namespaces, keys.subjects, keys.zipf_exponent)
    links = link_settings(scenario)
    replicas = []
    for index in range(fleet.replicas):
        clock_rng = streams.get("replica", index, "clock")
        clock = ReplicaClock(offset_us=fleet.clock_offset.sample(clock_rng),
                             drift_ppm=fleet.clock_drift_ppm.sample(clock_rng))
        replica = start_replica(index, 0, kernel=kernel, streams=streams, trace=trace,
                                oracle=oracle, kind=kind, server=server, link_settings=links,
                                clock=clock, script_names=names)
        source = RequestSource(scenario.workload, key_space, fleet.replicas, index,
                               streams.get("replica", index, "workload"))
        kernel.spawn(replica.main(settings, source, scenario.duration_us, fleet.boot_retry_us),
                     replica.owner, "replica main")
        replicas.append(replica)
    return replicas


def _summarize(scenario: Scenario, seed: int, spec: BackendSpec, kernel: Kernel, trace: Trace,
               oracle: BudgetOracle, server: Server | None, replicas: list[Replica],
               settings: Any) -> dict[str, Any]:
    kind = scenario.kind
    now_ms = ReplicaClock().now_ms(kernel.now)
    if server is not None:
        server.expire_due(kernel.now)
        source: Any = server.backend.read
    else:
        source = [replica.store for replica in replicas if replica.store is not None]

    def recorded(key: tuple[str, str]) -> Any:
        return kind.inspect(source, settings, kind.contract.BudgetKey(*key), now_ms)

    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "store": kind.name,
        "backend": spec.kind,
        "seed": seed,
        "replicas": scenario.fleet.replicas,
        "virtual_duration_us": scenario.duration_us + scenario.drain_us,
    }
    summary.update(oracle.summary(recorded, getattr(settings, "subject_cap_microdollars", None)))
    counts = _trace_counts(trace)
    for kind_name in ("replica_boot_failed", "call_executed", "request_lost", "reply_lost",
                      "call_retried", "call_timed_out", "late_reply", "reply_to_dead_replica",
                      "key_expired"):
        summary[f"{kind_name}_count"] = counts.get(kind_name, 0)
    summary["swallowed_io_by_dead_replicas"] = kernel.swallowed_io
    summary["kernel_events"] = kernel.events_run
    summary["trace_events"] = len(trace)
    summary["trace_fingerprint"] = trace.fingerprint
    return summary


def _trace_counts(trace: Trace) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in trace.columns["kind"]:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
