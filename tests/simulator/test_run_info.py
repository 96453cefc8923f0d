"""``run_info.json``: what a run cost on this machine, in figures one can read
(issue 25): CPU and wall time per kernel event, and virtual seconds per wall
second to three significant digits however slow or fast the run was."""

from __future__ import annotations

import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario


def test_a_run_reports_its_cost_per_event_from_what_it_spent():
    scenario = load_scenario("data/scenarios/demo.toml", {"duration": "2s", "drain": "1s"})
    info = run_scenario(scenario).run_info
    events = info["kernel_events"]
    assert events > 1_000
    assert info["cpu_seconds"] > 0 and info["wall_seconds"] > 0
    # Each per-event figure is its total over the events, to three digits.
    assert info["cpu_ms_per_event"] == pytest.approx(info["cpu_seconds"] * 1e3 / events,
                                                     rel=0.01, abs=1e-3)
    assert info["wall_ms_per_event"] == pytest.approx(info["wall_seconds"] * 1e3 / events,
                                                      rel=0.01, abs=1e-3)
    for figure in ("cpu_ms_per_event", "wall_ms_per_event", "virtual_seconds_per_wall_second"):
        value = info[figure]
        assert value > 0, figure  # never rounded away to 0.0
        assert value == float(f"{value:.3g}"), figure
