"""Verdicts: ``run`` says first whether each invariant held, per family and
scope, naming the largest contributor by cause; the grouped summary shows
every scope; ``[expect]`` prints thresholds with measured values; ``check``
(and ``run`` before it starts, and ``hunt``) refuse a metric the scenario's
family never reports; ``run --junit`` writes the same judgements as JUnit XML."""

from __future__ import annotations

import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import simulator.search.hunt as hunt_module
from simulator.cli import main
from simulator.families import invariants_for
from simulator.present.junit import junit_xml
from simulator.present.report import OTHER, grouped, summary_table
from simulator.present.verdicts import expectation_line, invariant_verdicts
from simulator.run.compose import run_scenario
from simulator.run.preflight import UnknownMetric, known_metrics, problems
from simulator.scenario.conditions import Invariant, judge_expectations, parse_condition
from simulator.scenario.model import load_scenario, parse_scenario
from simulator.search.hunt import Hunt, PhaseSummary
from stores import registry

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios"
BUDGET_V2 = registry.get("axond_budget.redis_v2")

# A small v2 run whose lost replies leak holds (and so deny requests) in both
# scopes: a few seconds on fakeredis.
V2_TOML = """\
name = "v2-small"
duration = "2s"
drain = "1s"
store = "axond_budget.redis_v2"
[store_settings]
subject_cap_microdollars = 60_000
namespace_cap_microdollars = 150_000
reservation_ttl = "30s"
[fleet]
replicas = 10
[network]
reply_loss = 0.05
timeout = "50ms"
[workload]
arrivals = "poisson(300/s)"
keys = { subjects = 6, namespaces = 2 }
estimate_microdollars = 5000
actual_microdollars = "uniform(0, 6000)"
"""


def _v2_summary(**values: float) -> dict:
    """A hand-made v2 summary: every invariant sound, but for ``values``."""
    summary = {"scenario": "hand-made", "store": BUDGET_V2.name}
    for invariant in invariants_for(BUDGET_V2):
        summary[invariant.metric] = 0
    summary.update(values)
    return summary


# ---------------------------------------------------------------- verdicts


def test_a_verdict_says_held_or_broken_with_the_largest_contributor_by_cause():
    summary = _v2_summary(cap_overshoot_microdollars_total=12_305,
                          cap_overshoot_by_store_logic_microdollars=12_000,
                          cap_overshoot_by_settlement_lost_microdollars=305,
                          cap_overshoot_by_eviction_microdollars=0)
    lines = [str(verdict) for verdict in invariant_verdicts(summary, invariants_for(BUDGET_V2))]
    assert lines[0] == ("BROKEN cap_overshoot_microdollars_total = 12,305 "
                        "(largest contributor: store_logic 12,000)")
    assert "HELD   conservation_drift_microdollars_total = 0" in lines


def test_each_scope_has_its_own_verdicts_and_its_own_contributors():
    summary = _v2_summary(namespace_cap_overshoot_microdollars_total=700,
                          namespace_cap_overshoot_by_settlement_lost_microdollars=700,
                          cap_overshoot_by_store_logic_microdollars=0)
    verdicts = {verdict.metric: verdict
                for verdict in invariant_verdicts(summary, invariants_for(BUDGET_V2))}
    assert verdicts["cap_overshoot_microdollars_total"].held
    broken = verdicts["namespace_cap_overshoot_microdollars_total"]
    assert not broken.held and broken.contributor == ("settlement_lost", 700)
    # A v1 summary has no namespace scope: no verdict on it.
    v1 = {name: value for name, value in summary.items() if not name.startswith("namespace_")}
    assert not any(verdict.metric.startswith("namespace_")
                   for verdict in invariant_verdicts(v1, invariants_for(BUDGET_V2)))


def test_drift_is_broken_either_way_and_its_largest_part_is_the_furthest_from_zero():
    summary = _v2_summary(conservation_drift_microdollars_total=-40,
                          conservation_drift_by_settlement_lost_microdollars=-90,
                          conservation_drift_by_duplicate_execution_microdollars=50)
    verdict = next(verdict for verdict in invariant_verdicts(summary, invariants_for(BUDGET_V2))
                   if verdict.metric == "conservation_drift_microdollars_total")
    assert str(verdict) == ("BROKEN conservation_drift_microdollars_total = -40 "
                            "(largest contributor: settlement_lost -90)")


def test_an_invariant_finds_its_parts_by_cause_under_the_usual_name_or_its_own():
    usual = Invariant("false_denials")
    assert usual.causes({"false_denials": 3, "false_denials_by_leaked_holds_message_lost": 2,
                         "false_denials_by_store_logic": 1, "false_denials_exceeded": 3}) == {
        "leaked_holds_message_lost": 2, "store_logic": 1}
    own = Invariant("cap_overshoot_microdollars_total",
                    by_cause="cap_overshoot_by_{cause}_microdollars").in_scope("namespace_")
    assert own.metric == "namespace_cap_overshoot_microdollars_total"
    assert own.causes({"cap_overshoot_by_eviction_microdollars": 5,
                       "namespace_cap_overshoot_by_eviction_microdollars": 7}) == {"eviction": 7}


def test_a_broken_invariant_filed_under_no_cause_names_no_contributor():
    verdict = invariant_verdicts({"conservation_residual_max_units": 3},
                                 [Invariant("conservation_residual_max_units")])[0]
    assert str(verdict) == "BROKEN conservation_residual_max_units = 3"


# ---------------------------------------------------------------- expectations


def test_each_expectation_prints_its_threshold_and_the_measured_value():
    summary = {"cap_overshoot_microdollars_total": 12_305, "holds_leaked": 0,
               "conservation_drift_microdollars_total": -4}
    outcomes = judge_expectations({
        "cap_overshoot_microdollars_total": "< 1000",
        "holds_leaked": "== 0",
        "books": "conservation_drift_microdollars_total == 0 and holds_leaked == 0",
        "typo": "holds_leakd == 0"}, summary)
    assert [expectation_line(outcome) for outcome in outcomes] == [
        "expect cap_overshoot_microdollars_total < 1000: measured 12,305 — FAILED",
        "expect holds_leaked == 0: measured 0 — held",
        "expect books: conservation_drift_microdollars_total == 0 and holds_leaked == 0: "
        "measured conservation_drift_microdollars_total = -4, holds_leaked = 0 — FAILED",
        "expect typo: holds_leakd == 0: measured nothing: the summary has no metric "
        "'holds_leakd' — FAILED"]


# ---------------------------------------------------------------- the grouped summary


def test_the_summary_table_shows_the_namespace_scope_beside_the_subject_scope():
    summary = _v2_summary(denials_caused_by_leaked_holds=0,
                          namespace_denials_caused_by_leaked_holds=11_313,
                          namespace_holds_leaked=4)
    table = summary_table(summary)
    assert "-- denials, namespace scope" in table
    assert "namespace_denials_caused_by_leaked_holds" in table and "11,313" in table
    assert table.index("-- cap, namespace scope") > table.index("-- denials\n")
    v1 = {name: value for name, value in summary.items() if not name.startswith("namespace_")}
    assert "namespace scope" not in summary_table(v1)


def test_a_metric_no_group_names_is_shown_under_other_never_hidden():
    summary = {**_v2_summary(), "a_metric_nobody_placed": 0}
    groups = dict(grouped(summary))
    assert groups[OTHER] == ["a_metric_nobody_placed"]
    assert "a_metric_nobody_placed" in summary_table(summary)


# ---------------------------------------------------------------- known metrics


def _run_small(path: str, overrides: dict) -> tuple:
    scenario = load_scenario(SCENARIOS / path, overrides)
    return scenario, run_scenario(scenario).summary


@pytest.mark.parametrize(("path", "overrides"), [
    ("demo.toml", {"duration": "1s", "drain": "1s", "fleet.replicas": 10}),
    ("migrate-v1-to-v2.toml", {}),  # two kinds, both scopes, a migration
    ("in-memory-fleet.toml", {"duration": "1s"}),  # no server
    ("leases.toml", {"duration": "2s", "drain": "1s", "fleet.replicas": 10}),
    ("av-state.toml", {"duration": "1h", "drain": "2h"}),
    ("tollgate.toml", {"duration": "20s"}),  # a service
])
def test_known_metrics_are_the_metrics_a_real_run_of_each_family_reports(path, overrides):
    scenario, summary = _run_small(path, overrides)
    measured = {name for name, value in summary.items() if not isinstance(value, str)}
    known = known_metrics(scenario)
    # Every metric the run reported is known; every known one but those
    # named only as they happen (a refusal kind that did not come) is reported.
    assert all(name in known for name in measured)
    assert set(known.names) == {name for name in measured
                                if not name.startswith(known.open_prefixes)}
    assert "store" not in known and "trace_fingerprint" not in known


@pytest.mark.parametrize("path", ["demo.toml", "in-memory-fleet.toml", "leases.toml",
                                  "av-state.toml", "tollgate.toml",
                                  "variant-recomputed-namespace-total.toml"])
def test_fields_lists_every_summary_key_of_a_scenario_each_in_its_group(path, capsys):
    from simulator.cli import main
    from simulator.run.summary import TEXT_FIELDS
    scenario = load_scenario(SCENARIOS / path)
    assert main(["fields", "--metrics", str(SCENARIOS / path)]) == 0
    listed = capsys.readouterr().out
    keys = {line.split()[0] for line in listed.splitlines() if line.startswith("   ")}
    assert set(known_metrics(scenario).names) | set(TEXT_FIELDS) == keys
    # Every key has a group of the summary table's: none is left to "other".
    assert f"-- {OTHER}" not in listed


def test_fields_ends_with_the_keys_every_run_reports(capsys):
    from simulator.cli import main
    from simulator.run.summary import COUNTED_EVENTS, RUN_FIELDS, RUN_TOTALS
    assert main(["fields"]) == 0
    printed = capsys.readouterr().out
    core = printed[printed.index("# Summary keys of every run"):]
    keys = {line.split()[0] for line in core.splitlines() if line.startswith("   ")}
    assert {*RUN_FIELDS, *RUN_TOTALS, *(f"{event}_count" for event in COUNTED_EVENTS)} <= keys
    assert f"-- {OTHER}" not in core


def test_a_metric_named_only_as_it_happens_is_known_by_its_group_and_no_other_is():
    tollgate = known_metrics(load_scenario(SCENARIOS / "tollgate.toml"))
    assert "spends_refused_by_storage" in tollgate  # one per refusal kind, as they come
    assert "spends_refused_by_storage" not in tollgate.names
    demo = known_metrics(load_scenario(SCENARIOS / "demo.toml"))
    assert "cap_overshoot_by_store_logic_microdollars" in demo
    assert "cap_overshoot_by_stroe_logic_microdollars" not in demo
    assert "namespace_cap_overshoot_microdollars_total" not in demo  # v1: no namespace cap
    assert "namespace_cap_overshoot_by_store_logic_microdollars" not in demo


def test_check_finds_every_misspelt_expect_metric_with_its_close_matches():
    scenario = parse_scenario({**_v2_data(), "expect": {
        "false_denial": "== 0", "books": "holds_leakd == 0 and holds_leaked == 0",
        "holds_leaked": "== 0"}})
    found = problems(scenario)
    assert len(found) == 2
    assert found[0].startswith("expect.false_denial: no metric 'false_denial' in the summary; "
                               "did you mean ")
    assert "false_denials" in found[0] and "known metrics: " in found[0]
    assert found[1].startswith("expect.books: no metric 'holds_leakd'")


def test_check_finds_a_backend_the_store_cannot_run_on():
    assert problems(parse_scenario(_v2_data()), "memory") == [
        "backend: the store 'axond_budget.redis_v2' runs on 'valkey', 'fakeredis' or "
        "'redis://...', not 'memory'"]


def _v2_data() -> dict:
    return tomllib.loads(V2_TOML)


# ---------------------------------------------------------------- the command line


@pytest.fixture
def v2_file(tmp_path):
    path = tmp_path / "v2.toml"
    path.write_text(V2_TOML + '[expect]\ncap_overshoot_microdollars_total = "< 1000"\n'
                    'false_denials = "== 0"\n', encoding="utf-8")
    return path


def test_run_prints_verdicts_first_then_every_scope_then_expectations_with_values(
        v2_file, tmp_path, capsys):
    junit = tmp_path / "ci" / "junit.xml"
    code = main(["run", str(v2_file), "--out", str(tmp_path / "out"), "--quiet",
                 "--junit", str(junit)])
    printed = capsys.readouterr()
    assert code == 3  # false_denials == 0 fails: leaked holds deny requests
    lines = printed.out.splitlines()
    assert lines[0] == "HELD   cap_overshoot_microdollars_total = 0"
    assert any(line.startswith("BROKEN false_denials = ") and "largest contributor: "
               in line for line in lines[:15])
    assert any(line.startswith(("HELD   namespace_", "BROKEN namespace_"))
               for line in lines[:15])
    assert "-- denials, namespace scope" in printed.out
    assert "expect cap_overshoot_microdollars_total < 1000: measured 0 — held" in lines
    failed = next(line for line in lines if line.startswith("expect false_denials == 0"))
    assert failed.endswith("— FAILED") and "measured 0 " not in failed
    assert printed.out.index("-- run") < printed.out.index("expect cap_overshoot")
    assert "expectation failed: false_denials == 0: got" in printed.err

    # The same judgements, as JUnit XML a CI system reads.
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {(case.get("classname"), case.get("name")): case for case in suite.iter("testcase")}
    invariants = [name for group, name in cases if group == "v2-small-seed1.invariants"]
    assert len(invariants) == len([line for line in lines[:15]
                                   if line.startswith(("HELD", "BROKEN"))])
    assert "namespace_cap_overshoot_microdollars_total" in invariants
    expectation = cases[("v2-small-seed1.expect", "false_denials == 0")]
    assert expectation.find("failure").get("message") == failed
    held = cases[("v2-small-seed1.expect", "cap_overshoot_microdollars_total < 1000")]
    assert held.find("failure") is None
    failures = sum(1 for case in cases.values() if case.find("failure") is not None)
    assert suite.get("failures") == str(failures) and suite.get("tests") == str(len(cases))
    assert f"junit: {junit}" in printed.out


def test_junit_xml_has_a_failure_with_the_measured_figure_only_where_broken():
    summary = _v2_summary(cap_overshoot_microdollars_total=12_305,
                          cap_overshoot_by_store_logic_microdollars=12_000)
    verdicts = invariant_verdicts(summary, invariants_for(BUDGET_V2))
    outcomes = judge_expectations({"cap_overshoot_microdollars_total": "< 1000"}, summary)
    suite = ET.fromstring(junit_xml("hand-made", verdicts, outcomes)).find("testsuite")
    failures = {case.get("name"): case.find("failure").text
                for case in suite.iter("testcase") if case.find("failure") is not None}
    assert failures == {
        "cap_overshoot_microdollars_total": "BROKEN cap_overshoot_microdollars_total = 12,305 "
                                            "(largest contributor: store_logic 12,000)",
        "cap_overshoot_microdollars_total < 1000":
            "expect cap_overshoot_microdollars_total < 1000: measured 12,305 — FAILED"}
    assert suite.get("tests") == str(len(verdicts) + 1) and suite.get("failures") == "2"


def test_run_refuses_a_misspelt_expect_metric_before_it_starts(v2_file, tmp_path, capsys):
    v2_file.write_text(v2_file.read_text().replace('false_denials = "== 0"',
                                                   'false_denial = "== 0"'))
    out = tmp_path / "out"
    assert main(["run", str(v2_file), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {v2_file}: expect.false_denial: no metric 'false_denial'")
    assert len(err.splitlines()) == 1 and "known metrics: " in err
    assert not out.exists()  # nothing ran


def test_run_refuses_a_junit_path_that_is_a_directory(v2_file, tmp_path, capsys):
    assert main(["run", str(v2_file), "--out", str(tmp_path / "out"), "--quiet",
                 "--junit", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"error: --junit: {tmp_path} is a directory; give a "
                                       f"file, e.g. {tmp_path / 'junit.xml'}\n")


def test_check_says_ok_in_one_line_without_running(v2_file, capsys, monkeypatch):
    monkeypatch.setattr("simulator.run.compose.run_scenario", None)  # a run would fail loudly
    assert main(["check", str(v2_file)]) == 0
    ok, work = capsys.readouterr().out.splitlines()  # then the work a run would take
    assert ok == (f"ok: {v2_file}: store axond_budget.redis_v2 (family axond_budget), "
                  "2 [expect] entries, every metric known")
    assert work.startswith("work: about ") and "(limits: 200 million events" in work


@pytest.mark.parametrize(("arguments", "message"), [
    (["--set", 'expect.holds_leakd="== 0"'], "error: {file}: expect.holds_leakd: no metric "
                                             "'holds_leakd' in the summary; did you mean "),
    (["--backend", "memory"], "error: {file}: backend: the store 'axond_budget.redis_v2' "
                              "runs on "),
    (["--plugin", "no_such_plugin_module"], "error: --plugin: "),
    (["--set", "fleet.replicas=0"], "error: "),
])
def test_check_reports_each_problem_as_an_error_line_and_exit_2(v2_file, arguments, message,
                                                                capsys):
    assert main(["check", str(v2_file), *arguments]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(file=v2_file)) and "Traceback" not in err


def test_check_of_a_directory_is_one_line(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path} is a directory") and len(err.splitlines()) == 1


# ---------------------------------------------------------------- hunt


def test_hunt_refuses_a_metric_its_family_never_reports_before_any_run(capsys, monkeypatch):
    def no_run(*args, **kwargs):
        raise AssertionError("the hunt ran a scenario")

    monkeypatch.setattr(hunt_module, "run_scenario", no_run)
    split = SCENARIOS / "hunt" / "split-settlement-quiet.toml"
    hunt = Hunt(split, parse_condition("conservation_drift < 0"))
    with pytest.raises(UnknownMetric, match="did you mean conservation_drift_microdollars_total"):
        hunt.search()
    assert hunt.runs == 0
    assert main(["hunt", str(split), "--invariant", "conservation_drift < 0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --invariant: no metric 'conservation_drift' in the summary; "
                          "did you mean conservation_drift_microdollars_total? known metrics: ")
    assert len(err.splitlines()) == 1


def test_hunt_progress_says_the_phase_and_summarises_rather_than_one_line_a_run():
    printed: list[str] = []
    phases = PhaseSummary(printed.append, every=3)
    phases("baseline", 1, "no faults, drift = 0")
    for run in range(2, 6):
        phases("search", run, "1 fault(s), drift = 0")
    phases("search", 6, "2 fault(s), drift = -386 BROKEN")
    for run in range(7, 13):
        broken = run % 2 == 0
        phases("shrink", run, f"1 fault(s), drift = -{run}" + (" BROKEN" if broken else ""))
    assert printed == [
        "hunt: baseline: no faults, drift = 0",
        "hunt: search: 3 schedules tried, none broke it yet",
        "hunt: search run 5 broke it (2 fault(s), drift = -386); now shrinking the schedule",
        "hunt: shrink: 3 runs; latest broken schedule: 1 fault(s), drift = -8",
        "hunt: shrink: 6 runs; latest broken schedule: 1 fault(s), drift = -12",
    ]
    assert phases.totals() == "1 baseline, 5 search and 6 shrink runs"
