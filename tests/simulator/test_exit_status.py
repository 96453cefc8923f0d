"""What a run's exit status says about its verdicts (issue 30): ``--fail-on
store`` (the default) fails a run whose verdict blames the store, ``broken``
any BROKEN invariant, ``never`` none; a failed ``[expect]`` is 3 whatever."""

from __future__ import annotations

import pytest
from scenario_data import BUDGET_FLEET, merge

from simulator.cli import build_parser, main
from simulator.present.verdicts import FAIL_ON, VERDICT_FAILED
from simulator.search.race_report import toml_document

BLAMED = merge(BUDGET_FLEET, {"store": "axond_budget.variants.untagged_keys",
                              "server": {"cluster": {"shards": 3}}})
"""A store whose keys straddle slots on a cluster: its damage is its own."""


def _run(tmp_path, data: dict, *flags: str) -> int:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(toml_document(data), encoding="utf-8")
    return main(["run", str(scenario), "--quiet", "--out", str(tmp_path / "out"), *flags])


@pytest.mark.parametrize(("data", "fail_on", "status"), [
    (BLAMED, None, VERDICT_FAILED),
    (BLAMED, "never", 0),
    (BUDGET_FLEET, None, 0),  # broken by the lost replies only: not the store's
    (BUDGET_FLEET, "broken", VERDICT_FAILED),
])
def test_the_exit_status_follows_fail_on(tmp_path, capsys, data, fail_on, status):
    flags = ("--fail-on", fail_on) if fail_on else ()
    assert _run(tmp_path, data, *flags) == status
    if status:
        assert "verdict failed" in capsys.readouterr().err


def test_a_failed_expectation_is_3_whatever_fail_on_says(tmp_path):
    data = merge(BLAMED, {"expect": {"script_errors": "<= 0"}})
    assert _run(tmp_path, data, "--fail-on", "never") == 3


def test_the_cli_offers_the_verdicts_choices():
    run = next(action for action in build_parser()._subparsers._group_actions[0]
               .choices["run"]._actions if action.dest == "fail_on")
    assert tuple(run.choices) == FAIL_ON and run.default == FAIL_ON[0]


def test_the_readme_s_ci_example_names_metrics_a_run_reports(tmp_path):
    import re
    import tomllib
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"```toml\n(\[expect\].*?)```", readme, re.S)
    assert block is not None
    expect = tomllib.loads(block.group(1))["expect"]
    scenario = tmp_path / "ci.toml"
    scenario.write_text(toml_document(merge(BUDGET_FLEET, {"expect": expect})), encoding="utf-8")
    assert main(["check", str(scenario)]) == 0


def test_a_run_of_another_store_keeps_its_own_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "fleet.toml"
    scenario.write_text(toml_document(merge(BUDGET_FLEET, {"duration": "1s"})), encoding="utf-8")
    assert main(["run", str(scenario), "--quiet"]) == 0
    mine = tmp_path / "data" / "results" / "budget-fleet-seed1"
    other = ["run", str(scenario), "--quiet", "--set", "store=axond_budget.in_memory"]
    assert main(other) in (0, VERDICT_FAILED)
    kept = tmp_path / "data" / "results" / "budget-fleet-axond_budget.in_memory-seed1"
    assert (mine / "summary.json").exists() and (kept / "summary.json").exists()
    # Into one DIR: refused, unless --force.
    assert main([*other, "--out", str(mine)]) == 2
    assert main([*other, "--out", str(mine), "--force", "--fail-on", "never"]) == 0
