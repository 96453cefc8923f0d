"""The fault-contract vocabulary every family shares (``simulator.plugin.contracts``):
store-logic damage kept by the fault that exposed it, where it began, and the
verdict line that names both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator.plugin.contracts import (
    BEGAN,
    BEGAN_AT,
    NO_FAULT,
    Clause,
    Contract,
    Exposures,
    exposed_by_key,
)
from simulator.present.verdicts import invariant_verdicts
from simulator.scenario.conditions import Invariant

DRIFT = "conservation_drift_microdollars_total"


def test_the_largest_exposure_is_named_and_the_earliest_parting_kept():
    exposures = Exposures()
    exposures.add(DRIFT, -5_000, "reply_lost", "release_v1")
    exposures.add(DRIFT, -7_305, "reply_lost", "release_v1")
    exposures.add(DRIFT, 9_000, "call_retried", "settle_v1")
    exposures.add(DRIFT, 0, "request_lost", "settle_v1")  # nothing: not kept
    exposures.parted(2_000, 7, "release_v1 on replica 1 for request 7")
    exposures.parted(1_000, 3, "settle_v1 on replica 0 for request 3")
    assert exposures.of(DRIFT) == {"reply_lost on release_v1": -12_305,
                                   "call_retried on settle_v1": 9_000}
    summary = exposures.summary([DRIFT, "leaked_hold_microdollar_seconds"],
                                {DRIFT: -3_305, "leaked_hold_microdollar_seconds": 0})
    assert summary == {exposed_by_key(DRIFT): "reply_lost on release_v1",
                       BEGAN_AT: 1_000, "store_logic_began_request": 3,
                       BEGAN: "settle_v1 on replica 0 for request 3"}
    # No store-logic part: nothing to name.
    assert Exposures().summary([DRIFT], {DRIFT: 0}) == {}
    lone = Exposures()
    assert lone.summary([DRIFT], {DRIFT: 4}) == {exposed_by_key(DRIFT): NO_FAULT}


def test_the_verdict_names_what_exposed_the_store_s_own_damage_and_only_that():
    invariant = Invariant(DRIFT, worse="further_from_zero",
                          by_cause="conservation_drift_by_{cause}_microdollars")
    summary = {DRIFT: -12_305, "conservation_drift_by_store_logic_microdollars": -12_305,
               "conservation_drift_by_settlement_lost_microdollars": 0,
               exposed_by_key(DRIFT): "reply_lost on release_v1"}
    (verdict,) = invariant_verdicts(summary, [invariant])
    assert str(verdict) == (f"BROKEN {DRIFT} = -12,305 (largest contributor: store_logic "
                            "-12,305, exposed by reply_lost on release_v1)")
    summary["conservation_drift_by_settlement_lost_microdollars"] = -20_000
    (verdict,) = invariant_verdicts(summary, [invariant])
    assert str(verdict).endswith("(largest contributor: settlement_lost -20,000)")


def test_a_contract_finds_its_clauses_and_refuses_one_it_lacks():
    clause = Clause("lost a settle reply", "store_logic", "nothing", "drift, a double charge",
                    ("axond_budget/lua/settle.lua:1-20",))
    contract = Contract("axond_budget", (clause,))
    assert contract.clause("lost a settle reply") is clause
    assert contract.causes == ("store_logic",)
    with pytest.raises(KeyError, match="no clause for 'lost a reserve reply'"):
        contract.clause("lost a reserve reply")


def test_the_story_and_the_timeline_start_where_the_store_s_damage_began():
    from simulator.present.marks import timeline_of
    from simulator.present.plotly_timeline import BEGAN as BEGAN_COLOUR
    from simulator.present.plotly_timeline import timeline_figure
    from simulator.run.compose import run_scenario
    from simulator.scenario.model import load_scenario
    from simulator.search.story import focus, tell, trace_rows

    demo = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "demo.toml"
    result = run_scenario(load_scenario(demo, {
        "duration": "1s", "drain": "1s", "fleet.replicas": 6}))
    rows = trace_rows(result.trace)
    settled = [row for row in rows if row["kind"] == "request_settled"]
    row = settled[len(settled) // 2]
    result.summary.update({BEGAN_AT: row["time_us"], "store_logic_began_request": row["request"],
                           BEGAN: f"settle_v1 on replica {row['replica']}"})
    found = focus(result)
    assert found.anchor.store_damage_us == row["time_us"] >= found.anchor.time_us
    assert row["replica"] in found.replicas
    story = tell(found.rows, list(found.replicas), found.anchor, before=0)
    assert story.events[0]["time_us"] >= row["time_us"] > 0 and story.earlier > 0
    figure = timeline_figure(timeline_of(result))
    assert any(shape.line.color == BEGAN_COLOUR for shape in figure.layout.shapes)


SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"
"""The seeds the contracts cite, beside the repository when it has them."""
FAMILIES = ("axond_budget", "axond_leases", "av_state", "tollgate")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_contract_clause_cites_seed_lines_that_exist(family):
    import importlib
    contract = importlib.import_module(f"simulator.families.{family}.contract").CONTRACT
    assert contract.clauses
    for clause in contract.clauses:
        assert clause.seed, f"{clause.lab_did!r} cites nothing"
        for citation in clause.seed:
            match = re.fullmatch(r"(\d{3}_[0-9a-f]{16}\.txt):(\d+)(?:-(\d+))?", citation)
            assert match, f"{clause.lab_did!r}: {citation!r} is not FILE:FIRST[-LAST]"
            first, last = int(match[2]), int(match[3] or match[2])
            assert 1 <= first <= last, citation
            seed = SEEDS / match[1]
            if not seed.exists():
                # A clean clone has no seeds beside it: the form is checked, the lines not.
                continue
            assert last <= len(seed.read_text(encoding="utf-8").splitlines()), citation
