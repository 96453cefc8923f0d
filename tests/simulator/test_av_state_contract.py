"""The session-counter family's fault contract (``simulator.families.av_state.contract``)
and the verdict it makes (issue 24, DESIGN section 12).

* The contract is data, and every clause cites seed lines that exist; every
  cause the oracle files damage under is one a clause allows.
* A sound store is never blamed: each shipped fixed store (``av_state.redis``,
  ``av_state.in_memory``) under every fault class alone, and all of them
  together, has nothing filed under ``store_logic``.
* Every invariant's parts by cause add up to its total (or it is
  ``store_only``), on every committed av_state scenario.
* The contract's own rules, told to the oracle fact by fact: a re-sent refund
  crediting twice, a counter expiring while its session still calls it, a
  refund marker with no TTL are the store's, exposed by what the lab did.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from blame import blamed_on_the_store
from scenario_data import merge

from simulator.families import invariants_for
from simulator.families.av_state import causes
from simulator.families.av_state.contract import CONTRACT
from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import BEGAN, exposed_by_key
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario, parse_scenario
from stores import registry
from tests.simulator.test_av_state_oracle import TTL_US, Story, call, marker_without_ttl

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
SCENARIOS = sorted((REPO / "data" / "scenarios").glob("av-state*.toml"))

SESSIONS = {"lifetime": "uniform(2m, 8m)", "call_every": "exponential(40s)",
            "call_duration": "lognormal(1s, 0.5)",
            "counters": {"tokens": {"amount": "uniform(100, 4000)", "limit": 20_000},
                         "total_calls": {"amount": 1, "limit": 8}},
            "refunds": {"chance": 0.6, "share": 0.5, "whole": 0.2,
                        "counters": ["tokens", "total_calls"]},
            "tally": "tool_calls", "retries": 1, "retry_after": "1s", "cleanup_after": "0s"}

BASE = {
    "name": "av-state-contract", "duration": "20m", "drain": "12m", "store": "av_state.redis",
    "fleet": {"replicas": 3},
    "network": {"latency": "lognormal(1ms, 0.5)", "timeout": "200ms"},
    "workload": {"arrivals": "poisson(120/h)", "keys": {"subjects": 6}, "sessions": SESSIONS},
}
"""About forty sessions of a few calls each: budgets reached, refunds (some
whole) and tallies, retries racing each session's cleanup."""

LONG = {"duration": "30h", "drain": "2h", "workload": {"arrivals": "poisson(3/h)", "sessions": {
    "lifetime": "uniform(26h, 30h)", "call_every": "exponential(10h)"}}}
"""Sessions of more than a day, idle for hours between calls: some counters
outlive their 24 h TTL unused and expire (what the TTL is for)."""

FAULT_CLASSES: dict[str, dict] = {
    "request_loss": {"network": {"request_loss": 0.05}},
    "reply_loss": {"network": {"reply_loss": 0.05}},
    "driver_retries": {"network": {"reply_loss": 0.05, "retries": {"count": 2}}},
    "misaligned_replies": {"network": {"connection": "multiplexed", "reply_loss": 0.05}},
    "slow_replies": {"faults": {"slow_reply": {"rate": "4/m", "extra": "300ms"}}},
    "connection_stalls": {"faults": {"connection_stall": {"rate": "2/m"}}},
    "connection_resets": {"faults": {"connection_reset": {"rate": "2/m"}}},
    "dropped_waiters": {"network": {"connection": "multiplexed"},
                        "faults": {"dropped_waiter": {"rate": "2/m"}}},
    "crashes": {"faults": {"crash": {"rate": "6/h", "restart_after": "5s"}}},
    "pauses": {"faults": {"pause": {"rate": "6/h", "duration": "2s"}}},
    "partitions": {"faults": {"partition": {"rate": "6/h", "duration": "5s"}}},
    "latency_spikes": {"faults": {"latency_spike": {"rate": "6/h", "extra": "300ms"}}},
    "shared_prefixes": {"workload": {"sessions": {"prefix_from": "subject"}}},
    "restart_losing_counters": {"faults": {"server_restart": {"rate": "6/h", "down_for": "2s"}},
                                "server": {"persistence": "none"}},
    "failover": {"faults": {"failover": {"rate": "6/h", "lag": "30s"}}},
    "eviction": {"server": {"maxmemory_keys": 12}},
    "counters_expiring": LONG,
}
"""Every fault class of the lab's (and each race the workload decides), alone."""

SERVER_CLASSES = {"restart_losing_counters", "failover", "eviction", "latency_spikes"}
"""The classes that hit the Redis server: the in-memory twin has none."""

TWIN_CLASSES = {"crashes", "pauses", "shared_prefixes", "counters_expiring"}
"""The classes that reach the in-memory twin, which has no network and no server."""

TOGETHER = "all_together"


def everything(kind: str) -> dict:
    """Every fault class the kind can meet, at once (the long sessions aside:
    days of virtual time at these rates would take minutes)."""
    change: dict = {}
    for name, one in FAULT_CLASSES.items():
        if name == "counters_expiring" or (kind != "av_state.redis" and name not in TWIN_CLASSES):
            continue
        change = merge(change, one)
    return change


def scenario_for(kind: str, name: str) -> dict:
    change = everything(kind) if name == TOGETHER else FAULT_CLASSES[name]
    return merge(merge(BASE, change), {"store": kind})


def run(data: dict, seed: int = 1):
    return run_scenario(parse_scenario(data), seed=seed).summary


# -- the contract, as data -------------------------------------------------------


def test_every_cause_the_oracle_files_is_one_a_clause_allows():
    filed = {cause for names in (causes.OVERSHOOT_CAUSES, causes.MINTED_CAUSES,
                                 causes.DOUBLE_DEBIT_CAUSES, causes.FALSE_REFUSAL_CAUSES,
                                 causes.RESURRECTION_CAUSES, causes.RESET_CAUSES,
                                 causes.TTL_CAUSES, causes.PARTIAL_CAUSES) for cause in names}
    assert filed <= set(CONTRACT.causes), filed - set(CONTRACT.causes)
    assert STORE_LOGIC in CONTRACT.causes


# -- a sound store is never blamed ------------------------------------------------

CASES = [(kind, name) for kind in ("av_state.redis", "av_state.in_memory")
         for name in (*FAULT_CLASSES, TOGETHER)
         if kind == "av_state.redis" or name in (*TWIN_CLASSES, TOGETHER)]


@pytest.mark.parametrize(("kind", "name"), CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_a_shipped_fixed_store_is_never_blamed_under_any_fault_class_or_all_together(kind,
                                                                                      name):
    summary = run(scenario_for(kind, name))
    assert summary["calls_committed"] > 0 and summary["sessions_opened"] > 10
    assert blamed_on_the_store(summary) == {}
    assert not any(key.endswith("_exposed_by") for key in summary)


def test_the_fault_classes_do_damage_the_contract_allows():
    """Not vacuous: the classes that may do damage did, filed under their clause's cause."""
    moved = {name: run(scenario_for("av_state.redis", name)) for name in (
        "reply_loss", "driver_retries", "restart_losing_counters", "eviction",
        "counters_expiring", "shared_prefixes")}
    assert moved["reply_loss"]["double_debits_by_reply_lost"] > 0
    assert moved["driver_retries"]["double_debits_by_duplicate_execution"] > 0
    assert moved["restart_losing_counters"]["counter_resets_by_server_data_loss"] > 0
    assert moved["eviction"]["counter_resets_by_evicted"] > 0
    assert moved["counters_expiring"]["counter_resets_by_counter_expired"] > 0
    assert moved["shared_prefixes"]["counter_resets_by_shared_prefix"] > 0


# -- parts by cause add up -----------------------------------------------------------

COMMITTED = [*SCENARIOS, *sorted((REPO / "data" / "scenarios" / "hunt").glob("av-state*.toml"))]


@functools.cache
def committed_summary(path: Path) -> dict[str, Any]:
    return run_scenario(load_scenario(path), seed=1).summary


@pytest.mark.parametrize("path", COMMITTED, ids=[path.stem for path in COMMITTED])
def test_every_invariant_s_parts_by_cause_add_up_to_its_total(path):
    summary = committed_summary(path)
    for invariant in invariants_for(registry.get(summary["store"])):
        parts = invariant.causes(summary)
        if invariant.store_only:
            assert parts == {STORE_LOGIC: summary[invariant.metric]}
            continue
        assert parts, f"{invariant.metric} has no parts by cause"
        assert sum(parts.values()) == summary[invariant.metric], (invariant.metric, parts)


# -- the contract's rules, fact by fact -------------------------------------------


def test_a_re_sent_refund_crediting_twice_is_the_store_s_exposed_by_the_re_send():
    story = Story().open(1, call(100, 1_000, refund=50)).charge(1, 0, {"tokens": 100})
    story.refund_sent(1).run(1, {"tokens": 50})
    story.oracle.message_fault(1, "call_retried", "refund")
    story.run(1, {"tokens": 0}).refund_returned(1)
    summary = story.summary()
    assert summary["budget_minted_units_by_store_logic"] == 50 == summary["budget_minted_units"]
    assert summary[exposed_by_key("budget_minted_units")] == "call_retried on refund"
    assert "refund_many on replica 0 for session 1 call 0" in summary[BEGAN]


def test_a_counter_expiring_while_its_session_still_calls_it_is_the_store_s():
    # Charged, then refused (a refusal that did not refresh the TTL), then
    # expired a TTL after the charge but less than a TTL after the refusal.
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    story.tick(TTL_US // 2)
    story.send(1, 1).run(1, {}, read=("tokens",)).answer(1, 1, "refused", 0)
    story.tick(TTL_US // 2)
    story.drop(1, "key_expired", {"tokens": None})
    summary = story.summary()
    assert summary["counter_resets_by_store_logic"] == 1 == summary["counter_resets"]
    assert summary[exposed_by_key("counter_resets")] == "counter_expired"


def test_a_counter_unused_for_its_whole_ttl_may_expire():
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    story.tick(TTL_US)
    story.drop(1, "key_expired", {"tokens": None})
    summary = story.summary()
    assert summary["counter_resets_by_counter_expired"] == 1
    assert blamed_on_the_store(summary) == {}


def test_a_refund_marker_written_without_ttl_is_the_store_s():
    summary = marker_without_ttl().summary()
    assert summary["refund_markers_without_ttl"] == 1
    assert summary[exposed_by_key("refund_markers_without_ttl")] == "no fault"
    invariant = next(i for i in invariants_for(registry.get("av_state.redis"))
                     if i.metric == "refund_markers_without_ttl")
    assert invariant.store_only
