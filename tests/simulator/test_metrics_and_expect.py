"""The metrics series and ``[expect]`` thresholds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from simulator.expectations import Expectation, failed_expectations
from simulator.run import run_scenario
from simulator.scenario import ScenarioError, parse_scenario

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
