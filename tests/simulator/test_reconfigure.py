"""An operator's configuration change (issue 26): a ``reconfigure`` schedule
entry changes some of the store's reloadable settings (a cap, a TTL) and rolls
them out replica by replica; ``hunt --faults reconfigure`` draws it. The
oracles judge each request by its own replica's settings, so a sound store is
never blamed for what the change lets in (``config_change``), and a store that
ignores the change is (``store_logic``, exposed by ``config_change on
reconfigure``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from blame import blamed_on_the_store
from hypothesis import given, settings
from mutants.reconfigure import ReconfigureMutant, catalogue

from simulator.cli import main
from simulator.plugin.contracts import exposed_by_key
from simulator.run.compose import run_scenario
from simulator.scenario.conditions import parse_condition
from simulator.scenario.faults import ScheduledFault
from simulator.scenario.model import ScenarioError, load_scenario
from simulator.scenario.reconfigure import drawn_values
from simulator.search.hunt import Hunt
from simulator.search.races import load_report, replay
from simulator.search.strategies import fault_schedules

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
BUDGET = HUNTS / "reconfigure-budget-quiet.toml"
LEASES = HUNTS / "reconfigure-leases-quiet.toml"
TOLLGATE = HUNTS / "tollgate-reclaim-without-grace-quiet.toml"
AV_STATE = HUNTS / "av-state-add-without-ttl-quiet.toml"
MUTANTS = {mutant.name: mutant for mutant in catalogue()}

LOWERED = {"at": "800ms", "fault": "reconfigure", "every": "100ms",
           "settings": {"subject_cap_microdollars": 2_000, "reservation_ttl": "500ms"}}
"""The subject cap lowered under what the busiest subjects have spent, and the TTL halved."""

BUDGET_STORE_LOGIC = parse_condition(
    "wrongful_admissions_by_store_logic > 0 or cap_overshoot_by_store_logic_microdollars > 0 "
    "or false_denials_by_store_logic > 0 or leaked_hold_microdollar_seconds_by_store_logic > 0 "
    "or conservation_drift_by_store_logic_microdollars != 0")
TOLLGATE_STORE_LOGIC = parse_condition(
    "conservation_violations > 0 or billing_loss_units_by_store_logic > 0 "
    "or double_billed_units > 0 or overspend_units > 0 or settlement_loss_excess_units != 0 "
    "or units_forfeited_in_grace > 0 or fencing_violations > 0 "
    "or units_stranded_by_store_logic > 0 or regrant_shortfall_units > 0 "
    "or demand_shortfall_units > 0")
LEASE_STORE_LOGIC = parse_condition(
    "concurrency_excess_lease_seconds_by_store_logic > 0 or false_denials_by_store_logic > 0 "
    "or leaked_lease_seconds_by_store_logic > 0")


def run(path: Path, schedule: list[dict], **overrides):
    return run_scenario(load_scenario(path, {"faults.schedule": schedule, **overrides}))


def reconfigured(result) -> list[tuple[int, str]]:
    """``(replica, settings)`` of every boot the trace says ran reconfigured settings."""
    columns = result.trace.columns
    return [(replica, detail) for kind, replica, detail
            in zip(columns["kind"], columns["replica"], columns["detail"], strict=True)
            if kind == "replica_reconfigured"]


def test_a_reconfigure_entry_runs_and_replays_to_the_same_trace():
    first, again = run(BUDGET, [LOWERED]), run(BUDGET, [LOWERED])
    quiet = run(BUDGET, [])
    assert first.summary["trace_fingerprint"] == again.summary["trace_fingerprint"]
    assert first.summary["trace_fingerprint"] != quiet.summary["trace_fingerprint"]
    assert first.summary["replica_restarted_count"] == 3


def test_the_trace_shows_which_replicas_ran_which_settings():
    """A change rolled out to replica 1 only: the mixed fleet for good."""
    result = run(BUDGET, [{**LOWERED, "replicas": [1]}])
    assert reconfigured(result) == [
        (1, "reservation_ttl_ms=500,subject_cap_microdollars=2000")]
    columns = result.trace.columns
    started = [detail for kind, detail in zip(columns["kind"], columns["detail"], strict=True)
               if kind == "reconfigure_started"]
    assert started == ["reservation_ttl_ms=500,subject_cap_microdollars=2000"]


@pytest.mark.parametrize("replicas", [[], [0, 2]])
def test_a_cap_lowered_under_what_is_spent_is_the_operator_s_not_the_store_s(replicas):
    summary = run(BUDGET, [{**LOWERED, "replicas": replicas}]).summary
    assert summary["cap_overshoot_microdollars_total"] > 0
    assert summary["cap_overshoot_by_config_change_microdollars"] > 0
    assert blamed_on_the_store(summary) == {}


def test_a_lease_limit_lowered_under_callers_holding_is_the_operator_s():
    summary = run(LEASES, [{"at": "800ms", "fault": "reconfigure", "every": "50ms",
                            "settings": {"max_in_flight": 2, "lease_ttl": "1s"}}]).summary
    assert summary["concurrency_excess_lease_seconds_by_config_change"] > 0
    assert blamed_on_the_store(summary) == {}


def test_a_restart_waits_for_a_release_retried_after_its_request_was_over():
    """Found by a hunt: a reconfigure's restart at 279 ms stopped replica 0
    while it retried request 1's lost release on a fresh connection, after
    the request had left its in-flight window: the retry died with it, and
    the sound store was blamed for the lease left counted. A graceful stop
    waits for what a request's calls left running."""
    change = {"fault": "reconfigure", "every": "50ms", "down_for": "0ms",
              "settings": {"max_in_flight": 3}}
    summary = run(LEASES, [{"at": "0ms", **change},
                           {"at": "0ms", "fault": "lose_request", "replica": 0,
                            "call": "release"},
                           {"at": "279ms", **change}]).summary
    assert summary["leaked_lease_seconds_by_release_lost"] > 0
    assert blamed_on_the_store(summary) == {}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_store_that_ignores_the_change_is_blamed_exposed_by_it(name):
    mutant: ReconfigureMutant = MUTANTS[name]
    unchanged = run(mutant.path, list(mutant.also), store=mutant.kind).summary
    assert blamed_on_the_store(unchanged) == {}, "sound until an operator changes its settings"
    fixed = run(mutant.path, mutant.schedule, store=mutant.derived_from).summary
    assert blamed_on_the_store(fixed) == {}
    broken = run(mutant.path, mutant.schedule, store=mutant.kind).summary
    for metric in mutant.damage:
        part = metric.replace("_microdollars_total", "_by_store_logic_microdollars") \
            if metric.endswith("_microdollars_total") else f"{metric}_by_store_logic"
        assert broken[part] > 0, part
        assert broken[exposed_by_key(metric)] == "config_change on reconfigure", metric


@pytest.mark.parametrize(("changes", "said"), [
    ({"key_prefix": "x"}, r"faults\.schedule\.0\.settings\.key_prefix: expected a setting the "
                          r"operator may reload, one of subject_cap_microdollars, "
                          r"namespace_cap_microdollars, reservation_ttl; got 'key_prefix'"),
    ({"subject_cap_microdollars": -1}, r"faults\.schedule\.0\.settings\.subject_cap_microdollars: "
                                      r"expected an integer from 0 .*, got -1"),
    ({"namespace_cap_microdollars": 5}, r"faults\.schedule\.0\.settings\."
                                        r"namespace_cap_microdollars: the v1 layout"),
])
def test_a_change_the_store_cannot_reload_is_refused_in_one_line(changes, said):
    with pytest.raises(ScenarioError, match=said) as refused:
        load_scenario(BUDGET, {"faults.schedule": [
            {"at": "1s", "fault": "reconfigure", "settings": changes}]})
    assert len(str(refused.value).splitlines()) == 1
    with pytest.raises(ScenarioError, match="needs `settings`"):
        load_scenario(BUDGET, {"faults.schedule": [{"at": "1s", "fault": "reconfigure"}]})


def test_a_store_whose_settings_reload_nothing_refuses_a_change():
    """av_state's limits come with each request, its TTL is the store's own:
    its settings hold nothing to reload."""
    with pytest.raises(ScenarioError, match="reloads no setting"):
        load_scenario(AV_STATE, {"faults.schedule": [{"at": "1s", "fault": "reconfigure",
                                                      "settings": {"key_prefix": "x"}}]})
    with pytest.raises(ValueError, match="--faults reconfigure: the store .* reloads no setting"):
        Hunt(AV_STATE, parse_condition("counters_without_ttl > 0"), kinds=("reconfigure",))


def test_a_change_is_drawn_around_each_reloadable_value_gentlest_first():
    scenario = load_scenario(BUDGET)
    drawn = drawn_values(scenario.kind.settings_model, scenario.store_settings)
    # The v1 store has no namespace cap to change.
    assert drawn == {"subject_cap_microdollars": [6_600, 5_400, 12_000, 3_000, 60_000, 600],
                     "reservation_ttl": ["1100ms", "900ms", "2000ms", "500ms", "10000ms",
                                         "100ms"]}


@settings(max_examples=40, database=None, deadline=None)
@given(fault_schedules(replicas=3, until="2s", kinds=["reconfigure", "crash"],
                       timescales=[100_000, 1_000_000],
                       reloads={"subject_cap_microdollars": [6_600, 3_000],
                                "reservation_ttl": ["500ms"]}))
def test_drawn_reconfigurations_are_valid_schedule_entries(schedule):
    for entry in (ScheduledFault.model_validate(item) for item in schedule):
        if entry.fault == "reconfigure":
            assert len(entry.settings) == 1 and len(entry.replicas) <= 2
    load_scenario(BUDGET, {"faults.schedule": schedule})


@pytest.mark.parametrize(("path", "condition", "overrides"), [
    (BUDGET, BUDGET_STORE_LOGIC, {}),
    (BUDGET, BUDGET_STORE_LOGIC, {"store": "axond_budget.redis_v2",
                                  "store_settings.namespace_cap_microdollars": 15_000}),
    (LEASES, LEASE_STORE_LOGIC, {}),
    (TOLLGATE, TOLLGATE_STORE_LOGIC, {"store": "tollgate.ledger"}),
], ids=["budget_v1", "budget_v2", "leases", "tollgate"])
def test_hunted_reconfigurations_never_blame_a_sound_store(path, condition, overrides):
    hunt = Hunt(path, condition, seed=0, examples=30, time_budget_s=300,
                kinds=("reconfigure", "crash", "lose_reply"), max_faults=3,
                overrides=overrides)
    assert hunt.search() is None
    assert hunt.runs == 31


def test_hunt_draws_a_reconfigure_that_exposes_the_store_and_replays_it(tmp_path, capsys):
    mutant = MUTANTS["cap_pinned_by_first_boot"]
    out = tmp_path / "found.toml"
    code = main(["hunt", str(mutant.path), "--plugin", mutant.kind, "--set",
                 f"store={mutant.kind}", "--faults", "reconfigure",
                 "--invariant", "wrongful_admissions_by_store_logic > 0",
                 "--examples", "30", "--max-faults", "2", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    report = load_report(out)
    assert [entry["fault"] for entry in report.schedule] == ["reconfigure"]
    assert "reconfigure on the fleet" in report.story
    found = replay(report)
    assert found.reproduced
    assert found.result.summary[exposed_by_key("wrongful_admissions")] == (
        "config_change on reconfigure")
