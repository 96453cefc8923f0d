"""A hunt tries the same schedules and judges them the same whichever engine
runs its Redis family: the lab's Valkey engine (the default) or the embedded
fakeredis (issue 39). One short hunt per Redis family's plain scenario on
each, every run's schedule and summary compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.scenario.conditions import parse_condition
from simulator.search import hunt as hunting
from simulator.search.hunt import Hunt

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
REDIS_FAMILIES = ("axond-budget", "axond-leases", "av-state")
SCHEDULES = 6
JUDGE = hunting.Judge._summary
"""How a hunt's judge runs a schedule, before any test wraps it."""


def judged_runs(scenario: Path, backend: str, monkeypatch) -> list[tuple[list, dict]]:
    """Every run a short hunt of ``scenario`` made on ``backend``: its schedule
    and its summary, in the order the hunt judged them."""
    runs: list[tuple[list, dict]] = []

    def recorded(self, data, schedule):
        summary = JUDGE(self, data, schedule)
        runs.append((schedule, summary))
        return summary

    monkeypatch.setattr(hunting.Judge, "_summary", recorded)
    hunt = Hunt(scenario, parse_condition("replicas < 0"), seed=3, examples=SCHEDULES,
                time_budget_s=3600, overrides={"backend": backend})
    assert hunt.search() is None
    return runs


@pytest.mark.parametrize("name", REDIS_FAMILIES)
def test_a_hunt_judges_the_same_schedules_the_same_on_valkey_and_on_fakeredis(
        name, monkeypatch, valkey_server):
    on_engine = judged_runs(HUNTS / f"{name}.toml", "valkey", monkeypatch)
    embedded = judged_runs(HUNTS / f"{name}.toml", "fakeredis", monkeypatch)
    assert {summary["backend"] for _, summary in on_engine} == {"valkey"}
    assert len(on_engine) == len(embedded) >= 2  # the baseline and some schedules
    assert any(schedule for schedule, _ in on_engine), "no schedule had a fault"
    for (schedule, summary), (same_schedule, same_summary) in zip(on_engine, embedded,
                                                                  strict=True):
        assert schedule == same_schedule
        assert {**summary, "backend": ""} == {**same_summary, "backend": ""}
