"""Every metric of the summary moves: a metric nobody has seen nonzero is untested.

A handful of small exercises — the shipped stores under every kind of fault
the lab injects, the in-memory store, a migration the lab kills, and a few
broken stores from the mutant suite — are run once; every numeric metric of
the budget family's summary must be nonzero in at least one of them. A
metric that no run can move has no place in the summary.

The same runs check the other half of the verdict: the shipped stores, however
hard they are hit, never have damage filed under ``store_logic``, while each
broken store has.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import pytest
from scenario_data import merge

from simulator.mutate.kinds import mutant_kind
from simulator.mutate.lua import Mutation
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario, parse_scenario
from stores import registry
from stores.axond_budget import redis_kind
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"

BASE = {
    "name": "every-metric", "duration": "6s", "drain": "4s", "store": "axond_budget.redis_v2",
    "store_settings": {"subject_cap_microdollars": 20_000, "namespace_cap_microdollars": 150_000,
                       "reservation_ttl": "1s"},
    "fleet": {"replicas": 40},
    "network": {"latency": "lognormal(1ms, 0.3)", "timeout": "100ms"},
    "workload": {"arrivals": "poisson(400/s)", "keys": {"subjects": 10},
                 "estimate_microdollars": 1000, "actual_microdollars": "uniform(0, 1000)",
                 "duration": "lognormal(50ms, 0.5)"},
}
"""The v2 store with both caps binding, so both scopes take damage."""


def exercise(change: dict) -> dict:
    """``BASE`` with ``change``; an exercise naming another store states its
    settings whole (they need not fit the v2 store's)."""
    data = merge(BASE, change)
    if "store" in change and "store_settings" in change:
        data["store_settings"] = change["store_settings"]
    return data


def lose(fault: str, call: str, replicas: range, at: str = "1s", count: int = 2) -> list[dict]:
    return [{"at": at, "fault": fault, "replica": replica, "call": call, "count": count}
            for replica in replicas]


def everyone(fault: str, call: str, at: str, count: int) -> list[dict]:
    return lose(fault, call, range(BASE["fleet"]["replicas"]), at, count)


class CleansUpOnCancel(RedisBudget):
    """The v2 store with a settle that tidies up in a ``finally``: honest, but
    a replica that dies mid-settle leaves cleanup I/O the lab must swallow."""

    async def settle(self, key: Any, reservation: Any, actual_microdollars: int) -> None:
        try:
            await super().settle(key, reservation, actual_microdollars)
        finally:
            with contextlib.suppress(UNREACHABLE):
                await self.data.ping()


def cleans_up_on_cancel() -> str:
    kind = "coverage.cleans_up_on_cancel"
    if kind not in registry.kinds():
        registry.register(redis_kind(kind, "v2, settle tidies up in a finally", layout="v2",
                                     store_class=CleansUpOnCancel))
    return kind


def shipped_exercises() -> dict[str, dict[str, Any]]:
    """Honest stores under every kind of fault the lab injects."""
    return {
        # Lost, refused and retried messages: leaked holds, charges executed
        # twice, fail-closed denials.
        "messages": {
            "network": {"reply_loss": 0.03, "request_loss": 0.02, "retries": 2},
            "faults": {"schedule": lose("lose_reply", "reserve_v2", range(10))
                       + lose("lose_request", "settle_v2", range(10, 20))},
        },
        # Settlements lost on their way: holds that outlive them, spend never
        # recorded, admissions into room already spent.
        "lost_settlements": {
            "store_settings": {"reservation_ttl": "300ms"},
            "faults": {"schedule": everyone("lose_request", "settle_v2", "500ms", 3)
                       + everyone("lose_request", "settle_v2", "1500ms", 3)},
        },
        # Crashed replicas leak their holds; the faults stop so the leaks end.
        "crashes": {
            "store_settings": {"reservation_ttl": "2s"},
            "faults": {"crash": {"rate": "60/m", "restart_after": "300ms"}, "until": "3s"},
        },
        # Early, while the budgets still have room and holds are live.
        "restart_without_persistence": {
            "server": {"persistence": "none"},
            "faults": {"schedule": [{"at": "150ms", "fault": "server_restart",
                                     "down_for": "50ms"}]},
        },
        # A failover to a lagging replica brings back holds already released:
        # with estimates far above the spend, they deny what the truth admits.
        "failover": {
            "store_settings": {"reservation_ttl": "3s"},
            "workload": {"estimate_microdollars": 5000, "actual_microdollars": "uniform(0, 50)",
                         "duration": "lognormal(200ms, 0.3)"},
            "faults": {"schedule": [{"at": "1s", "fault": "failover", "lag": "500ms",
                                     "down_for": "50ms"}]},
        },
        "eviction": {"server": {"maxmemory_keys": 12, "eviction_policy": "allkeys-random"}},
        # A three-shard cluster, one shard failing over to a lagging replica:
        # the shipped v2 keeps each namespace's keys in one slot.
        "cluster_shard_failover": {
            "server": {"cluster": {"shards": 3}},
            "faults": {"schedule": [{"at": "1s", "fault": "failover", "shard": 1,
                                     "lag": "500ms", "down_for": "50ms"}]},
        },
        # A namespace's slot moving to another shard mid-run: nodes redirect
        # the clients (ASK, TRYAGAIN, then MOVED) as its keys move.
        "cluster_slot_migration": {
            "server": {"cluster": {"shards": 3}},
            "faults": {"schedule": [{"at": "1s", "fault": "slot_migration", "key": "{ns-0}",
                                     "shard": 0, "duration": "300ms"}]},
        },
        # One multiplexed connection per replica, replies lost on it: the
        # replies behind each loss reach the wrong callers, which act on them.
        "misaligned": {"network": {"connection": "multiplexed", "reply_loss": 0.02},
                       "workload": {"arrivals": "poisson(1500/s)"}},
        # Replicas paused, cut off, slowed and skewed, on a store whose settle
        # tidies up in a finally (the I/O of a dead replica's cleanup).
        "fleet_and_server": {
            "store": cleans_up_on_cancel(),
            "fleet": {"clock_offset": "normal(0ms, 20ms)"},
            "faults": {"crash": {"rate": "30/m", "restart_after": "300ms"},
                       "pause": {"rate": "30/m", "duration": "1500ms"},
                       "partition": {"rate": "30/m", "duration": "300ms", "replicas": 3},
                       "latency_spike": {"rate": "20/m", "duration": "300ms",
                                         "extra": "150ms"}},
        },
        # A TTL shorter than the requests: premature expiry.
        "short_ttl": {
            "store_settings": {"reservation_ttl": "100ms"},
            "workload": {"duration": "lognormal(300ms, 0.5)"},
        },
        # Requests that spend past their estimates, their settlements slow.
        "underrun": {
            "store_settings": {"reservation_ttl": "10s"},
            "network": {"latency": "lognormal(30ms, 0.3)"},
            "workload": {"actual_microdollars": "uniform(0, 5000)"},
        },
        "fail_open": {
            "store_settings": {"on_unavailable": "allow"},
            "server": {"persistence": "aof-always"},
            "faults": {"schedule": [{"at": "1s", "fault": "server_restart",
                                     "down_for": "1s"}]},
        },
        # The run ends with requests still running and holds still leaked.
        "cut_short": {
            "drain": "0s",
            "network": {"latency": "lognormal(40ms, 0.3)", "timeout": "500ms"},
            "store_settings": {"subject_cap_microdollars": 10_000_000,
                               "namespace_cap_microdollars": 100_000_000,
                               "reservation_ttl": "20s"},
            "workload": {"duration": "lognormal(3s, 0.3)"},
            "faults": {"crash": {"rate": "20/m", "restart_after": "300ms"}},
        },
        # The operator lowers both caps under what is spent, half the fleet
        # at a time: old and new caps serve side by side (config_change).
        "reconfigure": {
            "faults": {"schedule": [
                {"at": "2s", "fault": "reconfigure", "every": "100ms",
                 "settings": {"subject_cap_microdollars": 5_000,
                              "namespace_cap_microdollars": 40_000}}]},
        },
        # Per-replica ledgers, some evicted to make room.
        "in_memory": {
            "store": "axond_budget.in_memory",
            "store_settings": {"subject_cap_microdollars": 20_000, "reservation_ttl": "1s",
                               "max_subjects": 4, "idle_ttl": "0ms"},
        },
        # Two replicas whose ledgers die with them, often.
        "in_memory_crashes": {
            "store": "axond_budget.in_memory",
            "store_settings": {"subject_cap_microdollars": 20_000, "reservation_ttl": "1s"},
            "fleet": {"replicas": 2},
            "faults": {"crash": {"rate": "60/m", "restart_after": "100ms"}},
        },
    }


def _v2_mutant(name: str, module: str, store_class: str) -> str:
    """A Python mutant of the suite, on the v2 layout (both scopes broken)."""
    kind = f"coverage.v2_{name}"
    if kind not in registry.kinds():
        imported = __import__(f"mutants.{module}", fromlist=[store_class])
        registry.register(redis_kind(kind, f"v2 {name}", layout="v2",
                                     store_class=getattr(imported, store_class)))
    return kind


def mutant_exercises() -> dict[str, dict[str, Any]]:
    """Broken stores, no fault injected: the store's own damage."""
    registry.load_plugins(["mutants.reserve_ignores_live_holds", "mutants.settle_charges_twice",
                           "mutants.caps_in_wrong_order",
                           "mutants.namespace_total_not_incremented"])
    keeps_hold = _v2_mutant("settle_with_zero_actual_keeps_hold",
                            "settle_with_zero_actual_keeps_hold",
                            "SettleWithZeroActualKeepsHold")
    short_holds = _v2_mutant("hold_ttl_shorter_than_asked", "hold_ttl_shorter_than_asked",
                             "HoldTtlShorterThanAsked")
    v1 = {"store_settings": {"subject_cap_microdollars": 20_000, "reservation_ttl": "1s"}}
    return {
        "mutant_script_fails": {"store": _script_fails()},
        "mutant_holds_without_expiry": {"store": _holds_without_expiry()},
        "mutant_ignores_holds": {**v1, "store": "mutants.reserve_ignores_live_holds"},
        "mutant_charges_twice": {**v1, "store": "mutants.settle_charges_twice"},
        "mutant_caps_swapped": {"store": "mutants.caps_in_wrong_order"},
        # Subject keys under a tag of their own: on a cluster, CROSSSLOT.
        "variant_keys_in_two_slots": {"store": "axond_budget.variants.subject_tagged_v2",
                                      "server": {"cluster": {"shards": 3}}},
        "mutant_namespace_total": {"store": "mutants.namespace_total_not_incremented"},
        "mutant_keeps_holds": {"store": keeps_hold,
                               "workload": {"actual_microdollars": "uniform(0, 2)"}},
        "mutant_short_holds": {"store": short_holds,
                               "store_settings": {**BASE["store_settings"],
                                                  "reservation_ttl": "120ms"},
                               "workload": {"duration": "lognormal(80ms, 0.3)"}},
    }


@functools.cache
def _script_fails() -> str:
    """The v2 store whose reserve reads the subject's settled spend raw: nil
    on a subject that has spent nothing, and the script fails on it."""
    base = registry.get("axond_budget.redis_v2")
    text = base.scripts["reserve_v2"]
    old = "tonumber(redis.call('GET', KEYS[1]) or '0')"
    mutation = Mutation("reserve_v2", "call_removed", text.index(old), old,
                        "redis.call('GET', KEYS[1])", 0)
    registry.register(mutant_kind(base, "every_metric.script_fails", mutation))
    return "every_metric.script_fails"


def _holds_without_expiry() -> str:
    """The v2 store whose reserve never gives the subject's holds hash its expiry."""
    name = "every_metric.holds_without_expiry"
    if name not in registry.kinds():
        base = registry.get("axond_budget.redis_v2")
        text = base.scripts["reserve_v2"]
        old = "redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)"
        mutation = Mutation("reserve_v2", "call_removed", text.index(old), old, "", 0)
        registry.register(mutant_kind(base, name, mutation))
    return name


@functools.cache
def summaries() -> dict[str, dict[str, Any]]:
    runs = {name: exercise(change) for name, change in shipped_exercises().items()}
    runs.update({name: exercise(change) for name, change in mutant_exercises().items()})
    found = {name: run_scenario(parse_scenario(data), seed=1).summary
             for name, data in runs.items()}
    # A migration the lab kills half-way: the fixed one parks its claim and
    # the re-run finishes it; the historical one loses the spend in flight,
    # which is the store's (issue 24: an interrupted migration is allowed nothing).
    killed = load_scenario(SCENARIOS / "variant-claim-without-slot.toml")
    found["killed_migration_variant"] = run_scenario(killed, seed=1).summary
    fixed = killed.model_copy(update={"migrations": [
        step.model_copy(update={"to": "axond_budget.redis_v2"}) for step in killed.migrations]})
    found["killed_migration"] = run_scenario(fixed, seed=1).summary
    # A v1 replica the operator left writing beside the v2 fleet (issue 24).
    found["stray_v1_writer"] = run_scenario(
        load_scenario(SCENARIOS / "budget-stray-v1-writer.toml"), seed=1).summary
    # A namespace cap the v1 fleet cannot enforce, overshot before the
    # migration that brings one (scope_not_enforced).
    migrate = load_scenario(SCENARIOS / "migrate-v1-to-v2.toml")
    migrate = migrate.model_copy(update={"migrations": [
        step.model_copy(update={"settings": {**step.settings,
                                             "namespace_cap_microdollars": 20_000}})
        for step in migrate.migrations]})
    found["namespace_before_migration"] = run_scenario(migrate, seed=1).summary
    # A fault-exposed mutant whose re-run carries a claim twice, into both scopes.
    from mutants.budget import catalogue
    reapplies = next(m for m in catalogue() if m.name == "migration_rerun_reapplies_claim")
    data = {**reapplies.scenario, "migrations": [
        {**reapplies.scenario["migrations"][0], "to": reapplies.kind}]}
    found["mutant_rerun_reapplies_claim"] = run_scenario(parse_scenario(data), seed=1).summary
    # A store whose settle raises: a finding, the run goes on (issue 24).
    found["store_raises"] = run_scenario(parse_scenario(exercise(
        {"store": _raising_kind()})), seed=1).summary
    return found


class _RaisesOnBigSettles(RedisBudget):
    async def settle(self, key, reservation, actual_microdollars):
        if actual_microdollars > 900:
            raise KeyError(actual_microdollars)
        await super().settle(key, reservation, actual_microdollars)


def _raising_kind() -> str:
    name = "every_metric.raises_on_big_settles"
    if name not in registry.kinds():
        registry.register(redis_kind(name, "settle raises on a big spend", layout="v2",
                                     store_class=_RaisesOnBigSettles))
    return name


NOT_MEASURES = {"scenario", "store", "backend", "cap_enforced_per", "trace_fingerprint"}
"""Summary fields that say what ran, not what happened."""


def test_every_metric_of_the_summary_is_nonzero_in_some_run():
    seen: dict[str, list[str]] = {}
    for name, summary in summaries().items():
        for metric, value in summary.items():
            if metric not in NOT_MEASURES:
                seen.setdefault(metric, [])
                if value:
                    seen[metric].append(name)
    never = sorted(metric for metric, runs in seen.items() if not runs)
    assert never == [], f"{len(never)} metric(s) no exercise moved: {never}"


@pytest.mark.parametrize("exercise", [*shipped_exercises(), "killed_migration",
                                      "stray_v1_writer", "namespace_before_migration"])
def test_the_shipped_stores_never_have_damage_blamed_on_them(exercise):
    summary = summaries()[exercise]
    blamed = {metric: value for metric, value in summary.items()
              if "store_logic" in metric and value}
    assert blamed == {}


@pytest.mark.parametrize("exercise", [*sorted(mutant_exercises()), "killed_migration_variant",
                                      "mutant_rerun_reapplies_claim"])
def test_every_broken_store_has_damage_blamed_on_it(exercise):
    summary = summaries()[exercise]
    assert any(value for metric, value in summary.items() if "store_logic" in metric)
