"""The cost of exactness: planning the runs, per-admission figures, fits,
figures and conclusions (synthetic frames), and a few tiny real runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from simulator.analysis import exactness
from simulator.analysis.exactness import (
    BACKEND_US,
    COMMANDS,
    HOLDS,
    SCRIPTS,
    SERVER_US,
    STORE_ONLY_US,
    VARIED,
    Task,
    bands_against_holds,
    choose_backend,
    counts_conclusion,
    denied_runs,
    hash_reads_note,
    holds_in_flight,
    linear_fits,
    measure,
    per_admission,
    plan_tasks,
    plot_counts,
    plot_times,
    point_table,
    saturating_rate,
    saturation_table,
    scenario_data,
    seed_list,
    subjects_of,
    time_columns,
    times_conclusion,
)
from simulator.scenario.model import ScenarioError

V1, V2 = "axond_budget.redis_v1", "axond_budget.redis_v2"
TINY = {"duration": "300ms", "drain": "100ms", "fleet.replicas": 3,
        "workload.arrivals": "poisson(100/s)", "metrics.sample_every": "50ms"}


# ------------------------------------------------------------------ planning


def test_auto_picks_real_redis_only_when_the_binary_is_installed(monkeypatch):
    monkeypatch.setattr(exactness, "redis_binary", lambda: "/usr/bin/redis-server")
    assert choose_backend("auto") == "redis"
    assert choose_backend("redis") == "redis"
    assert choose_backend("fakeredis") == "fakeredis"
    monkeypatch.setattr(exactness, "redis_binary", lambda: None)
    assert choose_backend("auto") == "fakeredis"
    assert "no `redis-server` is installed" in exactness.backend_description("fakeredis",
                                                                             "auto")
    with pytest.raises(ValueError, match="no redis-server is installed"):
        choose_backend("redis")
    with pytest.raises(ValueError, match="expected one of auto, redis, fakeredis"):
        choose_backend("redis://127.0.0.1:6379/0")


def test_seeds_are_a_count_or_a_list_of_distinct_seeds():
    assert seed_list(3) == [1, 2, 3]
    assert seed_list([7, 9]) == [7, 9]
    for bad in (0, [], [1, 1]):
        with pytest.raises(ValueError):
            seed_list(bad)


def test_a_namespace_capped_store_gets_a_cap_no_run_reaches_and_the_base_is_untouched():
    base = {"name": "b", "store": V1, "store_settings": {"subject_cap_microdollars": 10},
            "workload": {"keys": {"subjects": 4}}}
    v2 = scenario_data(base, V2, "1s", {"fleet.replicas": 7})
    assert v2["store"] == V2
    assert v2["store_settings"]["namespace_cap_microdollars"] == 40
    assert v2["workload"]["duration"] == "1s"
    assert v2["fleet"]["replicas"] == 7
    v1 = scenario_data(base, V1, "10ms")
    assert "namespace_cap_microdollars" not in v1["store_settings"]
    assert base == {"name": "b", "store": V1, "store_settings": {"subject_cap_microdollars": 10},
                    "workload": {"keys": {"subjects": 4}}}


def test_every_store_duration_and_seed_is_planned_and_a_bad_one_fails_before_any_run():
    tasks = plan_tasks([V1, V2], ["10ms", "1s"], 2, TINY)
    assert [(t.store, t.duration, t.seed) for t in tasks][:3] == [
        (V1, "10ms", 1), (V1, "10ms", 2), (V1, "1s", 1)]
    assert len(tasks) == 8
    assert tasks[-1].duration_seconds == 1.0
    assert subjects_of(tasks) == 4  # the base scenario's
    with pytest.raises(ScenarioError):
        plan_tasks([V1], ["soon"], 1)


# ------------------------------------------------------------------ per admission


def runs_frame() -> pd.DataFrame:
    return pd.DataFrame([
        {"store": V1, VARIED: "10ms", "duration_seconds": 0.01, "seed": 1,
         "arrival_window_us": 1_000, "requests_arrived": 100, "requests_admitted": 100,
         "scripts_executed": 204, "store_commands_executed": 600, "backend_seconds": 0.05,
         "server_script_seconds": None, "store_scripts_alone_seconds": 0.002},
        {"store": V2, VARIED: "10ms", "duration_seconds": 0.01, "seed": 1,
         "arrival_window_us": 1_000, "requests_arrived": 50, "requests_admitted": 49,
         "scripts_executed": 104, "store_commands_executed": 600, "backend_seconds": 0.1,
         "server_script_seconds": 0.01, "store_scripts_alone_seconds": 0.004},
    ])


def metrics_frame() -> pd.DataFrame:
    rows = []
    for store, holds in ((V1, [0, 4, 8, 1000]), (V2, [2, 2, 2, 1000])):
        for time_us, live in zip((0, 400, 800, 1_000), holds, strict=True):
            key = {"store": store, VARIED: "10ms", "seed": 1, "time_us": time_us}
            rows.append({**key, "namespace": "*", "scope": "subject", "holds_live": live})
            # Other scopes and per-key rows must not count.
            rows.append({**key, "namespace": "*", "scope": "namespace", "holds_live": 99})
            rows.append({**key, "namespace": "ns-0", "scope": "subject", "holds_live": 99})
    return pd.DataFrame(rows)


def test_holds_in_flight_average_the_namespace_subject_samples_inside_the_arrival_window():
    holds = holds_in_flight(metrics_frame(), runs_frame()).set_index("store")[HOLDS]
    assert holds[V1] == pytest.approx(4.0)  # (0 + 4 + 8) / 3: the sample at 1,000 us is out
    assert holds[V2] == pytest.approx(2.0)


def test_per_admission_figures_divide_by_the_requests_that_arrived():
    frame = per_admission(runs_frame(), metrics_frame()).set_index("store")
    assert frame.loc[V1, COMMANDS] == 6.0 and frame.loc[V1, SCRIPTS] == 2.04
    assert frame.loc[V1, BACKEND_US] == pytest.approx(500.0)
    assert math.isnan(frame.loc[V1, SERVER_US])
    assert frame.loc[V2, SERVER_US] == pytest.approx(200.0)
    assert frame.loc[V2, STORE_ONLY_US] == pytest.approx(80.0)
    assert frame.loc[V1, HOLDS] == pytest.approx(4.0)


def test_a_run_that_denied_anything_is_singled_out():
    denied = denied_runs(runs_frame())
    assert list(denied["store"]) == [V2]


# ------------------------------------------------------------------ fits


def linear_frame(noise: float = 0.0) -> pd.DataFrame:
    """Two stores, three durations, two seeds: v1 costs 10 + 1 us per hold,
    v2 costs 10 + 5 us per hold; holds differ a little between seeds."""
    rows = []
    for store, slope in ((V1, 1.0), (V2, 5.0)):
        for seconds, holds in ((0.01, 2.0), (0.1, 20.0), (1.0, 200.0)):
            for seed, wobble in ((1, -1.0), (2, 1.0)):
                x = holds + wobble
                time_us = 10 + slope * x + noise * wobble
                rows.append({"store": store, VARIED: f"{seconds}s", "duration_seconds": seconds,
                             "seed": seed, HOLDS: x, COMMANDS: 6.0 if store == V1 else 12.0,
                             SCRIPTS: 2.0 + 0.01 * seed, BACKEND_US: 3 * time_us,
                             SERVER_US: np.nan, STORE_ONLY_US: time_us})
    return pd.DataFrame(rows)


def test_a_linear_cost_is_fitted_exactly_per_store():
    fits = linear_fits(linear_frame(), STORE_ONLY_US).set_index("store")
    assert fits.loc[V1, "slope"] == pytest.approx(1.0)
    assert fits.loc[V2, "slope"] == pytest.approx(5.0)
    assert fits.loc[V1, "intercept"] == pytest.approx(10.0)
    assert fits.loc[V2, "r2"] == pytest.approx(1.0)
    assert fits.loc[V1, "runs"] == 6
    assert linear_fits(linear_frame(), SERVER_US).empty  # no values: no fit


def test_the_saturating_rate_keeps_the_server_exactly_busy():
    rate = saturating_rate(20.0, 2.0, 1.0)
    assert rate * (20.0 + 2.0 * rate * 1.0) == pytest.approx(1e6)
    assert saturating_rate(20.0, 0.0, 1.0) == pytest.approx(50_000)


def test_bands_sit_at_the_median_holds_of_each_points_seeds():
    bands = bands_against_holds(linear_frame(), STORE_ONLY_US)
    v2 = bands[bands["store"] == V2]
    assert list(v2[HOLDS]) == [2.0, 20.0, 200.0]
    assert list(v2["median"]) == pytest.approx([20.0, 110.0, 1010.0])
    assert (v2["low"] < v2["median"]).all() and (v2["median"] < v2["high"]).all()
    assert list(v2["runs"]) == [2, 2, 2]


# ------------------------------------------------------------------ figures and words


def test_the_count_figure_has_a_titled_labelled_panel_per_count_with_a_line_per_store():
    figure = plot_counts(linear_frame())
    # A flat line keeps headroom above it.
    assert figure.axes[1].get_ylim()[1] > 2.02 * 1.1
    assert figure._suptitle.get_text()
    for ax, y in zip(figure.axes, (COMMANDS, SCRIPTS), strict=True):
        assert ax.get_title() and ax.get_ylabel() == exactness.LABELS[y]
        assert ax.get_xlabel() == exactness.LABELS[HOLDS]
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
        assert any("redis_v1" in label for label in labels)
        assert any("redis_v2" in label for label in labels)


def test_the_time_figure_has_a_panel_per_measure_the_runs_have_with_fits():
    frame = linear_frame()
    assert time_columns(frame) == [BACKEND_US, STORE_ONLY_US]
    figure = plot_times(frame)
    assert [ax.get_ylabel() for ax in figure.axes] == [exactness.LABELS[BACKEND_US],
                                                       exactness.LABELS[STORE_ONLY_US]]
    labels = [text.get_text() for text in figure.axes[1].get_legend().get_texts()]
    assert "redis_v2 fit: 10 + 5.00·holds" in labels
    frame[SERVER_US] = frame[STORE_ONLY_US] * 2
    assert len(plot_times(frame).axes) == 3


def test_the_count_conclusion_tells_flat_from_varying():
    text = counts_conclusion(linear_frame())
    assert "`redis_v1`, holds in flight 1 to 201" in text
    assert "store commands per admission 6.00 to 6.00, flat (within 5%)" in text
    varying = linear_frame()
    varying.loc[varying["store"] == V1, COMMANDS] = [6, 6, 7, 7, 9, 9]
    assert "varying by 50%" in counts_conclusion(varying)


def test_the_time_conclusion_gives_each_fit_and_how_much_steeper_one_store_is():
    text = times_conclusion(linear_frame())
    assert "`redis_v2`: 10 µs + 5.00 µs per hold in flight (R² = 1.00, 6 runs)" in text
    assert "each hold in flight costs `redis_v2` 5.0x what it costs `redis_v1`" in text
    assert "server script time" not in text  # no values, no paragraph
    alike = linear_frame()
    alike[STORE_ONLY_US] = 10 + 2.0 * alike[HOLDS] * np.where(alike["store"] == V2, 1.05, 1.0)
    assert "every store pays about the same per hold in flight (slopes within 10%)" in (
        times_conclusion(alike))


def test_the_hash_reads_predict_the_ratio_of_per_hold_costs():
    assert "5x as many holds" in hash_reads_note(4)
    assert "about N/4 + N" in hash_reads_note(4)
    assert "about N holds" in hash_reads_note(1) and "2x as many" in hash_reads_note(1)


def test_the_saturation_table_uses_the_fit_of_the_stores_scripts_alone():
    table = saturation_table(linear_frame(), [1.0])
    v2 = table[table["store"] == "redis_v2"].iloc[0]
    assert v2["saturating admissions/s"] == round(saturating_rate(10.0, 5.0, 1.0))
    assert v2["holds in flight then"] == v2["saturating admissions/s"]


def test_the_point_table_has_the_seed_medians_per_store_and_duration():
    table = point_table(linear_frame())
    assert list(table["store"]) == ["redis_v1"] * 3 + ["redis_v2"] * 3
    assert list(table[HOLDS]) == [2.0, 20.0, 200.0] * 2
    assert list(table["runs"]) == [2] * 6
    assert SERVER_US not in table  # no values


# ------------------------------------------------------------------ real runs


def tiny_task(store: str) -> Task:
    (task,) = plan_tasks([store], ["100ms"], 1, TINY)
    return task


def test_a_fakeredis_run_counts_its_work_and_times_the_store_alone():
    row, metrics = measure(tiny_task(V2), "fakeredis")
    assert row["requests_admitted"] == row["requests_arrived"] > 0
    # A v2 reserve and settle run 12 commands at most: the count is per command, not per hold.
    assert row["store_commands_executed"] <= 12 * row["requests_arrived"] + 50
    assert row["server_script_seconds"] is None
    assert row["store_scripts_alone_seconds"] > 0
    assert {sample["namespace"] for sample in metrics} == {"*"}
    assert max(sample["holds_live"] for sample in metrics if sample["scope"] == "subject") > 0


@pytest.mark.redis
def test_on_real_redis_the_counts_match_fakeredis_and_the_server_times_are_kept(redis_server):
    real, _ = measure(tiny_task(V1), "redis")
    fake, _ = measure(tiny_task(V1), "fakeredis")
    for name in ("requests_arrived", "requests_admitted", "scripts_executed",
                 "store_commands_executed"):
        assert real[name] == fake[name], name
    assert real["server_script_seconds"] is not None and real["server_script_seconds"] > 0
    assert real["store_scripts_alone_seconds"] > 0
