"""The lab against its backend's ceiling: how close a run comes to the rate at
which the backend can execute the same store scripts with nothing else going on.

A run of a workload's scenario (``simulator.bench.workloads``) records every script the server
executes. The ceiling replays exactly those scripts — the store's own bodies,
not the lab's shim around them, with the same keys and arguments in the same
order — straight to a fresh backend, pipelined as deep as redis-py allows.
Lab rate: scripts the run executed per second of its wall time (everything
included: kernel, network, oracle, trace, shim). Ceiling: scripts per second
of the replay.

The budget family's workload (``data/scenarios/bench-2000.toml``, 2,000
replicas) has no faults, so the replay meets the same state the run did. A
workload with faults (the other families' scenarios) replays every script the
server executed, a re-sent one included, in the order it ran; what the replay
leaves out is the lab's own deletion of keys whose virtual deadline passed
(virtual expiry is the shim's, and the replay runs without it), so now and
then a replayed script meets a key the run had expired and takes another
branch of the same body.
"""

from __future__ import annotations

import time

from simulator.backends import BackendSpec, open_redis_backend
from simulator.bench.lines import BenchLine
from simulator.bench.workloads import BUDGET, BenchWorkload
from simulator.run.compose import run_scenario

REPLAY_PIPELINE_DEPTH = 1_000


def measure_backend(backend: str, quick: bool, label: str, ratio_name: str, target: str,
                    workload: BenchWorkload = BUDGET, name: str | None = None) -> BenchLine:
    """Run ``workload`` on ``backend``, then replay its scripts directly; the
    line is ``name`` (by default the backend's: ``Redis ceiling``, ``fakeredis``)."""
    scenario = workload.load(quick)
    recorded: list = []
    result = run_scenario(scenario, backend=backend, record_scripts=recorded)
    lab_rate = result.summary["scripts_executed"] / result.run_info["wall_seconds"]
    ceiling_rate = replay_directly(recorded, backend)
    figures = (f"{scenario.name} on {where(backend)}, {scenario.fleet.replicas:,} replicas, "
               f"{len(recorded):,} scripts; lab {lab_rate:,.0f} scripts/s "
               f"({result.run_info['commands_per_pipeline']} per pipeline), "
               f"{label} {ceiling_rate:,.0f} scripts/s")
    return BenchLine(name or backend_name(backend), figures, ratio_name,
                     lab_rate / ceiling_rate, target)


def replay_directly(recorded: list, backend: str) -> float:
    """Scripts per second when ``recorded`` is sent straight to a fresh backend."""
    target = open_redis_backend(BackendSpec.parse(backend))
    client = target.client
    try:
        shas = {body: client.script_load(body) for body in {body for body, _, _ in recorded}}
        commands = [("EVALSHA", shas[body], len(keys),
                     *(target.namespace + key for key in keys), *args)
                    for body, keys, args in recorded]
        started = time.perf_counter()
        for start in range(0, len(commands), REPLAY_PIPELINE_DEPTH):
            pipe = client.pipeline(transaction=False)
            for command in commands[start:start + REPLAY_PIPELINE_DEPTH]:
                pipe.execute_command(*command)
            pipe.execute(raise_on_error=False)
        elapsed = time.perf_counter() - started
    finally:
        target.close()
    return len(commands) / elapsed


def backend_name(backend: str) -> str:
    return "fakeredis" if backend == "fakeredis" else "Redis ceiling"


def where(backend: str) -> str:
    """What the figures ran on, in a word: a real server or the embedded fake."""
    return "fakeredis" if backend == "fakeredis" else "Redis"
