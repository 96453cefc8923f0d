"""Every invariant's parts by cause add up to its total (issue 24), on every
committed scenario of every family: a verdict that names a cause accounts
for the whole figure, and an invariant no contract excuses (``store_only``)
is all the store's."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from simulator.families import invariants_for
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario

REPO = Path(__file__).resolve().parents[2]
TOO_BIG = {"fleet-5000.toml", "bench-scale-10k.toml", "bench-2000.toml",
           "bench-leases-busy.toml", "bench-av-state-busy.toml"}
"""Scenarios for the benchmarks and the scale tests: run by those."""
SCENARIOS = sorted(path for path in (REPO / "data" / "scenarios").glob("*.toml")
                   if path.name not in TOO_BIG)


@pytest.mark.parametrize("path", SCENARIOS, ids=[path.stem for path in SCENARIOS])
def test_every_invariant_s_parts_by_cause_add_up_to_its_total(path):
    scenario = load_scenario(path)
    summary = run_scenario(scenario).summary
    for invariant in invariants_for(scenario.kind):
        total = summary.get(invariant.metric)
        if total is None:
            continue  # a scope the run does not judge
        parts = invariant.causes(summary)
        if not total:
            assert not any(parts.values()), f"{invariant.metric} = 0 with parts {parts}"
            continue
        assert parts, f"{invariant.metric} = {total} has no parts by cause"
        assert math.isclose(sum(parts.values()), total, rel_tol=1e-9, abs_tol=1e-6), (
            f"{invariant.metric} = {total}, its parts add up to {sum(parts.values())}: {parts}")
    if summary.get("inconclusive") is None:
        assert summary["store_answers"] > 0
