"""``hunt`` finds the historical races by itself, shrinks them, and writes
reports that ``replay`` reproduces; it compares a store with a reference
store, takes compound conditions, refuses a misspelt metric before searching,
and aims lost calls only at calls the scenario sends."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis.errors import NoSuchExample

from simulator.cli import main
from simulator.run.compose import run_scenario
from simulator.scenario.conditions import Expectation, parse_condition
from simulator.scenario.model import ScenarioError, parse_scenario
from simulator.search.hunt import Hunt, calls_sent
from simulator.search.races import load_report, replay
from simulator.search.strategies import fault_schedules
from stores.quantities import parse_duration_us

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
SPLIT = HUNTS / "split-settlement-quiet.toml"
DRIFT = Expectation.parse("conservation_drift_microdollars_total", "< 0")
SHIPPED = "axond_budget.redis_v1"


@pytest.mark.parametrize(("scenario", "options"), [
    ("split-settlement-quiet.toml", {"kinds": ("lose_reply",)}),
    ("claim-without-slot-quiet.toml", {"kinds": ("lose_reply",), "target": "migration"}),
])
def test_hunt_finds_a_variants_race_and_shrinks_it_to_a_few_faults(scenario, options, tmp_path):
    hunt = Hunt(HUNTS / scenario, DRIFT, seed=0, examples=60, time_budget_s=240, **options)
    assert hunt.scenario.faults.schedule == []  # nothing is scheduled: the hunt finds it
    assert all(step.crash_after_commands is None for step in hunt.scenario.migrations)
    found = hunt.search()
    assert found is not None
    assert len(found.schedule) <= 3
    assert found.value < 0
    report_path = tmp_path / "found.toml"
    hunt.write_report(found, report_path)
    report = load_report(report_path)
    assert report == hunt.race_report(found, report_path)  # written and read back, equal
    replayed = replay(report)
    assert replayed.reproduced
    assert replayed.divergence is None
    assert replayed.result.summary["trace_fingerprint"] == report.fingerprint


def test_the_same_hunt_seed_finds_the_same_schedule():
    def schedule() -> list:
        hunt = Hunt(HUNTS / "claim-without-slot-quiet.toml", DRIFT, seed=0, examples=40,
                    time_budget_s=120, kinds=("lose_reply",), target="migration")
        found = hunt.search()
        assert found is not None
        return found.schedule

    assert schedule() == schedule()


@settings(max_examples=50, database=None)
@given(fault_schedules(replicas=4, until="2s", calls=["settle_v1", "HDEL"], migration=True))
def test_drawn_schedules_are_valid_and_in_time_order(schedule):
    """A property test of the shape the strategies' docstring shows."""
    from simulator.scenario.faults import ScheduledFault

    faults = [ScheduledFault.model_validate(item) for item in schedule]
    assert all(0 <= fault.at < 2_000_000 for fault in faults)
    assert [fault.at for fault in faults] == sorted(fault.at for fault in faults)
    assert all(fault.replica is None or 0 <= fault.replica < 4 for fault in faults)
    assert parse_duration_us(schedule[0]["at"]) == faults[0].at


def _on_store(store: str, schedule: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The split-settlement quiet scenario on ``store``, with ``schedule``."""
    data = tomllib.loads(SPLIT.read_text(encoding="utf-8"))
    data["store"] = store
    data["faults"] = {"schedule": copy.deepcopy(schedule or [])}
    return data


def test_a_reference_hunt_finds_where_the_variant_does_worse_than_the_shipped_store(tmp_path):
    phases: list[str] = []
    hunt = Hunt(SPLIT, reference=SHIPPED, seed=0, examples=30, time_budget_s=240,
                kinds=("lose_reply",), max_faults=2,
                progress=lambda phase, run, line: phases.append(phase))
    found = hunt.search()
    assert found is not None and found.schedule
    worse = {item.metric: item for item in found.verdict.worse}
    assert worse["conservation_drift_microdollars_total"].candidate < 0
    # The shipped store alone, under the same schedule, loses nothing.
    alone = run_scenario(parse_scenario(_on_store(SHIPPED, found.schedule))).summary
    assert alone["conservation_drift_microdollars_total"] == 0
    assert worse["conservation_drift_microdollars_total"].reference == 0
    # Phases: one baseline, a search until the first break, then shrinking.
    assert phases[:2] == ["baseline", "search"] and phases[-1] == "shrink"
    assert phases.index("shrink") == len(phases) - phases[::-1].index("search")
    report_path = tmp_path / "worse.toml"
    hunt.write_report(found, report_path)
    report = load_report(report_path)
    assert report == hunt.race_report(found, report_path)
    assert report.reference == SHIPPED and report.invariant is None
    assert "conservation_drift_microdollars_total" in report.story
    replayed = replay(report)
    assert replayed.reproduced and replayed.divergence is None
    assert not replay(report, against_fixed=True).reproduced  # the fixed store is the reference


def test_a_store_is_never_worse_than_itself():
    hunt = Hunt(SPLIT, reference="axond_budget.variants.split_settlement", seed=0, examples=8,
                time_budget_s=120, kinds=("lose_reply",), max_faults=2)
    assert hunt.search() is None
    assert hunt.runs > 1  # the baseline, then the examples


def test_a_reference_of_another_shape_is_refused_before_any_run():
    with pytest.raises(ValueError, match="unknown store 'axond_budget.nope'"):
        Hunt(SPLIT, reference="axond_budget.nope")
    with pytest.raises(ScenarioError, match="with the reference store 'axond_budget.redis_v2': "
                                            "store_settings.namespace_cap"):
        Hunt(SPLIT, reference="axond_budget.redis_v2")
    with pytest.raises(ValueError, match="give an invariant"):
        Hunt(SPLIT)


def test_a_compound_invariant_is_hunted_and_written_whole_in_the_report(tmp_path):
    condition = parse_condition("cap_overshoot_microdollars_total > 0 or "
                                "conservation_drift_microdollars_total < 0 and "
                                "requests_arrived > 0")
    hunt = Hunt(SPLIT, condition, seed=0, examples=30, time_budget_s=240,
                kinds=("lose_reply",), max_faults=2)
    found = hunt.search()
    assert found is not None
    assert found.value["conservation_drift_microdollars_total"] < 0
    report_path = tmp_path / "compound.toml"
    hunt.write_report(found, report_path)
    report = load_report(report_path)
    assert report.invariant == condition
    assert replay(report).reproduced


def test_a_misspelt_metric_is_refused_before_the_search(capsys):
    hunt = Hunt(SPLIT, parse_condition("cap_overshoot_microdollars_total > 0 or "
                                       "conservation_drfit_microdollars_total != 0"))
    with pytest.raises(ValueError, match="no metric 'conservation_drfit_microdollars_total' in "
                                         "the summary; did you mean "
                                         "conservation_drift_microdollars_total.*"
                                         "known metrics: .*cap_overshoot"):
        hunt.search()
    assert hunt.runs <= 1
    assert main(["hunt", str(SPLIT), "--invariant", "holds_leakd > 0"]) == 2
    assert "no metric 'holds_leakd'" in capsys.readouterr().err


@pytest.mark.parametrize(("arguments", "message"), [
    ([], "give --invariant EXPR, --reference KIND, or both"),
    (["--invariant", "drift <"], "--invariant: 'drift <': expected a number"),
    (["--reference", "axond_budget.redis_v2"], "store_settings.namespace_cap_microdollars"),
])
def test_hunt_without_a_usable_question_is_exit_2(arguments, message, capsys):
    assert main(["hunt", str(SPLIT), *arguments]) == 2
    assert message in capsys.readouterr().err


def test_lost_calls_are_aimed_only_at_calls_the_scenario_sends(tmp_path):
    v1 = run_scenario(parse_scenario(_on_store(SHIPPED)))
    targets = calls_sent(v1.trace)
    assert {"reserve_v1", "settle_v1"} <= set(targets.replicas)
    assert not {"reserve_v2", "settle_v2", "HDEL", "INCRBY", "migration_apply"} & set(
        targets.replicas)
    assert targets.migration == ()

    scenario = tmp_path / "v1-quiet.toml"
    scenario.write_text(SPLIT.read_text(encoding="utf-8").replace(
        'store = "axond_budget.variants.split_settlement"', f'store = "{SHIPPED}"'))
    hunt = Hunt(scenario, DRIFT, seed=0, examples=40, kinds=("lose_reply", "lose_request"))
    assert hunt.scenario.store == SHIPPED
    drawn: list[dict[str, Any]] = []

    def never(schedule: list[dict[str, Any]]) -> bool:
        drawn.extend(schedule)
        return False

    with pytest.raises(NoSuchExample):
        find(hunt.strategy(targets), never, settings=settings(max_examples=40, database=None))
    aimed = {fault["call"] for fault in drawn if "call" in fault}
    assert aimed and aimed <= set(targets.replicas)


def test_the_migration_is_aimed_at_the_calls_it_sends():
    hunt = Hunt(HUNTS / "claim-without-slot-quiet.toml", DRIFT)
    targets = calls_sent(hunt.judge.run(hunt.data, []).trace)
    assert "migration_apply" in targets.migration
    assert "migration_apply" not in targets.replicas
    assert "reserve_v2" in targets.replicas and "reserve_v2" not in targets.migration


def test_the_cli_hunts_with_a_condition_and_a_reference_and_replay_judges_both(tmp_path,
                                                                               capsys):
    out = tmp_path / "either.toml"
    assert main(["hunt", str(SPLIT), "--reference", SHIPPED, "--invariant",
                 "cap_overshoot_microdollars_total > 0", "--faults", "lose_reply",
                 "--examples", "30", "--max-faults", "2", "--out", str(out), "--verbose"]) == 0
    printed = capsys.readouterr()
    # --verbose: a line a run, each saying its phase.
    assert "hunt: baseline run 1: " in printed.err and "hunt: search run 2: " in printed.err
    assert "hunt: shrink run " in printed.err
    assert f"(broken when > 0 or worse than {SHIPPED})" in printed.out
    report = load_report(out)
    assert report.invariant == parse_condition("cap_overshoot_microdollars_total > 0")
    assert report.reference == SHIPPED
    assert main(["replay", str(out)]) == 0
    assert "REPRODUCED: " in capsys.readouterr().out


def test_replaying_a_report_whose_condition_names_no_metric_is_exit_2(tmp_path, capsys):
    report = tmp_path / "typo.toml"
    report.write_text(f'title = "typo"\nscenario = "{SPLIT}"\nseed = 1\n[variant]\n'
                      '[invariant]\nbroken_when = "holds_leaked > 0 or conservation_drfit < 0"\n')
    assert main(["replay", str(report)]) == 2
    assert "no metric 'conservation_drfit' in the summary" in capsys.readouterr().err


def test_a_reference_run_of_shipped_kinds_is_made_once_per_process_and_judges_the_same(
        monkeypatch):
    """Every mutant of a campaign is judged against the same reference runs:
    the second hunt over the same scenario, schedules and seed reads them
    back instead of running them again, and finds the same thing."""
    from simulator.search import hunt as hunting

    monkeypatch.setattr(hunting, "REFERENCE_RUNS", type(hunting.REFERENCE_RUNS)())
    reference_runs = []
    real_summary = hunting.Judge.summary  # a reference is judged by its summary alone

    def counted(judge, data, schedule):
        if data.get("store") == SHIPPED:
            reference_runs.append(schedule)
        return real_summary(judge, data, schedule)

    monkeypatch.setattr(hunting.Judge, "summary", counted)

    def hunted():
        return Hunt(SPLIT, reference=SHIPPED, seed=0, examples=4, time_budget_s=240,
                    kinds=("lose_reply",), max_faults=2).search()

    first = hunted()
    made = len(reference_runs)
    assert made > 0
    second = hunted()
    assert len(reference_runs) == made  # every reference run read back
    assert (first is None) == (second is None)
    if first is not None:
        assert first.schedule == second.schedule and first.runs == second.runs
        assert str(first.verdict) == str(second.verdict)


def test_a_schedule_drawn_again_in_a_hunt_is_judged_from_its_first_run(monkeypatch):
    """Hypothesis draws some schedules more than once: each is run once per
    hunt, and judged again from that run, so the hunt tries and counts the
    same schedules and only runs fewer of them."""
    from simulator.search import hunt as hunting

    ran: list[str] = []
    real_summary = hunting.Judge._summary

    def counted(judge, data, schedule):
        ran.append(json.dumps(schedule, sort_keys=True))
        return real_summary(judge, data, schedule)

    monkeypatch.setattr(hunting.Judge, "_summary", counted)
    judged: list[str] = []
    hunt = Hunt(HUNTS / "axond-leases.toml", parse_condition("replicas < 0"), seed=0,
                examples=40, time_budget_s=240,
                progress=lambda phase, run, line: judged.append(phase))
    assert hunt.search() is None
    assert hunt.runs == 41 and judged.count("search") == 40  # every schedule tried
    assert len(ran) == len(set(ran)) < 40  # each one run once: some were drawn twice


@pytest.mark.parametrize("whose", ["the lab's", "Hypothesis's"])
def test_a_shrink_past_its_budget_keeps_the_best_so_far_and_says_so_in_one_line(
        whose, monkeypatch, capsys):
    """Past the shrinking budget, the lab's or (should the lab's ever come
    later) Hypothesis's five minutes, the smallest breaking schedule so far is
    the hunt's, one line says so, and Hypothesis's own plea never shows."""
    import hypothesis.internal.conjecture.engine as engine

    from simulator.search import hunt as hunt_module
    if whose == "the lab's":
        monkeypatch.setattr(hunt_module, "SHRINK_BUDGET_S", 0.0)
    else:
        monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", 0)
    told: list[tuple[str, str]] = []
    hunt = Hunt(SPLIT, reference=SHIPPED, seed=0, examples=30, time_budget_s=240,
                kinds=("lose_reply",), max_faults=2,
                progress=lambda phase, run, line: told.append((phase, line)))
    found = hunt.search()
    assert found is not None and found.schedule
    notes = [line for phase, line in told if phase == hunt_module.NOTE]
    assert len(notes) == 1, notes
    assert notes[0].startswith("shrinking stopped at its budget")
    assert notes[0].endswith(f"kept, {len(found.schedule)} fault(s)")
    printed = capsys.readouterr()
    assert "PLEASE REPORT" not in printed.out + printed.err
    assert "five minutes" not in printed.out + printed.err
    # What was kept breaks, as the run found it.
    alone = run_scenario(parse_scenario(_on_store(
        "axond_budget.variants.split_settlement", found.schedule))).summary
    assert alone["conservation_drift_microdollars_total"] < 0
