"""A v1-to-v2 migration run by an operator inside a simulation."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, load_scenario, parse_scenario
from simulator.world.operations import MIGRATOR

REPO = Path(__file__).resolve().parents[2]
SMALL = {
    "name": "migrate-small", "duration": "2s", "drain": "1s", "store": "axond_budget.redis_v1",
    "store_settings": {"subject_cap_microdollars": 20_000},
    "fleet": {"replicas": 5}, "network": {"latency": "lognormal(1ms, 0.3)"},
    "workload": {"arrivals": "poisson(200/s)", "keys": {"subjects": 3, "namespaces": 2},
                 "estimate_microdollars": 500, "actual_microdollars": "uniform(0, 500)",
                 "duration": "20ms"},
    "migrations": [{"at": "1s", "to": "axond_budget.redis_v2", "restart_after": "100ms",
                    "rerun_after": "100ms",
                    "settings": {"namespace_cap_microdollars": 40_000}}],
}


def with_crash(after: int | None) -> dict:
    step = {**SMALL["migrations"][0], "crash_after_commands": after}
    return {**SMALL, "migrations": [step]}


def migration_commands(result) -> int:
    columns = result.trace.columns
    return sum(1 for replica, kind in zip(columns["replica"], columns["kind"], strict=True)
               if replica == MIGRATOR and kind == "call_executed")


def test_the_shipped_migration_scenario_carries_everything_once():
    summary = run_scenario(load_scenario(REPO / "data/scenarios/migrate-v1-to-v2.toml")).summary
    assert summary["migrations_completed"] == 1
    assert summary["migration_reruns"] == 1
    assert summary["migration_carried_microdollars"] > 0
    assert summary["conservation_drift_microdollars_total"] == 0
    assert summary["namespace_conservation_drift_microdollars_total"] == 0
    assert summary["replica_boot_failed_count"] == 0


def test_a_migration_killed_after_any_of_its_commands_is_finished_by_a_rerun():
    clean = run_scenario(parse_scenario(with_crash(None)))
    commands = migration_commands(clean)
    assert clean.summary["conservation_drift_microdollars_total"] == 0
    assert commands > 10
    for after in range(1, commands + 1):
        summary = run_scenario(parse_scenario(with_crash(after))).summary
        assert summary["migration_reruns"] == 1, after
        assert summary["conservation_drift_microdollars_total"] == 0, after
        assert summary["namespace_conservation_drift_microdollars_total"] == 0, after


def test_a_migration_target_without_a_migration_is_refused():
    step = {**SMALL["migrations"][0], "to": "axond_budget.redis_v1"}
    with pytest.raises(ScenarioError, match="has no migration to run"):
        parse_scenario({**SMALL, "migrations": [step]})


def test_a_migration_target_needs_its_own_settings():
    step = {**SMALL["migrations"][0], "settings": {}}
    with pytest.raises(ScenarioError, match="migrations.0.settings.namespace_cap_microdollars"):
        parse_scenario({**SMALL, "migrations": [step]})
