"""The lease fault contract (``simulator.families.axond_leases.contract``)
and the oracle that files by it.

* every clause cites seed lines that exist and files under a cause the
  oracle knows;
* the shipped fixed store, under each fault class alone and all of them
  together, is never blamed (0 ``store_logic``): a sound store suffers only
  what the contract allows;
* on every committed lease scenario, each invariant's parts by cause add up
  to its total (or it is ``store_only``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from blame import blamed_on_the_store
from scenario_data import merge

from simulator.families.axond_leases.causes import DENIAL_CAUSES, EXCESS_CAUSES, LEAK_CAUSES
from simulator.families.axond_leases.contract import CONTRACT
from simulator.families.axond_leases.invariants import INVARIANTS
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
SCENARIOS = sorted((REPO / "data" / "scenarios").rglob("leases*.toml"))

BASE = {
    "name": "leases-contract", "duration": "6s", "drain": "6s", "store": "axond_leases.redis",
    "store_settings": {"max_in_flight": 3, "lease_ttl": "5s", "timeout": "250ms"},
    "fleet": {"replicas": 4},
    "workload": {"arrivals": "poisson(30/s)", "keys": {"subjects": 2},
                 "duration": "exponential(200ms)"},
}
"""Two subjects, three slots each, busy enough that every fault lands on
acquires and releases alike."""


def at(when: str, fault: str, **more) -> dict:
    return {"at": when, "fault": fault, **more}


def on_every_replica(when: str, fault: str, **more) -> list[dict]:
    return [at(when, fault, replica=replica, **more) for replica in range(4)]


FAULT_CLASSES: dict[str, dict] = {
    "crash": {"faults": {"schedule": [at("2s", "crash", replica=0, restart_after="1s")]}},
    "pause": {"faults": {"schedule": [at("2s", "pause", replica=1, duration="600ms")]}},
    "partition": {"faults": {"schedule": [at("2s", "partition", replica=2,
                                             duration="700ms")]}},
    "acquire_request_lost": {"faults": {"schedule": on_every_replica(
        "1s", "lose_request", call="acquire", count=2)}},
    "acquire_reply_lost": {"faults": {"schedule": on_every_replica(
        "1s", "lose_reply", call="acquire", count=2)}},
    "release_request_lost": {"faults": {"schedule": on_every_replica(
        "1s", "lose_request", call="release", count=2)}},
    "release_reply_lost": {"faults": {"schedule": on_every_replica(
        "1s", "lose_reply", call="release", count=2)}},
    "script_load_reply_lost": {"faults": {"schedule": [at("0ms", "lose_reply", replica=0,
                                                          call="SCRIPT LOAD")]}},
    "connection_stall": {"faults": {"schedule": on_every_replica("2s", "connection_stall")}},
    "connection_reset": {"faults": {"schedule": on_every_replica("2s", "connection_reset")}},
    "slow_reply": {"faults": {"schedule": on_every_replica("2s", "slow_reply",
                                                          extra="300ms")}},
    "dropped_waiter": {"faults": {"schedule": on_every_replica("2s", "dropped_waiter")}},
    "caller_cancelled": merge({"workload": {"patience": "exponential(100ms)"}},
                              {"faults": {"schedule": on_every_replica(
                                  "2s", "slow_reply", extra="300ms")}}),
    "message_loss_rates": {"network": {"request_loss": 0.02, "reply_loss": 0.02}},
    "driver_retries": {"network": {"reply_loss": 0.03, "retries": 2}},
    "latency_spike": {"faults": {"schedule": [at("2s", "latency_spike", duration="1s",
                                                 extra="400ms")]}},
    "server_restart_persisted": merge(
        {"faults": {"schedule": [at("2s", "server_restart", down_for="1s")]}},
        {"server": {"persistence": "aof-always"}}),
    "server_restart_losing_leases": merge(
        {"faults": {"schedule": [at("2s", "server_restart", down_for="100ms")]}},
        {"server": {"persistence": "none"}}),
    "failover": {"faults": {"schedule": [at("2s", "failover", lag="1s", down_for="100ms")]}},
    "eviction": {"workload": {"keys": {"subjects": 6}}, "server": {"maxmemory_keys": 3}},
    "short_ttl": {"store_settings": {"lease_ttl": "150ms"}},
    "fail_open": merge({"faults": {"schedule": [at("2s", "server_restart", down_for="1s")]}},
                       {"store_settings": {"on_unavailable": "allow"},
                        "server": {"persistence": "aof-always"}}),
}
"""Every fault class the lab has that a lease store can suffer, alone."""


def all_together() -> dict:
    """Every class above at once (the last TTL, persistence and policy win)."""
    change: dict = {}
    schedule: list[dict] = []
    for name, each in FAULT_CLASSES.items():
        if name in ("eviction", "short_ttl"):
            continue  # they reshape the run; kept alone
        schedule += each.get("faults", {}).get("schedule", [])
        rest = {key: value for key, value in each.items() if key != "faults"}
        change = merge(change, rest)
    return merge(change, {"faults": {"schedule": schedule}})


RUNS = {**FAULT_CLASSES, "all_together": all_together()}


def run(change: dict, seed: int = 1) -> dict:
    return run_scenario(parse_scenario(merge(BASE, change)), seed=seed).summary


# -- the contract as data ------------------------------------------------------


def test_every_clause_files_under_a_cause_the_oracle_knows():
    known = set(EXCESS_CAUSES) | set(LEAK_CAUSES) | set(DENIAL_CAUSES) | {"crash"}
    for clause in CONTRACT.clauses:
        assert clause.cause in known, (clause.lab_did, clause.cause)
        assert clause.may_suffer and clause.never


# -- a sound store is never blamed ------------------------------------------------


@pytest.mark.parametrize("name", [*sorted(FAULT_CLASSES),
                                  "all_together"])
def test_the_fixed_store_is_never_blamed_under_a_fault_class(name):
    summary = run(RUNS[name])
    assert summary["requests_completed"] > 0
    assert blamed_on_the_store(summary) == {}
    assert summary["misaligned_results_accepted"] == 0


# -- parts add up ------------------------------------------------------------------


def parts_add_up(summary: dict) -> None:
    for invariant in INVARIANTS:
        total = summary[invariant.metric]
        parts = invariant.causes(summary)
        if invariant.store_only:
            assert parts == {"store_logic": total}
            continue
        assert parts, invariant.metric
        assert math.isclose(sum(parts.values()), total, rel_tol=1e-9, abs_tol=1e-6), (
            invariant.metric, total, parts)


@pytest.mark.parametrize("path", SCENARIOS, ids=[path.stem for path in SCENARIOS])
def test_every_invariant_s_parts_add_up_to_its_total_on_a_committed_scenario(path):
    scenario = load_scenario(path)
    parts_add_up(run_scenario(scenario, seed=scenario.seed or 1).summary)


def test_every_invariant_s_parts_add_up_under_every_fault_class_at_once():
    parts_add_up(run(RUNS["all_together"]))
