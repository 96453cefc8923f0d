"""A service family against its service's ceiling: how close a run comes to the
rate at which the service itself commits the same transactions with nothing
else going on.

The run records every transaction its service node executes, as the call the
service got (``(verb, args, now_ms)``: the trait call and its arguments, at
the run's virtual clock). The ceiling opens a fresh service for the same
keys and settings (funded the same way, untimed) and replays exactly those
calls, in the same order, one after the other as the node runs them, inside
one coroutine: on the in-process ledger that is the store's own Python and
nothing else; on PostgreSQL it is the driver and the database, without the
lab's hop to the service's event-loop thread for every transaction. A
service's transactions are deterministic in their arguments and its state,
so the replay meets the same state the run did and gets the same answers,
faults and all (a transaction re-sent by the network model was executed
twice, and is replayed twice).

Lab rate: transactions the run executed per second of its wall time
(everything included: kernel, network, holders, oracle, trace). Ceiling:
transactions per second of the replay.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from simulator.backends.service_backend import open_service_backend
from simulator.bench.lines import BenchLine
from simulator.bench.workloads import BenchWorkload
from simulator.run.compose import run_scenario
from simulator.scenario.model import Scenario
from simulator.world.requests import KeySpace

Transaction = tuple[str, tuple[Any, ...], int]


def measure_service(workload: BenchWorkload, quick: bool, name: str, url: str | None,
                    where: str, label: str, ratio_name: str, target: str) -> BenchLine:
    """Run ``workload`` on the service at ``url`` (in process for None), then
    replay its transactions straight against a fresh service there."""
    scenario = workload.load(quick)
    recorded: list[Transaction] = []
    result = run_scenario(scenario, backend=url or "memory", record_transactions=recorded)
    lab_rate = result.summary["transactions_executed"] / result.run_info["wall_seconds"]
    ceiling_rate = replay_directly(scenario, recorded, url)
    figures = (f"{scenario.name} on {where}, {scenario.fleet.replicas:,} replicas, "
               f"{len(recorded):,} transactions; lab {lab_rate:,.0f} transactions/s, "
               f"{label} {ceiling_rate:,.0f} transactions/s")
    return BenchLine(name, figures, ratio_name, lab_rate / ceiling_rate, target)


def replay_directly(scenario: Scenario, recorded: list[Transaction], url: str | None) -> float:
    """Transactions per second when ``recorded`` is replayed against a fresh
    service of ``scenario``'s kind at ``url``."""
    with fresh_service(scenario, url) as runner:
        elapsed = runner.run(_replay(runner.service, recorded))
    return len(recorded) / elapsed


async def _replay(service: Any, recorded: list[Transaction]) -> float:
    """Seconds the service takes to commit ``recorded``, one after the other."""
    started = time.perf_counter()
    for verb, args, now_ms in recorded:
        await service.transact(verb, args, now_ms)
    return time.perf_counter() - started


@contextmanager
def fresh_service(scenario: Scenario, url: str | None) -> Iterator[Any]:
    """The service a run of ``scenario`` opens, opened the same way: its kind,
    settings and the key space's keys (one funded account each)."""
    keys = scenario.workload.keys
    key_space = KeySpace.of(keys)
    runner = open_service_backend(scenario.kind, url, scenario.settings, key_space.keys)
    try:
        yield runner
    finally:
        runner.close()
