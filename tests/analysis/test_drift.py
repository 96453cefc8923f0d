"""The drift notebook's analysis: the drift series of a sweep, drift shares,
the drift-over-time and persistence figures, and the checks that each
mechanism produces its cause (``simulator.analysis.drift``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.analysis.drift import (
    MECHANISMS,
    RESTART_RATE,
    TOTAL_SHARE,
    DriftRuns,
    cause_checks,
    drift_column,
    drift_over_time_figure,
    drift_series,
    drift_sweeps,
    final_drift_column,
    final_drift_table,
    highest_restart_rate,
    persistence_figure,
    plot_drift_over_time,
    run_drift_sweeps,
    series_of,
    share_column,
    with_drift_shares,
)
from simulator.families.axond_budget.causes import SUBJECT_DRIFT_CAUSES as DRIFT_CAUSES


def summary_row(point: str, seed: int, true_spend: int = 1_000_000, **drift: int) -> dict:
    """One run's summary, with only the drift columns these tests need."""
    row = {"point": point, "seed": seed, "true_spend_microdollars_total": true_spend,
           "conservation_drift_microdollars_total": sum(drift.values())}
    for cause in DRIFT_CAUSES:
        row[final_drift_column(cause)] = drift.get(cause, 0)
    return row


def metric_row(point: str, seed: int, time_us: int, scope: str = "subject",
               namespace: str = "*", **drift: int) -> dict:
    row = {"point": point, "seed": seed, "time_us": time_us, "scope": scope,
           "namespace": namespace, "conservation_drift_microdollars": sum(drift.values())}
    for cause in DRIFT_CAUSES:
        row[drift_column(cause)] = drift.get(cause, 0)
    return row


def persistence_runs() -> DriftRuns:
    """Two seeds of each persistence model at two restart rates: `none` loses
    the most, `aof-always` nothing; refused settlements cost every model."""
    lost = {"none": -300_000, "rdb": -120_000, "aof-everysec": -40_000, "aof-always": 0}
    rows = []
    for model, data_loss in lost.items():
        for rate, factor in (("4/m", 1), ("12/m", 3)):
            for seed in (1, 2):
                rows.append({**summary_row(f"{model}-{rate}", seed,
                                           server_data_loss=data_loss * factor * seed,
                                           settlement_lost=-10_000 * factor),
                             "server.persistence": model, RESTART_RATE: rate})
    results = with_drift_shares(pd.DataFrame(rows))
    return DriftRuns(MECHANISMS["server_data_loss"], results, pd.DataFrame())


def test_drift_shares_are_percent_of_the_true_spend():
    frame = with_drift_shares(pd.DataFrame([summary_row("p", 1, true_spend=2_000_000,
                                                        settlement_lost=-50_000,
                                                        duplicate_execution=10_000)]))
    assert frame[share_column("settlement_lost")].iloc[0] == pytest.approx(-2.5)
    assert frame[share_column("duplicate_execution")].iloc[0] == pytest.approx(0.5)
    assert frame[TOTAL_SHARE].iloc[0] == pytest.approx(-2.0)


def test_the_series_keeps_the_aggregate_subject_rows_and_names_each_runs_parameter():
    metrics = pd.DataFrame([
        metric_row("a", 1, 0), metric_row("a", 1, 500_000, settlement_lost=-7),
        metric_row("a", 1, 500_000, scope="namespace", settlement_lost=-99),
        metric_row("a", 1, 500_000, namespace="ns-0", settlement_lost=-99),
        metric_row("b", 1, 500_000, duplicate_execution=4),
    ])
    results = pd.DataFrame([{"point": "a", "seed": 1, "network.request_loss": 0.05},
                            {"point": "b", "seed": 1, "network.request_loss": 0.0}])
    series = drift_series(metrics, results, ["network.request_loss"])
    assert len(series) == 3
    assert list(series["time_s"]) == [0.0, 0.5, 0.5]
    lossy = series[series["network.request_loss"] == 0.05]
    assert list(lossy[drift_column("settlement_lost")]) == [0, -7]


def test_a_series_is_one_seeds_run_or_the_mean_over_seeds_at_each_time():
    series = pd.DataFrame([
        {**metric_row("a", seed, t, settlement_lost=-seed * t), "time_s": t / 1e6,
         "network.request_loss": 0.05, RESTART_RATE: rate}
        for seed in (1, 2) for t in (0, 1_000_000) for rate in ("4/m",)])
    mean = series_of(series, "network.request_loss", 0.05)
    assert list(mean[drift_column("settlement_lost")]) == [0, -1_500_000]
    one = series_of(series, "network.request_loss", 0.05, seed=2)
    assert list(one[drift_column("settlement_lost")]) == [0, -2_000_000]
    with pytest.raises(KeyError, match="12/m"):
        series_of(series, "network.request_loss", 0.05, where={RESTART_RATE: "12/m"})


def test_drift_over_time_stacks_lost_spend_below_zero_and_double_charges_above():
    from matplotlib.figure import Figure

    one = pd.DataFrame([
        {"time_s": t, **metric_row("a", 1, int(t * 1e6), settlement_lost=-2_000_000 * t,
                                   duplicate_execution=500_000 * t)}
        for t in (0.0, 1.0, 2.0)])
    ax = Figure().subplots()
    plot_drift_over_time(ax, one, title="t")
    low, high = ax.get_ylim()
    assert low <= -4.0 and high >= 1.0  # dollars: -$4 lost, +$1 charged twice by t = 2 s
    labels = [label for label in ax.get_legend_handles_labels()[1]]
    assert labels.count("settlement lost") == 1 and "duplicate execution" in labels
    assert "total drift" in labels
    total = next(line for line in ax.get_lines() if line.get_label() == "total drift")
    assert np.allclose(total.get_ydata(), [0.0, -1.5, -3.0])


def test_the_persistence_figure_has_a_point_per_model_and_restart_rate():
    figure = persistence_figure(persistence_runs())
    left, right = figure.axes[:2]
    assert [t.get_text() for t in left.get_xticklabels()] == [
        "none", "rdb", "aof-everysec", "aof-always"]
    assert {t.get_text() for t in left.get_legend().get_texts()} == {
        "restarts: 4/min", "restarts: 12/min"}
    assert left.get_ylabel() == "drift from server data loss (% of true spend)"
    assert {t.get_text() for t in right.get_legend().get_texts()} == {
        "settlement lost", "server data loss"}
    assert "12 restarts/min" in right.get_title()


def test_the_highest_restart_rate_is_read_as_a_rate_not_as_text():
    runs = persistence_runs()
    assert highest_restart_rate(runs) == "12/m"  # not "4/m", which sorts last as text


def test_the_final_drift_table_orders_persistence_models_from_none_to_always():
    table = final_drift_table(persistence_runs())
    assert list(table["server.persistence"].unique()) == [
        "none", "rdb", "aof-everysec", "aof-always"]
    always = table[table["server.persistence"] == "aof-always"]
    assert (always["server_data_loss"] == 0).all()
    assert (table["runs"] == 2).all()
    # Within a model, restart rates by value: 4/m before 12/m (as text, 12/m comes first).
    assert list(table[RESTART_RATE][:2]) == ["4/m", "12/m"]


def test_cause_checks_hold_when_each_mechanism_shows_its_cause_where_expected():
    lost = with_drift_shares(pd.DataFrame([
        {**summary_row("a", 1), "network.request_loss": 0.0},
        {**summary_row("b", 1, settlement_lost=-5_000), "network.request_loss": 0.03}]))
    duplicated = with_drift_shares(pd.DataFrame([
        {**summary_row("a", 1), "network.retries.count": 0},
        {**summary_row("b", 1, duplicate_execution=3_000), "network.retries.count": 3}]))
    runs = {"lost_settlements": DriftRuns(MECHANISMS["lost_settlements"], lost, pd.DataFrame()),
            "duplicate_execution": DriftRuns(MECHANISMS["duplicate_execution"], duplicated,
                                             pd.DataFrame()),
            "server_data_loss": persistence_runs()}
    checks = cause_checks(runs)
    assert len(checks) == 7 and checks["holds"].all()


def test_cause_checks_report_a_mechanism_that_did_not_fire():
    quiet = with_drift_shares(pd.DataFrame([
        {**summary_row("a", 1), "network.retries.count": 0},
        {**summary_row("b", 1), "network.retries.count": 3}]))
    checks = cause_checks({"duplicate_execution": DriftRuns(
        MECHANISMS["duplicate_execution"], quiet, pd.DataFrame())})
    assert list(checks["holds"]) == [True, False]
    assert "positive at network.retries.count = 3" in list(checks["expected"])


def test_vary_must_name_a_known_mechanism():
    with pytest.raises(KeyError, match="no mechanism"):
        drift_sweeps(vary={"lost_replies": {"network.reply_loss": [0.1]}})


def test_in_real_runs_each_mechanism_produces_its_own_cause(tmp_path):
    sweeps = drift_sweeps(
        seeds=1, set_fields={"duration": "2s", "drain": "2s", "fleet.replicas": 10,
                             "workload.arrivals": "poisson(150/s)"},
        vary={"lost_settlements": {"network.request_loss": [0.0, 0.1]},
              "duplicate_execution": {"network.retries.count": [0, 3]},
              "server_data_loss": {"faults.server_restart.rate": ["120/m"],
                                   "server.persistence": ["none", "aof-always"]}})
    runs = run_drift_sweeps(sweeps, tmp_path, workers=1, progress=False)
    checks = cause_checks(runs)
    assert checks["holds"].all(), checks.to_string()
    # Over time, the drift of the lossy run ends where its summary says.
    lost = runs["lost_settlements"]
    last = series_of(lost.series, "network.request_loss", 0.1, seed=1).iloc[-1]
    final = lost.results.set_index("network.request_loss").loc[0.1]
    assert last[drift_column("settlement_lost")] == final[final_drift_column("settlement_lost")]
    figure = drift_over_time_figure(lost, seed=1)
    assert len([ax for ax in figure.axes if ax.get_title()]) == 2
