"""The two historical migrations, against the fixed one, on the same scenario and seed."""

from __future__ import annotations

import tomllib
from pathlib import Path

from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario

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
