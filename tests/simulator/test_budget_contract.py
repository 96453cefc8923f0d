"""The budget family's fault contract, held to (issue 24, DESIGN section 12).

* every clause of ``simulator.families.axond_budget.contract`` cites lines
  that exist in its seed;
* a sound store is never blamed: each shipped budget store, under each fault
  class the lab injects alone and under all of them together, has nothing
  filed under ``store_logic``;
* no damage hides: every invariant's parts by cause add up to its total, on
  every committed budget scenario;
* a v1 replica the operator left writing beside a v2 fleet is the
  operator's doing (``stray_layout_writer``), not the fixed store's.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
from scenario_data import merge

from simulator.families import invariants_for
from simulator.families.axond_budget.contract import CONTRACT
from simulator.plugin.attribution import STORE_LOGIC
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario, parse_scenario
from stores import registry
from tests.blame import blamed_on_the_store

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
SCENARIOS = REPO / "data" / "scenarios"

# -- the contract's citations -------------------------------------------------


def test_every_contract_cause_is_one_the_family_files():
    from simulator.families.axond_budget.causes import (
        DENIAL_CAUSES,
        LEAK_CAUSES,
        OVERSHOOT_CAUSES,
    )
    known = {*OVERSHOOT_CAUSES, *DENIAL_CAUSES, *LEAK_CAUSES, "message_lost", "replica_crash",
             "store_unavailable", "duplicate_execution"}
    assert set(CONTRACT.causes) <= known


# -- a sound store is never blamed ------------------------------------------

BASE: dict[str, Any] = {
    "name": "budget-contract", "duration": "2s", "drain": "2s",
    "store": "axond_budget.redis_v2",
    "store_settings": {"subject_cap_microdollars": 20_000, "namespace_cap_microdollars": 60_000,
                       "reservation_ttl": "500ms"},
    "fleet": {"replicas": 12},
    "network": {"latency": "lognormal(1ms, 0.3)", "timeout": "100ms"},
    "workload": {"arrivals": "poisson(300/s)", "keys": {"subjects": 6, "namespaces": 2},
                 "estimate_microdollars": 1000, "actual_microdollars": "uniform(0, 1000)",
                 "duration": "lognormal(40ms, 0.5)"},
}
"""Both caps binding in two seconds, so every kind of damage can happen."""

SETTINGS = {
    "axond_budget.redis_v1": {"subject_cap_microdollars": 20_000, "reservation_ttl": "500ms"},
    "axond_budget.redis_v2": BASE["store_settings"],
    "axond_budget.in_memory": {"subject_cap_microdollars": 20_000, "reservation_ttl": "500ms",
                               "max_subjects": 4, "idle_ttl": "0ms"},
}
"""The shipped budget stores (``axond_budget.none`` records nothing to judge)."""


def every_replica(fault: str, call: str, count: int = 2) -> list[dict[str, Any]]:
    return [{"at": "500ms", "fault": fault, "replica": replica, "call": call, "count": count}
            for replica in range(BASE["fleet"]["replicas"])]


FAULT_CLASSES: dict[str, dict[str, Any]] = {
    "reply_loss": {"network": {"reply_loss": 0.05}},
    "request_loss": {"network": {"request_loss": 0.05}},
    "retries": {"network": {"reply_loss": 0.05, "retries": 2}},
    "timeouts": {"network": {"latency": "lognormal(3ms, 1.0)", "timeout": "15ms"}},
    "lost_reserve_replies": {"faults": {"schedule": every_replica("lose_reply", "reserve")}},
    "lost_settle_requests": {"faults": {"schedule": every_replica("lose_request", "settle")}},
    "lost_settle_replies": {"faults": {"schedule": every_replica("lose_reply", "settle")}},
    "misaligned": {"network": {"connection": "multiplexed", "reply_loss": 0.02}},
    "crash": {"faults": {"crash": {"rate": "120/m", "restart_after": "200ms"}}},
    "pause": {"faults": {"pause": {"rate": "120/m", "duration": "700ms"}}},
    "partition": {"faults": {"partition": {"rate": "60/m", "duration": "300ms",
                                           "replicas": 3}}},
    "latency_spike": {"faults": {"latency_spike": {"rate": "60/m", "duration": "300ms",
                                                   "extra": "150ms"}}},
    "clock_skew": {"fleet": {"clock_offset": "normal(0ms, 50ms)"}},
    "server_restart": {"server": {"persistence": "none"},
                       "faults": {"schedule": [{"at": "300ms", "fault": "server_restart",
                                                "down_for": "50ms"}]}},
    "failover": {"faults": {"schedule": [{"at": "700ms", "fault": "failover", "lag": "300ms",
                                          "down_for": "50ms"}]}},
    "eviction": {"server": {"maxmemory_keys": 8, "eviction_policy": "allkeys-random"}},
    "fail_open": {"store_settings": {"on_unavailable": "allow"},
                  "faults": {"schedule": [{"at": "700ms", "fault": "server_restart",
                                           "down_for": "300ms"}]}},
}
"""Each fault class the lab injects, alone."""

SERVER_ONLY = {"reply_loss", "request_loss", "retries", "timeouts", "lost_reserve_replies",
               "lost_settle_requests", "lost_settle_replies", "misaligned", "partition",
               "latency_spike", "server_restart", "failover", "eviction", "fail_open"}
"""Classes that need a server between the fleet and the store (not in-memory)."""


def all_together(kind: str) -> dict[str, Any]:
    """Every class at once (those the kind can suffer), the schedules joined."""
    together: dict[str, Any] = {}
    schedule: list[dict[str, Any]] = []
    for name, change in FAULT_CLASSES.items():
        if name == "fail_open" or (kind.endswith("in_memory") and name in SERVER_ONLY):
            continue
        change = {**change}
        faults = dict(change.pop("faults", {}))
        schedule += faults.pop("schedule", [])
        together = merge(together, {**change, "faults": faults} if faults else change)
    if schedule:
        together = merge(together, {"faults": {"schedule": schedule}})
    return together


def scenario_for(kind: str, change: dict[str, Any]) -> dict[str, Any]:
    data = merge({**BASE, "store": kind, "store_settings": SETTINGS[kind]}, change)
    if kind.endswith("in_memory"):
        data["fleet"] = {**data["fleet"], "replicas": 3}
    for name in ("reserve", "settle"):  # the scripts of this kind's layout
        layout = "v2" if kind.endswith("v2") else "v1"
        for entry in data.get("faults", {}).get("schedule", []):
            if entry.get("call") == name:
                entry["call"] = f"{name}_{layout}"
    return data


CASES = [(kind, name) for kind in SETTINGS for name in [*FAULT_CLASSES, "all"]
         if not (kind.endswith("in_memory") and (name in SERVER_ONLY))]


@functools.cache
def fixed_summary(kind: str, name: str) -> dict[str, Any]:
    change = all_together(kind) if name == "all" else FAULT_CLASSES[name]
    return run_scenario(parse_scenario(scenario_for(kind, change)), seed=1).summary


@pytest.mark.parametrize(("kind", "name"), CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_a_shipped_store_is_never_blamed_under_a_fault_class(kind, name):
    summary = fixed_summary(kind, name)
    assert summary["requests_arrived"] > 0
    assert blamed_on_the_store(summary) == {}


# -- no damage hides: parts add up ------------------------------------------

BIG = {"bench-2000", "bench-scale-10k", "demo", "fleet-5000", "ttl-tuning"}
"""Committed scenarios too large for a fast test: run for their first half second."""


def budget_scenarios() -> list[Path]:
    found = []
    for path in sorted([*SCENARIOS.glob("*.toml"), *SCENARIOS.glob("mutants/*.toml")]):
        text = path.read_text()
        if re.search(r'^store = "axond_budget\.', text, re.MULTILINE):
            found.append(path)
    return found


def parts_that_do_not_add_up(summary: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Each invariant whose parts by cause do not sum to its total."""
    wrong = {}
    for invariant in invariants_for(registry.get(summary["store"])):
        total = summary.get(invariant.metric)
        if total is None or invariant.store_only:
            continue
        parts = sum(invariant.causes(summary).values())
        if abs(parts - total) > 0.01 * max(1, len(invariant.causes(summary))):
            wrong[invariant.metric] = (total, parts)
    return wrong


@pytest.mark.parametrize("path", budget_scenarios(),
                         ids=lambda path: str(path.relative_to(SCENARIOS).with_suffix("")))
def test_every_invariants_parts_add_up_to_its_total(path):
    scenario = load_scenario(path)
    if path.stem in BIG:
        scenario = scenario.model_copy(update={"duration_us": 500_000})
    summary = run_scenario(scenario, seed=1).summary
    assert parts_that_do_not_add_up(summary) == {}


# -- the operator's stray v1 writer -----------------------------------------


def test_a_stray_v1_writer_beside_a_v2_fleet_is_the_operators_not_the_stores():
    summary = run_scenario(load_scenario(SCENARIOS / "budget-stray-v1-writer.toml"),
                           seed=1).summary
    assert summary["wrongful_admissions"] > 0
    assert summary["cap_overshoot_by_stray_layout_writer_microdollars"] > 0
    assert blamed_on_the_store(summary) == {}
    assert summary["cap_overshoot_by_" + STORE_LOGIC + "_microdollars"] == 0


def test_the_contract_doc_lists_every_clause_and_every_fault_exposed_mutant():
    from mutants.budget import CATALOGUE
    doc = (REPO / "docs" / "contracts" / "axond_budget.md").read_text()
    for clause in CONTRACT.clauses:
        assert f"| {clause.lab_did} |" in doc, clause.lab_did
    for name in CATALOGUE:
        assert f"`{name}`" in doc, name
