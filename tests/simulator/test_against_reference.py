"""``run --reference KIND`` (issue 24): the run beside the reference store
under the same scenario, seed and faults, per invariant: how much worse the
candidate did, and how much the oracle filed under ``store_logic``."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.cli import USER_ERROR, main
from simulator.present.against_reference import Comparison, compare
from simulator.scenario.conditions import Invariant

REPO = Path(__file__).resolve().parents[2]
SPLIT = REPO / "data" / "scenarios" / "variant-split-settlement.toml"
DRIFT = Invariant("conservation_drift_microdollars_total", worse="further_from_zero",
                  by_cause="conservation_drift_by_{cause}_microdollars")


def test_the_two_views_agree_when_the_store_logic_part_is_the_excess_over_the_reference():
    summary = {DRIFT.metric: -12_305, "conservation_drift_by_store_logic_microdollars": -12_000,
               "conservation_drift_by_settlement_lost_microdollars": -305}
    (agreeing,) = compare(summary, {DRIFT.metric: -305}, [DRIFT])
    assert agreeing.excess == 12_000 and agreeing.store_logic == 12_000 and agreeing.agrees
    # Filed elsewhere, what the bug added is not the store's in the oracle's view: they differ.
    elsewhere = {**summary, "conservation_drift_by_store_logic_microdollars": -6_000,
                 "conservation_drift_by_settlement_lost_microdollars": -6_305}
    (differing,) = compare(elsewhere, {DRIFT.metric: 0}, [DRIFT])
    assert differing.excess == 12_305 and not differing.agrees
    assert str(differing).startswith("DIFFERS conservation_drift_microdollars_total = -12,305 "
                                     "here, 0 on the reference: worse by 12,305")
    # Within 5%: rounding and the odd straggler are not a disagreement.
    assert Comparison(DRIFT, -1_000, 0, 960).agrees
    assert not Comparison(DRIFT, -1_000, 0, 940).agrees
    # Nothing damaged on either side: not listed.
    assert compare({DRIFT.metric: 0}, {DRIFT.metric: 0}, [DRIFT]) == ()


def test_run_prints_the_reference_beside_the_verdicts_and_keeps_its_summary(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(SPLIT), "--quiet", "--out", str(out),
                 "--reference", "axond_budget.redis_v1", "--fail-on", "never"]) == 0
    printed = capsys.readouterr().out
    head = printed.index("against the reference axond_budget.redis_v1 (same scenario, seed "
                         "and faults)")
    lines = printed[head:].splitlines()[1:]
    assert any("conservation_drift_microdollars_total = " in line for line in lines)
    reference = json.loads((out / "reference.json").read_text())
    assert reference["store"] == "axond_budget.redis_v1"
    assert reference["conservation_drift_microdollars_total"] == 0


def test_a_reference_of_another_family_or_none_known_is_refused_before_the_run(tmp_path,
                                                                               capsys):
    for reference, said in (("tollgate.ledger", "compare stores of one family"),
                            ("axond_budget.nope", "unknown store 'axond_budget.nope'")):
        out = tmp_path / reference
        assert main(["run", str(SPLIT), "--quiet", "--out", str(out),
                     "--reference", reference]) == USER_ERROR
        assert said in capsys.readouterr().err
        assert not out.exists()
