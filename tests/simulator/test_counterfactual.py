"""The counterfactual mode: the same seed again, one fault class removed at a time."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from simulator.search.counterfactual import (
    counterfactual,
    counterfactual_table,
    fault_classes,
    mechanistic_attribution,
)

# Small and quick: 20 replicas, subject caps that bind, 5% of replies lost
# and a crash every 10 s per replica (restarted after 1 s).
FAULTY = {
    "name": "counterfactual", "duration": "5s", "drain": "3s", "seed": 3,
    "store": "axond_budget.redis_v1",
    "store_settings": {"subject_cap_microdollars": 60_000, "reservation_ttl": "2s"},
    "fleet": {"replicas": 20},
    "network": {"latency": "lognormal(1ms, 0.5)", "reply_loss": 0.05, "timeout": "200ms"},
    "workload": {"arrivals": "poisson(200/s)", "keys": {"subjects": 10, "namespaces": 2},
                 "estimate_microdollars": 5000, "actual_microdollars": "uniform(0, 6000)",
                 "duration": "lognormal(100ms, 0.5)"},
    "faults": {"crash": {"rate": "6/min", "restart_after": "1s"}},
}
QUIET = {key: value for key, value in FAULTY.items() if key != "faults"} | {
    "network": {"latency": "lognormal(1ms, 0.5)", "timeout": "200ms"}}


def class_named(scenario, name):
    return next(each for each in fault_classes(scenario) if each.name == name)


def crash_times(result):
    columns = result.trace.columns
    return [(time, replica) for time, replica, kind in zip(
        columns["time_us"], columns["replica"], columns["kind"], strict=True)
        if kind == "fault_crash"]


@pytest.fixture(scope="module")
def faulty():
    return parse_scenario(FAULTY)


@pytest.fixture(scope="module")
def baseline(faulty):
    return run_scenario(faulty)


@pytest.fixture(scope="module")
def result(faulty, baseline):
    return counterfactual(faulty, baseline=baseline.summary)


def test_removing_reply_loss_leaves_the_crash_times_as_they_were(faulty, baseline):
    without = run_scenario(class_named(faulty, "reply_loss").remove_from(faulty))

    assert baseline.summary["reply_lost_count"] > 0
    assert without.summary["reply_lost_count"] == 0
    assert crash_times(baseline)
    assert crash_times(without) == crash_times(baseline)
    # The damage lost replies caused went with them.
    assert (without.summary["leaked_hold_microdollar_seconds"]
            < baseline.summary["leaked_hold_microdollar_seconds"])


def test_the_scenario_it_came_from_is_left_as_it_was(faulty):
    class_named(faulty, "crash").remove_from(faulty)
    assert faulty.faults.crash is not None
    assert faulty.network.reply_loss == 0.05


def test_without_reply_loss_the_damage_differs_from_the_baseline(result):
    by_class = {run.fault_class.name: run for run in result.runs}

    assert set(by_class) == {"crash", "reply_loss"}
    without = by_class["reply_loss"]
    assert without.summary["reply_lost_count"] == 0
    assert without.disappeared["leaked_hold_microdollar_seconds"] > 0
    assert without.change["leaked_hold_microdollar_seconds"] == pytest.approx(
        without.summary["leaked_hold_microdollar_seconds"]
        - result.baseline["leaked_hold_microdollar_seconds"], abs=0.01)
    # Every class was run with the same seed.
    assert {run.summary["seed"] for run in result.runs} == {result.baseline["seed"]}


def test_the_table_has_a_row_per_fault_class_present(result):
    table = counterfactual_table(result)
    rows = [line.split()[1] for line in table.splitlines() if line.startswith("   without ")]

    assert sorted(rows) == ["crash", "reply_loss"]
    assert "network.reply_loss = 0" in table
    assert "leaked_hold_microdollar_seconds" in table
    assert "mechanistic attribution" in table


def test_a_scenario_without_faults_has_no_classes_and_says_so():
    quiet = parse_scenario(QUIET)
    summary = run_scenario(quiet).summary

    result = counterfactual(quiet, baseline=summary)

    assert fault_classes(quiet) == ()
    assert result.runs == ()
    assert "the scenario injects no fault" in counterfactual_table(result)


def test_every_fault_class_the_lab_injects_is_found_and_each_removes_alone():
    scenario = parse_scenario(FAULTY | {
        "network": {"request_loss": 0.01, "reply_loss": 0.01, "retries": "redis-py"},
        "fleet": {"replicas": 4, "clock_offset": "normal(0ms, 50ms)"},
        "server": {"maxmemory_keys": 100, "persistence": "rdb"},
        "faults": {
            "crash": {"rate": "1/h"}, "pause": {"rate": "0/h"}, "server_restart": {"rate": "1/h"},
            "schedule": [{"at": "1s", "fault": "lose_reply", "replica": 0},
                         {"at": "2s", "fault": "lose_reply", "replica": 1},
                         {"at": "3s", "fault": "pause", "replica": 2, "duration": "1s"}]},
        "migrations": [{"at": "2s", "to": "axond_budget.redis_v2", "crash_after_commands": 3,
                        "settings": {"namespace_cap_microdollars": 500_000}}],
    })
    names = [each.name for each in fault_classes(scenario)]

    assert names == ["crash", "server_restart", "scheduled lose_reply", "scheduled pause",
                     "request_loss", "reply_loss", "retries", "clock_skew", "eviction",
                     "persistence_loss", "migration_crash"]
    for each in fault_classes(scenario):
        remaining = [other.name for other in fault_classes(each.remove_from(scenario))]
        assert each.name not in remaining
        # Removing server restarts removes what they lose too; nothing else goes.
        assert set(names) - set(remaining) == {each.name} | (
            {"persistence_loss"} if each.name == "server_restart" else set())


def test_only_the_damage_metrics_attribution_is_shown():
    summary = {"cap_overshoot_microdollars_total": 10,
               "cap_overshoot_by_settlement_lost_microdollars": 7,
               "cap_overshoot_by_eviction_microdollars": 0,
               "cap_overshoot_by_estimate_underrun_microdollars": 3,
               "requests_aborted_by_crash": 4,
               "false_denials": 2, "false_denials_by_leaked_hold": 2}

    assert mechanistic_attribution(summary, ["cap_overshoot_microdollars_total",
                                             "false_denials"]) == {
        "cap_overshoot": {"settlement_lost_microdollars": 7, "estimate_underrun_microdollars": 3},
        "false_denials": {"leaked_hold": 2},
    }


def test_run_counterfactual_prints_the_table_and_writes_it(tmp_path, capsys):
    scenario = tmp_path / "faulty.toml"
    scenario.write_text(_toml(FAULTY))
    out = tmp_path / "out"

    code = main(["run", str(scenario), "--counterfactual", "--quiet", "--out", str(out)])

    printed = capsys.readouterr()
    assert code == 0
    assert "counterfactual run 2/2: without reply_loss" in printed.err
    assert "   without crash " in printed.out and "   without reply_loss " in printed.out
    written = json.loads((out / "counterfactual.json").read_text())
    assert set(written["without"]) == {"crash", "reply_loss"}
    assert (out / "summary.json").exists()


def _toml(data: dict, prefix: str = "") -> str:
    """A nested dict of plain values as TOML, one dotted key a line."""
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(_toml(value, f"{prefix}{key}."))
        else:
            lines.append(f"{prefix}{key} = {json.dumps(value)}")
    return "\n".join(lines)

