"""The overshoot notebook's analysis: normalising overshoot, averaging causes
over seeds along one fault axis, the per-store sweeps, the figures and the
stated findings (``simulator.analysis.overshoot``)."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.analysis.overshoot import (
    CAP,
    CRASHES,
    FALSE_DENIALS,
    POLICY,
    REPLY_LOSS,
    WORST_KEY,
    cause_column,
    causes_figure,
    describe_findings,
    findings,
    fleet_wide,
    headline_figure,
    normalise,
    one_factor,
    overshoot_by_cause,
    overshoot_sweeps,
    per_replica,
    per_replica_figure,
    point_facts,
    run_overshoot_sweeps,
    tidy,
)
from simulator.families.axond_budget.causes import CAUSES
from simulator.sweeps import results_dir_for


def run_row(store: str = "axond_budget.redis_v1", policy: str = "deny", crashes: float = 0.0,
            reply_loss: float = 0.0, seed: int = 1, total: int = 0,
            causes: dict[str, int] | None = None, **extra) -> dict:
    """One run's row as ``tidy`` leaves it, with only what these tests need."""
    causes = causes or {}
    row = {
        "point": f"{store}-{policy}-{crashes}-{reply_loss}", "seed": seed, "store": store,
        "cap_enforced_per": "replica" if store.endswith("in_memory") else "fleet",
        CRASHES: crashes, REPLY_LOSS: reply_loss, POLICY: policy, CAP: 100_000,
        "keys_total": 20, "requests_admitted": 500, "requests_arrived": 1000,
        "cap_overshoot_microdollars_total": total,
        "cap_overshoot_max_ratio": total / 100_000, "false_denials": 0,
    }
    for cause in CAUSES:
        row[cause_column(cause)] = causes.get(cause, 0)
    row.update(extra)
    row[WORST_KEY] = 100.0 * row["cap_overshoot_max_ratio"]
    row[FALSE_DENIALS] = 100.0 * row["false_denials"] / row["requests_arrived"]
    return row


def fail_open_grid() -> pd.DataFrame:
    """Two stores x two policies x each fault axis, two seeds: fail-open runs
    overshoot in proportion to reply loss; nothing else overshoots."""
    rows = []
    for store in ("axond_budget.redis_v1", "axond_budget.redis_v2"):
        for policy in ("deny", "allow"):
            for seed in (1, 2):
                for crashes in (0.0, 120.0):
                    rows.append(run_row(store, policy, crashes=crashes, seed=seed))
                for loss in (0.01, 0.1):
                    grows = policy == "allow"
                    fail_open = int(200_000 * loss) * seed if grows else 0
                    underrun = 1_000 * grows
                    rows.append(run_row(
                        store, policy, reply_loss=loss, seed=seed, total=fail_open + underrun,
                        causes={"fail_open_admission": fail_open, "estimate_underrun": underrun},
                        false_denials=int(1000 * loss) if policy == "deny" else 0))
    return pd.DataFrame(rows)


def test_overshoot_as_a_share_of_the_summed_caps_of_the_keys_that_saw_traffic():
    frame = pd.DataFrame([run_row(total=40_000, causes={"settlement_lost": 30_000,
                                                        "estimate_underrun": 10_000})])
    scaled = normalise(frame, "total_cap")
    # 20 keys x $0.10 = 2,000,000 µ$ of caps; 40,000 µ$ over them is 2 %.
    assert scaled["total"].iloc[0] == pytest.approx(2.0)
    assert scaled["settlement_lost"].iloc[0] == pytest.approx(1.5)
    assert scaled["estimate_underrun"].iloc[0] == pytest.approx(0.5)


def test_overshoot_per_thousand_admissions():
    scaled = normalise(pd.DataFrame([run_row(total=40_000)]), "admissions")
    assert scaled["total"].iloc[0] == pytest.approx(80_000)  # 40,000 µ$ over 500 admissions


def test_an_unknown_normalisation_is_refused():
    with pytest.raises(ValueError, match="per"):
        normalise(pd.DataFrame([run_row()]), "replicas")  # type: ignore[arg-type]


def test_one_factor_keeps_the_runs_with_the_other_fault_off():
    frame = pd.DataFrame([run_row(crashes=0, reply_loss=0), run_row(crashes=120, reply_loss=0),
                          run_row(crashes=120, reply_loss=0.1), run_row(crashes=0, reply_loss=0.1)])
    assert sorted(one_factor(frame, CRASHES)[CRASHES]) == [0, 120]
    assert sorted(one_factor(frame, REPLY_LOSS)[REPLY_LOSS]) == [0, 0.1]
    with pytest.raises(KeyError):
        one_factor(frame, "faults.pause.rate")


def test_causes_are_averaged_over_seeds_and_causes_never_seen_are_dropped():
    table = overshoot_by_cause(fail_open_grid(), REPLY_LOSS)
    row = table[(table["store"] == "axond_budget.redis_v1") & (table[POLICY] == "allow")
                & (table[REPLY_LOSS] == 0.1)].iloc[0]
    # seeds 1 and 2: 20,000 and 40,000 µ$ of 2,000,000 µ$ of caps -> 1 % and 2 %
    assert row["fail_open_admission"] == pytest.approx(1.5)
    assert row["runs"] == 2
    assert "settlement_lost" not in table.columns
    assert [c for c in CAUSES if c in table.columns] == ["estimate_underrun",
                                                         "fail_open_admission"]


def test_findings_say_where_overshoot_grows_and_why():
    table = findings(fail_open_grid())
    sentences = describe_findings(table)
    allow = [s for s in sentences if s.startswith("Redis v1, fail open") and "reply-loss" in s]
    deny = [s for s in sentences if s.startswith("Redis v1, fail closed") and "reply-loss" in s]
    assert "grows" in allow[0] and "fail open admission" in allow[0]
    assert "stays flat" in deny[0] and "false denials 0% → 10% of arrivals" in deny[0]
    crash = [s for s in sentences if "crash rate" in s]
    assert crash and all("stays flat" in s for s in crash)


def test_findings_list_the_fleet_wide_stores_before_the_per_replica_ones():
    frame = pd.concat([pd.DataFrame([
        run_row("axond_budget.in_memory", policy=None, crashes=c, total=4_000_000,
                causes={"per_replica_ledger": 4_000_000}) for c in (0.0, 120.0)]),
        fail_open_grid()])
    table = findings(frame)
    assert list(table["cap_enforced_per"]).index("replica") == len(table) - 1
    (memory,) = [s for s in describe_findings(table) if s.startswith("in-memory")]
    assert memory.startswith("in-memory (per replica), replica crash rate")  # no policy
    assert "mostly per replica ledger" in memory


def test_the_in_memory_store_is_never_mixed_with_the_fleet_wide_ones():
    frame = pd.concat([fail_open_grid(), pd.DataFrame([
        run_row("axond_budget.in_memory", crashes=c, total=4_000_000,
                causes={"per_replica_ledger": 4_000_000}) for c in (0.0, 120.0)])])
    assert set(fleet_wide(frame)["store"]) == {"axond_budget.redis_v1", "axond_budget.redis_v2"}
    assert set(per_replica(frame)["store"]) == {"axond_budget.in_memory"}
    causes = causes_figure(frame)
    titles = [ax.get_title() for ax in causes.axes if ax.get_title()]
    assert titles and not any("in-memory" in title for title in titles)
    (panel,) = per_replica_figure(frame).axes
    assert "per replica" in panel.get_title()
    with pytest.raises(ValueError, match="per-replica"):
        per_replica_figure(fail_open_grid())


def test_the_causes_figure_has_a_panel_per_store_axis_and_policy_on_one_scale():
    figure = causes_figure(fail_open_grid())
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert len(panels) == 2 * 2 * 2  # stores x fault axes x policies
    assert len({ax.get_ylim() for ax in panels}) == 1
    assert panels[0].get_ylabel() == "cap overshoot (% of the summed caps)"
    assert {text.get_text() for text in figure.legends[0].get_texts()} == {
        "estimate underrun", "fail open admission"}
    # A panel without overshoot says so, rather than looking like a missing one.
    quiet = [ax for ax in panels if "fail closed" in ax.get_title()]
    assert quiet and all("no overshoot at any rate tried" in [t.get_text() for t in ax.texts]
                         for ax in quiet)


def test_a_panel_whose_bars_are_too_small_to_see_says_how_tall_they_are():
    frame = fail_open_grid()
    closed = frame[POLICY] == "deny"
    frame.loc[closed, "cap_overshoot_microdollars_total"] = 20  # 0.001 % of the caps
    frame.loc[closed, cause_column("estimate_underrun")] = 20
    figure = causes_figure(frame)
    notes = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert "at most 0.001% of the caps:\ntoo small to see on this scale" in notes


def test_the_headline_draws_a_line_per_store_and_policy_against_each_fault_axis():
    figure = headline_figure(fail_open_grid())
    crash_axis, loss_axis = figure.axes
    assert crash_axis.get_xlabel().startswith("replica crash rate")
    assert loss_axis.get_xlabel().startswith("reply-loss rate")
    labels = [line.get_label() for line in crash_axis.get_lines()]
    assert len(labels) == 4 and "Redis v2, fail open (allow)" in labels
    assert crash_axis.get_ylim()[0] == 0


def test_point_facts_read_every_fault_from_the_scenario_whether_varied_or_not():
    sweeps = overshoot_sweeps(["axond_budget.redis_v1", "axond_budget.in_memory"], seeds=1,
                              vary={"faults.crash.rate": ["0/h", "36/h"],
                                    "network.reply_loss": [0.05]})
    crashes = point_facts(sweeps["overshoot-vs-faults-crashes-redis-v1"])
    assert sorted(crashes[CRASHES].unique()) == [0.0, pytest.approx(36.0)]
    assert set(crashes[REPLY_LOSS]) == {0.0}  # not varied here: read from the scenario
    assert set(crashes[POLICY]) == {"deny", "allow"}
    assert set(crashes[CAP]) == {100_000}
    losses = point_facts(sweeps["overshoot-vs-faults-reply-loss-redis-v1"])
    assert set(losses[REPLY_LOSS]) == {0.05} and set(losses[CRASHES]) == {0.0}
    # Each sweep takes only the values of what it varies: no axis becomes a grid.
    assert sweeps["overshoot-vs-faults-reply-loss-redis-v1"].parameters == (
        "network.reply_loss", "store_settings.on_unavailable")
    memory = sweeps["overshoot-vs-faults-crashes-in-memory"]
    assert memory.parameters == ("faults.crash.rate",)
    # Per-replica ledgers have no server to be cut off from: no unavailable policy.
    assert point_facts(memory)[POLICY].isna().all()


def test_a_changed_base_gets_its_own_results_directory(tmp_path):
    name = "overshoot-vs-faults-crashes-redis-v1"
    plain = overshoot_sweeps(["axond_budget.redis_v1"])[name]
    short = overshoot_sweeps(["axond_budget.redis_v1"], set_fields={"duration": "3s"})[name]
    assert results_dir_for(plain, tmp_path) != results_dir_for(short, tmp_path)
    assert results_dir_for(plain, tmp_path).name.startswith(f"{name}-")


def test_an_unknown_store_is_refused():
    with pytest.raises(KeyError, match="no overshoot sweep"):
        overshoot_sweeps(["axond_budget.none"])


def test_tidy_joins_the_facts_and_puts_overshoot_and_denials_on_shares():
    results = pd.DataFrame([{"point": "p", "seed": 1, "cap_overshoot_max_ratio": 0.25,
                             "false_denials": 30, "requests_arrived": 600}])
    facts = pd.DataFrame([{"point": "p", CRASHES: 40.0, REPLY_LOSS: 0.0, POLICY: "deny",
                           CAP: 100_000}])
    frame = tidy(results, facts)
    assert frame[WORST_KEY].iloc[0] == pytest.approx(25.0)
    assert frame[FALSE_DENIALS].iloc[0] == pytest.approx(5.0)
    assert frame[CRASHES].iloc[0] == 40.0


def test_in_a_real_run_lost_replies_overshoot_the_cap_only_when_the_store_fails_open(tmp_path):
    sweeps = overshoot_sweeps(
        ["axond_budget.redis_v1"], seeds=1,
        set_fields={"duration": "2s", "drain": "2s", "fleet.replicas": 10,
                    "workload.arrivals": "poisson(100/s)",
                    "store_settings.subject_cap_microdollars": 20_000},
        vary={"faults.crash.rate": ["0/h"], "network.reply_loss": [0.0, 0.2]})
    frame = run_overshoot_sweeps(sweeps, tmp_path, workers=1, progress=False)
    # The fault-free run is in both sweeps; it is kept once per policy.
    assert len(frame) == 4
    lossy = frame[frame[REPLY_LOSS] == 0.2].set_index(POLICY)
    assert lossy.loc["allow", cause_column("fail_open_admission")] > 0
    assert lossy.loc["deny", "cap_overshoot_microdollars_total"] == 0
    assert lossy.loc["deny", "false_denials"] > 0
