"""``hunt`` finds the historical races by itself, shrinks them, and writes
reports that ``replay`` reproduces."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from simulator.expectations import Expectation
from simulator.hunt import Hunt
from simulator.races import load_report, replay
from simulator.strategies import fault_schedules
from stores.quantities import parse_duration_us

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
DRIFT = Expectation.parse("conservation_drift_microdollars_total", "< 0")


@pytest.mark.parametrize(("scenario", "options"), [
    ("split-settlement-quiet.toml", {"kinds": ("lose_reply",)}),
    ("claim-without-slot-quiet.toml", {"kinds": ("lose_reply",), "target": "migration"}),
])
def test_hunt_finds_a_variants_race_and_shrinks_it_to_a_few_faults(scenario, options, tmp_path):
    hunt = Hunt(HUNTS / scenario, DRIFT, seed=0, examples=60, time_budget_s=240, **options)
    assert hunt.scenario.faults.schedule == []  # nothing is scheduled: the hunt finds it
    assert all(step.crash_after_commands is None for step in hunt.scenario.migrations)
    found = hunt.search()
    assert found is not None
    assert len(found.schedule) <= 3
    assert found.value < 0
    report_path = tmp_path / "found.toml"
    hunt.write_report(found, report_path)
    report = load_report(report_path)
    replayed = replay(report)
    assert replayed.reproduced
    assert replayed.divergence is None
    assert replayed.result.summary["trace_fingerprint"] == report.fingerprint


def test_the_same_hunt_seed_finds_the_same_schedule():
    def schedule() -> list:
        hunt = Hunt(HUNTS / "claim-without-slot-quiet.toml", DRIFT, seed=3, examples=40,
                    time_budget_s=120, kinds=("lose_reply",), target="migration")
        found = hunt.search()
        assert found is not None
        return found.schedule

    assert schedule() == schedule()


@settings(max_examples=50, database=None)
@given(fault_schedules(replicas=4, until="2s", calls=["settle_v1", "HDEL"], migration=True))
def test_drawn_schedules_are_valid_and_in_time_order(schedule):
    """A property test of the shape the strategies' docstring shows."""
    from simulator.faults import ScheduledFault

    faults = [ScheduledFault.model_validate(item) for item in schedule]
    assert all(0 <= fault.at < 2_000_000 for fault in faults)
    assert [fault.at for fault in faults] == sorted(fault.at for fault in faults)
    assert all(fault.replica is None or 0 <= fault.replica < 4 for fault in faults)
    assert parse_duration_us(schedule[0]["at"]) == faults[0].at
