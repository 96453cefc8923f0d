"""The race report is one model (``simulator.search.race_report.RaceReport``): what
``dump`` writes, ``load`` reads back equal; every committed report loads; a
report a hunt writes replays; a malformed one is one line naming the field."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import USER_ERROR, main
from simulator.scenario.conditions import Expectation, parse_condition
from simulator.scenario.model import ScenarioError
from simulator.search.hunt import Hunt
from simulator.search.race_report import RaceReport, ReportInvariant
from simulator.search.races import load_report, replay

REPO = Path(__file__).resolve().parents[2]
REPORTS = sorted((REPO / "data" / "races").glob("*.toml"))
SPLIT = REPO / "data" / "races" / "split-settlement-lost-release-reply.toml"


def read_back(report: RaceReport) -> RaceReport:
    """``report`` written as TOML and validated again, without a file."""
    return RaceReport.model_validate(tomllib.loads(report.dumps()))


@pytest.mark.parametrize("path", REPORTS, ids=lambda path: path.stem)
def test_every_committed_report_loads_and_is_written_back_equal(path):
    report = RaceReport.load(path)
    assert report.title and report.variant and report.fingerprint
    assert report.invariant is not None or report.reference is not None
    assert report.scenario["store"]  # the scenario file it names, read
    assert read_back(report) == report


def test_a_report_dumped_beside_its_scenario_loads_back_equal_and_replays(tmp_path):
    report = RaceReport.load(SPLIT)
    moved = report.model_copy(update={"scenario_as_written": str(
        (SPLIT.parent / report.scenario_as_written).resolve())})
    again = RaceReport.load(moved.dump(tmp_path / "split.toml"))
    assert again == moved and again != report  # the scenario's path is part of the report
    assert again.scenario == report.scenario and again.schedule == report.schedule
    assert again.invariant == report.invariant == Expectation.parse(
        "conservation_drift_microdollars_total", "< 0")
    assert again.path == tmp_path / "split.toml"
    assert again.recorded_trace == tmp_path / "split.trace.parquet"
    found = replay(again)
    assert found.reproduced and found.result.summary["trace_fingerprint"] == report.fingerprint


def test_a_hunted_report_is_written_in_the_usual_layout_loads_back_equal_and_replays(tmp_path):
    # The baseline breaks it: one run, a report with no schedule.
    hunt = Hunt(REPO / "data/scenarios/hunt/av-state-add-without-ttl-quiet.toml",
                parse_condition("counters_without_ttl > 0"), reference="av_state.redis")
    found = hunt.search()
    assert found is not None and found.schedule == []
    out = tmp_path / "races" / "found.toml"
    hunt.write_report(found, out)
    report = load_report(out)
    assert report == hunt.race_report(found, out)
    assert report.fixed == {"store": "av_state.redis"} and report.reference == "av_state.redis"
    text = out.read_text()
    keys = [line.split(" =")[0] for line in text.splitlines() if line and line[0] != " "]
    assert keys == ["title", "story", "scenario", "seed", "fingerprint", "[variant]", "store",
                    "[fixed]", "store", "[invariant]", "metric", "broken_when", "reference"]
    assert out.with_suffix(".trace.parquet").exists()
    replayed = replay(report)
    assert replayed.reproduced and replayed.divergence is None


def test_an_inline_scenario_is_written_as_a_table_and_a_missing_fixed_as_a_hint():
    report = RaceReport(
        title="t", scenario={"name": "inline", "store": "axond_budget.redis_v1",
                             "fleet": {"replicas": 2}, "migrations": [{"at": "1s"}]},
        seed=3, variant={"store": "axond_budget.variants.split_settlement"},
        schedule=[{"at": "1s", "fault": "crash", "replicas": [0, 1]}],
        invariant=ReportInvariant.of(parse_condition("a > 0 or b < 0 and c == 0"), None))
    text = report.dumps()
    assert "[scenario]\nname = \"inline\"" in text and "[scenario.fleet]" in text
    assert "[[scenario.migrations]]" in text
    assert "[fixed]  # fill in the fixed store's changes" in text
    assert 'broken_when = "a > 0 or b < 0 and c == 0"' in text
    assert read_back(report) == report and report.scenario["fleet"] == {"replicas": 2}
    with pytest.raises(ValueError, match="was not read from a file"):
        report.path  # noqa: B018


# -- what any report may hold, written and read back ---------------------------------

TEXT = st.text(max_size=30)
SCALARS = (TEXT | st.booleans() | st.integers(-(2**63), 2**63 - 1)
           | st.floats(allow_nan=False))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(TEXT, inner, max_size=3), max_leaves=12)
TABLES = st.dictionaries(TEXT, VALUES, max_size=4)


@settings(max_examples=200, deadline=None, database=None)
@given(title=TEXT, story=st.text(max_size=200), scenario=TEXT | TABLES, variant=TABLES,
       fixed=TABLES, schedule=st.lists(TABLES, max_size=3), plugins=st.lists(TEXT, max_size=2),
       seed=st.integers(0, 2**63 - 1), reference=TEXT.filter(bool),
       fingerprint=st.none() | TEXT)
def test_whatever_a_report_holds_is_written_as_toml_that_reads_back_equal(
        title, story, scenario, variant, fixed, schedule, plugins, seed, reference, fingerprint):
    report = RaceReport(title=title, story=story, scenario=scenario, seed=seed, plugins=plugins,
                        fingerprint=fingerprint, variant=variant, fixed=fixed,
                        schedule=schedule, invariant={"reference": reference})
    assert read_back(report) == report


# -- a malformed report: one line naming the field, and exit 2 -----------------------

GOOD = {
    "title": 'title = "t"',
    "scenario": 'scenario = "x.toml"',
    "seed": "seed = 1",
    "variant": '[variant]\nstore = "axond_budget.variants.split_settlement"',
    "invariant": '[invariant]\nmetric = "m"\nbroken_when = "< 0"',
}


@pytest.mark.parametrize(("changed", "said"), [
    ({"invariant": ""}, "missing invariant"),
    ({"title": "", "variant": ""}, "missing title, variant"),
    ({"title": "title = 3"}, "title: expected text, got 3"),
    ({"seed": 'seed = "1"'}, "seed: expected an integer from 0 to 2^63 - 1, got '1'"),
    ({"seed": "seed = 1\ntitel = 'x'"}, "titel: unknown field; known fields: title, story"),
    ({"scenario": "scenario = 4"}, "scenario: expected a scenario file's path"),
    ({"seed": 'seed = 1\nplugins = "my_variant"'},
     "plugins: expected a list of module names, got 'my_variant'"),
    ({"variant": "variant = 3"}, "variant: Input should be a valid dictionary"),
    ({"seed": "seed = 1\nschedule = [1]"}, "schedule.0: Input should be a valid dictionary"),
    ({"seed": "seed = 1\ninvariant = 3", "invariant": ""},
     "invariant: expected { metric = NAME, broken_when"),
    ({"invariant": '[invariant]\nmetric = "m"'}, "invariant: expected { metric = NAME"),
    ({"invariant": '[invariant]\nbroken_when = "drift <"'},
     "invariant.broken_when: 'drift <': expected a number"),
    ({"invariant": '[invariant]\nmetric = "m"\nbroken_when = "zero"'},
     "invariant.broken_when: expected a comparison such as '<= 0.01'"),
    ({"invariant": '[invariant]\nmetric = "m"\nreference = "axond_budget.redis_v1"'},
     "invariant.broken_when: metric = 'm' needs its threshold"),
    ({"invariant": '[invariant]\nreference = "k"\nbroken_whem = "> 0"'},
     "invariant.broken_whem: unknown field; known fields: metric, broken_when, reference"),
])
def test_a_malformed_report_is_one_line_naming_the_field_and_exit_2(changed, said, tmp_path,
                                                                   capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("\n".join(filter(None, {**GOOD, **changed}.values())) + "\n")
    with pytest.raises(ScenarioError) as raised:
        RaceReport.load(bad)
    assert str(raised.value).startswith(f"{bad}: {said}"), str(raised.value)
    assert "\n" not in str(raised.value)
    assert main(["replay", str(bad)]) == USER_ERROR
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {bad}: {said}"), line


def test_a_replayed_scenario_is_described_by_its_report_not_by_the_file_it_changed():
    report = RaceReport.load(REPO / "data" / "races" / "split-settlement-lost-release-reply.toml")
    scenario = report.scenario_for(report.variant)
    assert scenario["network"]["reply_loss"] == 0.0
    assert scenario["description"] == report.title and "3%" not in scenario["description"]
