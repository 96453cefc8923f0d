"""The metrics series, ``[expect]`` thresholds and conditions, and judging a
run against a reference run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.conditions import (
    AllOf,
    AnyOf,
    Expectation,
    Invariant,
    check_metrics,
    failed_expectations,
    judge,
    parse_condition,
)
from simulator.scenario.model import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]
SMALL = {"name": "small", "duration": "2s", "drain": "1s", "store": "axond_budget.redis_v1",
         "store_settings": {"subject_cap_microdollars": 20_000},
         "fleet": {"replicas": 10}, "network": {"reply_loss": 0.05, "timeout": "50ms"},
         "workload": {"arrivals": "poisson(200/s)", "keys": {"subjects": 3}}}


def test_sampling_the_metrics_leaves_the_run_exactly_as_it_was():
    sparse = run_scenario(parse_scenario({**SMALL, "metrics": {"sample_every": "1s"}}))
    dense = run_scenario(parse_scenario({**SMALL, "metrics": {"sample_every": "5ms",
                                                              "per_key": True}}))
    assert sparse.summary == dense.summary
    aggregate = [row for row in dense.sampler.rows if row["namespace"] == "*"]
    assert len(aggregate) == 3_000_000 // 5_000 + 1
    assert {row["subject"] for row in dense.sampler.rows} > {"*"}
    last = aggregate[-1]
    assert last["true_spend_microdollars"] == sparse.summary["true_spend_microdollars_total"]
    assert last["recorded_spend_microdollars"] == sparse.summary[
        "recorded_spend_microdollars_total"]


def test_expectations_compare_summary_metrics():
    summary = {"cap_overshoot_max_ratio": 0.02, "holds_leaked": 0}
    assert failed_expectations({"holds_leaked": "== 0"}, summary) == []
    failures = failed_expectations({"cap_overshoot_max_ratio": "<= 0.01",
                                     "no_such_metric": "> 1"}, summary)
    assert failures == ["cap_overshoot_max_ratio <= 0.01: got 0.02",
                        "no_such_metric > 1: the summary has no metric 'no_such_metric'"]
    with pytest.raises(ValueError, match="expected a comparison"):
        Expectation.parse("x", "about 3")


OVERSHOOT = Expectation("cap_overshoot_microdollars_total", ">", 0)
DRIFT = Expectation("conservation_drift_microdollars_total", "!=", 0)
ARRIVED = Expectation("requests_arrived", ">=", 10)


@pytest.mark.parametrize(("text", "parsed"), [
    ("cap_overshoot_microdollars_total > 0", OVERSHOOT),
    ("cap_overshoot_microdollars_total > 0 or conservation_drift_microdollars_total != 0",
     AnyOf((OVERSHOOT, DRIFT))),
    # ``and`` binds tighter than ``or``...
    ("cap_overshoot_microdollars_total>0 or conservation_drift_microdollars_total != 0 and "
     "requests_arrived >= 1_0", AnyOf((OVERSHOOT, AllOf((DRIFT, ARRIVED))))),
    # ... unless parentheses say otherwise.
    ("(cap_overshoot_microdollars_total > 0 or conservation_drift_microdollars_total != 0) "
     "and requests_arrived >= 10", AllOf((AnyOf((OVERSHOOT, DRIFT)), ARRIVED))),
])
def test_a_condition_parses_with_and_binding_tighter_than_or(text, parsed):
    assert parse_condition(text) == parsed
    assert parse_condition(str(parsed)) == parsed  # written back, it reads the same


def test_a_condition_is_judged_on_the_summary():
    either = AnyOf((OVERSHOOT, AllOf((DRIFT, ARRIVED))))
    quiet = {"cap_overshoot_microdollars_total": 0, "conservation_drift_microdollars_total": 0,
             "requests_arrived": 50}
    assert not either.holds_in(quiet)
    assert either.holds_in({**quiet, "cap_overshoot_microdollars_total": 1})
    assert either.holds_in({**quiet, "conservation_drift_microdollars_total": -3})
    assert not either.holds_in({**quiet, "conservation_drift_microdollars_total": -3,
                                "requests_arrived": 2})
    assert either.metrics == ("cap_overshoot_microdollars_total",
                              "conservation_drift_microdollars_total", "requests_arrived")


@pytest.mark.parametrize(("text", "message"), [
    ("drift <", "expected a number, found the end"),
    ("drift < 0 and", "expected a metric name, found the end"),
    ("(drift < 0", "expected ')', found the end"),
    ("drift < 0 holds_leaked", "expected 'and', 'or' or the end, found 'holds_leaked'"),
    ("drift < 0 && holds_leaked > 0", "cannot read '&& holds_leaked > 0'"),
])
def test_a_malformed_condition_says_what_it_expected(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_condition(text)


def test_a_condition_naming_an_unknown_metric_is_refused_with_the_known_ones():
    condition = parse_condition("cap_overshoot_microdollars_total > 0 or drfit != 0")
    with pytest.raises(ValueError, match="no metric 'drfit' in the summary; known metrics: "
                                         "cap_overshoot_microdollars_total, requests_arrived$"):
        check_metrics(condition, {"cap_overshoot_microdollars_total": 0, "requests_arrived": 5,
                                  "store": "axond_budget.redis_v1"})


def test_expect_takes_a_named_condition_beside_thresholds():
    summary = {"holds_leaked": 0, "conservation_drift_microdollars_total": -4}
    books = "conservation_drift_microdollars_total == 0 and holds_leaked == 0"
    assert failed_expectations({"books": books}, summary) == [
        f"{books}: got conservation_drift_microdollars_total = -4, holds_leaked = 0"]
    assert failed_expectations({"books": books.replace("holds_leaked", "holds_leakd")},
                               summary)[0].endswith("the summary has no metric 'holds_leakd'")
    parse_scenario({**SMALL, "expect": {"books": books}})


def test_a_candidate_is_worse_than_its_reference_where_an_invariant_goes_the_wrong_way():
    invariants = (Invariant("cap_overshoot_microdollars_total"),
                  Invariant("conservation_drift_microdollars_total", worse="further_from_zero"),
                  Invariant("namespace_cap_overshoot_microdollars_total"))
    reference = {"cap_overshoot_microdollars_total": 10,
                 "conservation_drift_microdollars_total": 5}
    same = judge(reference, reference="shipped", reference_summary=reference,
                 invariants=invariants)
    assert not same.broken and same.compared == 2  # the namespace metric is in neither
    assert same.observed == "no worse than shipped on 2 invariant(s)"
    candidate = {"cap_overshoot_microdollars_total": 4,
                 "conservation_drift_microdollars_total": -7}
    verdict = judge(candidate, reference="shipped", reference_summary=reference,
                    invariants=invariants)
    assert verdict.broken
    assert [(worse.metric, worse.by) for worse in verdict.worse] == [
        ("conservation_drift_microdollars_total", 2)]
    assert verdict.rule == "(broken when worse than shipped)"
    over_five = Expectation("cap_overshoot_microdollars_total", ">", 5)
    both = judge(candidate, over_five, "shipped", reference, invariants)
    assert both.broken and not both.condition_broken
    assert both.rule == "(broken when > 5 or worse than shipped)"


def test_a_malformed_expectation_is_a_scenario_error():
    with pytest.raises(ScenarioError, match="expect.holds_leaked: expected a comparison"):
        parse_scenario({**SMALL, "expect": {"holds_leaked": "zero"}})


def test_run_exits_3_and_names_the_expectation_that_failed(tmp_path):
    scenario = tmp_path / "expecting.toml"
    scenario.write_text(
        'name = "expecting"\nduration = "2s"\ndrain = "1s"\nstore = "axond_budget.redis_v1"\n'
        '[fleet]\nreplicas = 5\n[network]\nreply_loss = 0.2\ntimeout = "50ms"\n'
        '[expect]\nholds_leaked = "== 0"\nrequests_arrived = "> 0"\n')
    result = subprocess.run([sys.executable, "-m", "simulator", "run", str(scenario), "--out",
                             str(tmp_path / "out"), "--quiet"], capture_output=True, text=True,
                            cwd=REPO)
    assert result.returncode == 3
    assert "expectation failed: holds_leaked == 0: got" in result.stderr
    assert "requests_arrived" not in result.stderr
    table = pq.read_table(tmp_path / "out" / "metrics.parquet")
    assert "leaked_holds_live_microdollars" in table.column_names


@pytest.mark.parametrize(("fault", "message"), [
    ({"at": "1s", "fault": "crash"}, "a scheduled crash needs `replica` \\(or `replicas`\\)"),
    ({"at": "1s", "fault": "pause", "replica": 0}, "a scheduled pause needs `duration`"),
    ({"at": "soon", "fault": "crash", "replica": 0}, "faults.schedule.0.at: expected a duration"),
    ({"at": "1s", "fault": "meteor"}, "faults.schedule.0.fault"),
])
def test_a_bad_scheduled_fault_says_what_is_missing(fault, message):
    with pytest.raises(ScenarioError, match=message.replace("`", "`")):
        parse_scenario({**SMALL, "faults": {"schedule": [fault]}})


def test_a_threshold_is_written_as_it_is_read_back():
    """A hunt writes its breaking condition into the race report, which reads
    it back: no ``1e+08`` for a hundred million (issue 24's hunt on a store
    that raised could not write its report)."""
    from simulator.scenario.conditions import Expectation
    for text in ("> 100000000", "< -0.5", "== 0", ">= 1.5e-07", "<= 1.5e+20"):
        expectation = Expectation.parse("metric", text)
        assert Expectation.parse("metric", expectation.comparison) == expectation
    assert Expectation.parse("metric", "> 100_000_000").comparison == "> 100000000"
