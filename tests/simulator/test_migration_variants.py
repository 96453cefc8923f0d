"""The historical migrations, against the fixed one, on the same scenario and seed."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from stores.axond_budget.contract import BudgetKey
from stores.axond_budget.migration import attribute_v1_key, drop_bookkeeping
from stores.axond_budget.variants import drop_sequences_first, split_v1_tag

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"
FIXED = "axond_budget.redis_v2"


def run_migrating_to(scenario: str, kind: str) -> dict:
    data = tomllib.loads((SCENARIOS / scenario).read_text())
    for step in data["migrations"]:
        step["to"] = kind
    return run_scenario(parse_scenario(data)).summary


def test_a_claim_without_a_slot_loses_the_spend_when_the_migration_dies_holding_it():
    variant = run_migrating_to("variant-claim-without-slot.toml",
                               "axond_budget.variants.claim_without_slot")
    fixed = run_migrating_to("variant-claim-without-slot.toml", FIXED)
    for summary in (variant, fixed):
        assert summary["migration_reruns"] == 1
        assert summary["migrations_completed"] == 1
    assert variant["conservation_drift_microdollars_total"] < 0
    assert variant["namespace_conservation_drift_microdollars_total"] < 0
    assert variant["cap_overshoot_microdollars_total"] > 0
    assert fixed["conservation_drift_microdollars_total"] == 0
    assert fixed["namespace_conservation_drift_microdollars_total"] == 0
    assert fixed["cap_overshoot_microdollars_total"] == 0


def test_a_recomputed_namespace_total_erases_settlements_made_during_a_recovery():
    variant = run_migrating_to("variant-recomputed-namespace-total.toml",
                               "axond_budget.variants.recomputed_namespace_total")
    fixed = run_migrating_to("variant-recomputed-namespace-total.toml", FIXED)
    for summary in (variant, fixed):
        assert summary["migrations_completed"] == 2
        # The stray v1 writer's spend was recovered into the subject ledgers.
        assert summary["conservation_drift_microdollars_total"] == 0
    assert variant["namespace_conservation_drift_microdollars_total"] < 0
    assert fixed["namespace_conservation_drift_microdollars_total"] == 0


def test_a_tag_split_at_its_first_pipe_names_another_namespace_than_the_configured_one():
    key = "p:{team|west|sub}:spent"
    assert split_v1_tag("p", key, ":spent", ["team|west"]) == BudgetKey("team", "west|sub")
    assert attribute_v1_key("p", key, ":spent", ["team|west"]) == BudgetKey("team|west", "sub")
    # Without a "|" in the namespace id the two readings agree.
    assert (split_v1_tag("p", "p:{ops|sub}:spent", ":spent", ["ops"])
            == attribute_v1_key("p", "p:{ops|sub}:spent", ":spent", ["ops"]))


def test_a_guessed_attribution_lets_a_piped_namespace_spend_its_budget_again():
    variant = run_migrating_to("variant-guessed-attribution.toml",
                               "axond_budget.variants.guessed_attribution")
    fixed = run_migrating_to("variant-guessed-attribution.toml", FIXED)
    for summary in (variant, fixed):
        assert summary["migrations_completed"] == 1
        assert summary["migration_reruns"] == 0
        assert summary["migration_carried_microdollars"] > 0
    # The carried spend went to ledgers no request reads: gone from the tenant's.
    assert variant["conservation_drift_microdollars_total"] < 0
    for scope in ("", "namespace_"):
        assert variant[f"{scope}cap_overshoot_microdollars_total"] > 0
        # No fault, no live fleet: the operator's migration itself exposed it.
        assert (variant[f"{scope}cap_overshoot_microdollars_total_exposed_by"]
                == "migration on migrate")
        assert fixed[f"{scope}cap_overshoot_microdollars_total"] == 0
        assert fixed[f"{scope}conservation_drift_microdollars_total"] == 0
    assert variant["wrongful_admissions_by_store_logic"] == variant["wrongful_admissions"] > 0


def test_a_guessed_attribution_that_robs_the_only_namespace_is_the_store_s():
    # One configured namespace, "team|west": the guess carries its spend to a
    # namespace nobody follows, and writes nothing the namespace scope sees.
    variant = run_migrating_to("hunt/guessed-attribution-quiet.toml",
                               "axond_budget.variants.guessed_attribution")
    fixed = run_migrating_to("hunt/guessed-attribution-quiet.toml", FIXED)
    drift = variant["namespace_conservation_drift_microdollars_total"]
    assert drift < 0
    assert variant["namespace_conservation_drift_by_store_logic_microdollars"] == drift
    assert variant["namespace_conservation_drift_by_scope_not_enforced_microdollars"] == 0
    assert (variant["namespace_conservation_drift_microdollars_total_exposed_by"]
            == "migration on migrate")
    assert "the migration did not carry its spend" in variant["store_logic_began"]
    assert fixed["namespace_conservation_drift_microdollars_total"] == 0
    assert not any(value for name, value in fixed.items() if name.endswith("_by_store_logic")
                   or name.endswith("_by_store_logic_microdollars"))


def test_the_bookkeeping_is_dropped_records_first_only_by_the_fixed_migration():
    dropped: list[str] = []

    class Recording:
        async def delete(self, *names: str) -> int:
            dropped.extend(names)
            return len(names)

    subjects = [BudgetKey("ns", "a"), BudgetKey("ns", "b")]
    asyncio.run(drop_bookkeeping(Recording(), "p", ["ns"], subjects))
    assert dropped[0].endswith(":migration:applied")
    dropped.clear()
    asyncio.run(drop_sequences_first(Recording(), "p", ["ns"], subjects))
    assert dropped[-1].endswith(":migration:applied")
    assert len(dropped) == 3


def test_sequences_dropped_first_lose_a_stray_writer_s_spend_when_the_cleanup_dies():
    variant = run_migrating_to("variant-sequences-dropped-first.toml",
                               "axond_budget.variants.sequences_dropped_first")
    fixed = run_migrating_to("variant-sequences-dropped-first.toml", FIXED)
    for summary in (variant, fixed):
        assert summary["migration_reruns"] == 1
        assert summary["migrations_completed"] == 1
    # Re-claimed under tokens the surviving records list: dropped as replays.
    assert variant["conservation_drift_microdollars_total"] < 0
    assert variant["migration_carried_microdollars"] < fixed["migration_carried_microdollars"]
    assert fixed["conservation_drift_microdollars_total"] == 0


def test_an_unmarked_migration_killed_part_way_lets_a_restarted_v1_replica_serve():
    variant = run_migrating_to("variant-unmarked-migration.toml",
                               "axond_budget.variants.unmarked_migration")
    fixed = run_migrating_to("variant-unmarked-migration.toml", FIXED)
    for summary in (variant, fixed):
        assert summary["fault_migration_killed_count"] == 1
        assert summary["migration_reruns"] == 1
        assert summary["migrations_completed"] == 1
    # Replica 0, left on v1, restarts before the re-run: on the unmarked
    # keyspace it boots, and the subjects already carried read zero on v1.
    assert variant["cap_overshoot_microdollars_total"] > 10 * fixed[
        "cap_overshoot_microdollars_total"]
    assert variant["wrongful_admissions"] > 10 * fixed["wrongful_admissions"]
    # A sound store refuses that boot: what the replica admits is the store's,
    # exposed by the kill; the fixed store's stray, reading no parked claim,
    # is the operator's (stray_layout_writer), and the fixed store is blamed
    # for nothing.
    excess = (variant["cap_overshoot_microdollars_total"]
              - fixed["cap_overshoot_microdollars_total"])
    assert variant["cap_overshoot_by_store_logic_microdollars"] >= 0.95 * excess
    assert (variant["cap_overshoot_microdollars_total_exposed_by"]
            == "migration_killed on migrate")
    assert fixed["cap_overshoot_by_stray_layout_writer_microdollars"] > 0
    assert not any(value for name, value in fixed.items() if "_by_store_logic" in name)
