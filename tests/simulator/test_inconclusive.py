"""No vacuous pass (issue 24): a run that could not exercise the store is
INCONCLUSIVE, never HELD, with the reason in one line and exit status 4; a
store call that raises is a finding (the run goes on, hunt breaks on it),
never an abort; ``check`` builds one store of the kind."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.run.compose import run_scenario
from simulator.run.exercise import INCONCLUSIVE_EXIT
from simulator.scenario.conditions import Expectation
from simulator.scenario.model import load_scenario
from simulator.search.hunt import Hunt

PLUGIN = '''
from stores.axond_budget import RedisBudget, redis_kind
from stores.registry import register


class CannotBuild(RedisBudget):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("no licence for this store")


class RaisesOnBigSettles(RedisBudget):
    async def settle(self, key, reservation, actual_microdollars):
        if actual_microdollars > 4_500:
            raise KeyError(actual_microdollars)
        await super().settle(key, reservation, actual_microdollars)


register(redis_kind("plugtest.cannot_build", "its constructor raises",
                    store_class=CannotBuild))
register(redis_kind("plugtest.raises_on_big_settles", "settle raises on a big spend",
                    store_class=RaisesOnBigSettles))
'''

SCENARIO = """
name = "{name}"
duration = "{duration}"
drain = "1s"
plugins = ["plugtest_inconclusive"]
store = "{store}"
[store_settings]
subject_cap_microdollars = 200_000
reservation_ttl = "5s"
[fleet]
replicas = 4
[workload]
arrivals = "{arrivals}"
keys = {{ subjects = 5, namespaces = 1 }}
estimate_microdollars = 5000
actual_microdollars = "uniform(1000, 5000)"
duration = "lognormal(50ms, 0.5)"
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "plugins"
    directory.mkdir()
    (directory / "plugtest_inconclusive.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(directory))
    return directory


def scenario_file(directory: Path, store: str, duration: str = "2s",
                  arrivals: str = "poisson(50/s)") -> Path:
    path = directory / f"{store.split('.')[-1]}.toml"
    path.write_text(SCENARIO.format(name=store.split(".")[-1], store=store, duration=duration,
                                    arrivals=arrivals))
    return path


def test_a_store_that_cannot_be_built_is_inconclusive_not_held(plugin, tmp_path, capsys):
    path = scenario_file(tmp_path, "plugtest.cannot_build")
    junit = tmp_path / "junit.xml"
    code = main(["run", str(path), "--quiet", "--out", str(tmp_path / "out"),
                 "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == INCONCLUSIVE_EXIT
    lines = out.splitlines()
    assert lines[0] == ("INCONCLUSIVE no replica booted its store: RuntimeError: no licence "
                        "for this store")
    assert "HELD" not in out
    verdicts = lines[1:lines.index("")]
    assert len(verdicts) >= 6 and all(line.startswith("INCONCLUSIVE ") and line.endswith(" = 0")
                                      for line in verdicts)
    assert "(seed 1)" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["replica_started_count"] == 0 and summary["replica_boot_failed_count"] > 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("errors") == "1" and int(suite.get("skipped")) >= 6
    assert suite.find("testcase[@name='exercised']/error") is not None
    # With --verbose, the traceback behind it.
    main(["run", str(path), "--quiet", "--out", str(tmp_path / "again"), "--verbose"])
    assert "Traceback (most recent call last)" in capsys.readouterr().out


def test_check_builds_one_store_and_refuses_one_that_cannot_be(plugin, tmp_path, capsys):
    assert main(["check", str(scenario_file(tmp_path, "plugtest.cannot_build"))]) == (
        INCONCLUSIVE_EXIT)
    assert "no licence for this store" in capsys.readouterr().err
    assert main(["check", str(scenario_file(tmp_path, "plugtest.raises_on_big_settles"))]) == 0


def test_a_run_the_store_answered_nothing_in_is_inconclusive(plugin, tmp_path):
    path = scenario_file(tmp_path, "axond_budget.redis_v1", duration="10ms",
                         arrivals="poisson(1/s)")
    result = run_scenario(load_scenario(path))
    assert result.summary["store_answers"] == 0
    assert result.summary["inconclusive"].startswith("the store answered no request")


def test_a_store_call_that_raises_is_a_finding_and_the_run_goes_on(plugin, tmp_path, capsys):
    path = scenario_file(tmp_path, "plugtest.raises_on_big_settles")
    result = run_scenario(load_scenario(path))
    summary = result.summary
    assert summary["store_raised_count"] > 1  # not stopped at the first
    assert summary["store_answers"] > summary["store_raised_count"]
    raised = summary["store_raised"]
    assert raised.startswith("KeyError: ") and " in RaisesOnBigSettles.settle (" in raised
    assert "plugtest_inconclusive.py:" in raised and " on replica " in raised
    assert summary["inconclusive"] == f"the store raised outside its contract: {raised}"
    assert "Traceback" in result.run_info["store_raised_traceback"]
    # The same run again: the same finding, the same trace.
    again = run_scenario(load_scenario(path)).summary
    assert again["trace_fingerprint"] == summary["trace_fingerprint"]
    assert main(["run", str(path), "--quiet", "--out", str(tmp_path / "out")]) == (
        INCONCLUSIVE_EXIT)
    assert capsys.readouterr().out.startswith("INCONCLUSIVE the store raised outside its "
                                              "contract: KeyError")


def test_hunt_counts_a_schedule_whose_store_raised_as_breaking(plugin, tmp_path):
    path = scenario_file(tmp_path, "plugtest.raises_on_big_settles", duration="1s")
    never = Expectation.parse("cap_overshoot_microdollars_total", "> 10_000_000")
    found = Hunt(path, never, seed=0, examples=3, time_budget_s=120).search()
    assert found is not None, "a run whose store raised is broken whatever the condition says"
    assert found.verdict.broken and not found.verdict.condition_broken
    assert found.verdict.observed.startswith("the store raised KeyError")


def test_the_html_report_says_inconclusive_first(plugin, tmp_path):
    from simulator.present.html_report import verdict_lines
    path = scenario_file(tmp_path, "plugtest.cannot_build")
    lines = verdict_lines(run_scenario(load_scenario(path)).summary)
    assert lines[0].startswith("INCONCLUSIVE no replica booted its store")
    assert not any(line.startswith("HELD") for line in lines)


def test_hunt_writes_a_race_report_for_a_store_that_raised_and_it_replays(plugin, tmp_path,
                                                                          capsys):
    path = scenario_file(tmp_path, "plugtest.raises_on_big_settles", duration="1s")
    report = tmp_path / "race.toml"
    main(["hunt", str(path), "--invariant", "cap_overshoot_microdollars_total > 100000000",
          "--out", str(report)])
    assert "broken with 0 fault(s)" in capsys.readouterr().out
    assert main(["replay", str(report)]) == 0
    assert "REPRODUCED: the store raised KeyError" in capsys.readouterr().out
