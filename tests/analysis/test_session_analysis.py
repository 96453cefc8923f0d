"""The session-counter notebook's analysis: the cost of lost replies against
reply loss and driver retries, the in-memory twin beside Redis run by run,
the cleanup race over time, their text and their figures, on hand-made
tables whose answers can be checked by hand; then the lab's own sweeps and
its demo."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from simulator.analysis import lab_path, session_figures, sessions  # noqa: E402
from simulator.run.compose import run_scenario  # noqa: E402
from simulator.scenario.model import ScenarioError, load_scenario, read_toml  # noqa: E402
from simulator.sweeps import build_sweep  # noqa: E402

REDIS, TWIN = sessions.REDIS_KIND, sessions.TWIN_KIND
UNMARKED = "av_state.variants.refund_without_marker"
UNGATED = "av_state.variants.refund_not_exists_gated"


def run(store: str = REDIS, loss: float = 0.0, retries: int = 0, seed: int = 1,
        lifetime: str = "uniform(1h, 48h)", hours: float = 24.5, cleanup: str = "0s",
        **metrics: float) -> dict:
    """One run of a session table: its point, its seed, and the metrics given
    (every other metric of the notebook at 0)."""
    every = dict.fromkeys((*sessions.RETRY_METRICS, *sessions.TWIN_METRICS), 0)
    return {"point": f"{store}|{loss}|{retries}|{lifetime}|{cleanup}", sessions.STORE: store,
            sessions.REPLY_LOSS: loss, sessions.DRIVER_RETRIES: retries,
            sessions.LIFETIME: lifetime, sessions.LIFETIME_HOURS: hours,
            sessions.CLEANUP_AFTER: cleanup, sessions.SEED: seed, **every, **metrics}


# ------------------------------------------------------------------ lost replies and retries


def retry_grid() -> pd.DataFrame:
    """Double debits grow with the loss and are the same with 1 or 10 retries
    (the driver's first re-send is what charges twice); the unmarked refund
    mints with retries only; the fixed store mints nothing."""
    rows = []
    for store in (REDIS, UNMARKED):
        for loss in (0.0, 0.05, 0.1):
            for retries in (0, 1, 10):
                for seed, extra in ((1, 0), (2, 2), (3, 4)):
                    debits = round(100 * loss) + (2 * round(100 * loss) if retries else 0)
                    minted = (1000 * round(100 * loss) + 10 * extra
                              if store == UNMARKED and retries else 0)
                    rows.append(run(store, loss, retries, seed, double_debits=debits + extra,
                                    budget_minted_units=minted,
                                    false_refusals_from_double_debits=3 * debits))
    return pd.DataFrame(rows)


def test_retry_bands_give_the_median_spread_and_worst_seed_of_each_point():
    bands = sessions.retry_bands(retry_grid(), sessions.DOUBLE_DEBITS)
    point = bands[(bands[sessions.STORE] == REDIS) & (bands[sessions.DRIVER_RETRIES] == 10)
                  & (bands[sessions.REPLY_LOSS] == 0.1)].iloc[0]
    # Seeds give 30, 32 and 34 double debits (10 + 2 × 10, plus 0, 2, 4).
    assert (point["median"], point["worst"], point["runs"]) == (32, 34, 3)
    assert point["low"] == pytest.approx(30.4) and point["high"] == pytest.approx(33.6)
    assert len(bands) == 2 * 3 * 3


def test_the_findings_name_where_each_cost_was_largest_and_what_retries_added():
    findings = sessions.retry_findings(retry_grid()).set_index([sessions.STORE, "metric"])
    debits = findings.loc[(REDIS, sessions.DOUBLE_DEBITS)]
    # 1 and 10 retries tie at the largest loss: the fewest retries is named.
    assert (debits[sessions.REPLY_LOSS], debits[sessions.DRIVER_RETRIES]) == (0.1, 1)
    assert (debits["median"], debits["worst"]) == (32, 34)
    assert debits["median_without_retries"] == 12        # 10 + the middle seed's 2
    assert debits["runs_with_any"] == 24 and debits["runs"] == 27   # none at 0% loss, seed 1
    minted = findings.loc[(REDIS, sessions.MINTED)]
    assert minted["runs_with_any"] == 0
    unmarked = findings.loc[(UNMARKED, sessions.MINTED)]
    assert (unmarked["median"], unmarked["median_without_retries"]) == (10_020, 0)


def test_the_findings_read_as_one_line_per_store_and_cost():
    lines = sessions.retry_lines(sessions.retry_findings(retry_grid()))
    assert "av_state.redis: budget minted (units): none in any of 27 runs" in lines
    assert ("av_state.redis: double debits: at most a median of 32 (worst seed 34) at 10% "
            "reply loss with 1 driver retries; 12 there without retries; in 24 of 27 runs"
            in lines)
    assert len(lines) == 2 * len(sessions.RETRY_METRICS)


def test_a_table_without_the_metric_is_refused_naming_it():
    with pytest.raises(KeyError, match="budget_minted_units"):
        sessions.retry_findings(retry_grid().drop(columns=[sessions.MINTED]))
    with pytest.raises(ValueError, match="no runs"):
        sessions.retry_findings(retry_grid().iloc[0:0])


# ------------------------------------------------------------------ the in-memory twin


def twin_table() -> pd.DataFrame:
    """Short sessions: the stores agree. Long ones: Redis resets counters under
    idle sessions (which then overshoot); the twin keeps them past the TTL."""
    rows = []
    for seed in (1, 2, 3):
        rows += [run(REDIS, seed=seed, lifetime="uniform(1h, 20h)", hours=10.5),
                 run(TWIN, seed=seed, lifetime="uniform(1h, 20h)", hours=10.5),
                 run(REDIS, seed=seed, lifetime="uniform(24h, 72h)", hours=48.0,
                     counter_resets=10 * seed, budget_overshoot_units=1000 * seed),
                 run(TWIN, seed=seed, lifetime="uniform(24h, 72h)", hours=48.0,
                     counters_kept_past_ttl=8 * seed, counter_hours_kept_past_ttl=20.0 * seed,
                     counters_without_ttl_at_end=seed)]
    rows.append(run(REDIS, seed=4, lifetime="uniform(24h, 72h)", hours=48.0,
                    counter_resets=99))                     # no twin run to pair it with
    return pd.DataFrame(rows)


def test_the_twin_is_compared_with_redis_seed_by_seed_on_the_same_sessions():
    comparison = sessions.twin_comparison(twin_table()).set_index([sessions.LIFETIME,
                                                                     "metric"])
    resets = comparison.loc[("uniform(24h, 72h)", sessions.RESETS)]
    assert (resets["reference_median"], resets["twin_median"]) == (20, 0)
    assert (resets["difference_low"], resets["difference_high"]) == (-30, -10)
    assert resets["seeds"] == 3                             # seed 4 ran on Redis only
    kept = comparison.loc[("uniform(24h, 72h)", sessions.KEPT_PAST_TTL)]
    assert (kept["twin_median"], kept["difference_median"]) == (16, 16)
    short = comparison.loc["uniform(1h, 20h)"]
    assert (short[["reference_median", "twin_median"]] == 0).all().all()
    # Shorter sessions first, the metrics in the notebook's order.
    ordered = sessions.twin_comparison(twin_table())
    assert list(ordered[sessions.LIFETIME].unique()) == ["uniform(1h, 20h)",
                                                         "uniform(24h, 72h)"]
    assert list(ordered["metric"][:len(sessions.TWIN_METRICS)]) == list(sessions.TWIN_METRICS)


def test_the_comparison_reads_as_one_line_per_lifetime_and_metric():
    lines = sessions.twin_lines(sessions.twin_comparison(twin_table()))
    assert ("sessions uniform(24h, 72h): counter resets: av_state.redis 20, av_state.in_memory "
            "0 (median over 3 seeds; the twin's difference -30 to -10)") in lines
    assert ("sessions uniform(1h, 20h): counter resets: av_state.redis 0, av_state.in_memory "
            "0 (median over 3 seeds; the twin's difference +0)") in lines


def test_a_comparison_needs_both_stores_on_shared_points():
    table = twin_table()
    with pytest.raises(ValueError, match="no runs of 'av_state.in_memory'"):
        sessions.twin_comparison(table[table[sessions.STORE] == REDIS])
    apart = table.assign(**{sessions.CLEANUP_AFTER: table[sessions.STORE].map(
        {REDIS: "0s", TWIN: "1h"})})
    with pytest.raises(ValueError, match="share no point and seed"):
        sessions.twin_comparison(apart)


# ------------------------------------------------------------------ the cleanup race


def race_metrics() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metric series of two runs per store, with per-counter rows mixed in:
    the fixed store resurrects a few counters, the ungated refund more, and
    leaves some without a TTL that never expire."""
    table = pd.DataFrame([run(store, seed=seed) for store in (REDIS, UNGATED)
                          for seed in (1, 2)])
    samples = []
    for store, point in zip(table[sessions.STORE], table["point"], strict=True):
        for seed in (1, 2):
            for hour in range(0, 5):
                ungated = store == UNGATED
                samples.append({"point": point, "seed": seed, "time_us": hour * 3_600_000_000,
                                "counter": "*",
                                sessions.RESURRECTED: hour * (3 if ungated else 1) + seed,
                                sessions.WITHOUT_TTL_NOW: (min(hour, 2) * seed
                                                           if ungated else 0)})
                samples.append({"point": point, "seed": seed, "time_us": hour * 3_600_000_000,
                                "counter": "budget:{s1}:tokens", sessions.RESURRECTED: 0,
                                sessions.WITHOUT_TTL_NOW: 0})
    metrics = pd.DataFrame(samples).drop_duplicates(["point", "seed", "time_us", "counter"])
    return metrics, table.drop_duplicates("point")


def test_the_race_series_keeps_the_aggregate_rows_in_hours_with_their_point():
    metrics, table = race_metrics()
    series = sessions.race_series(metrics, table)
    assert set(series[sessions.STORE]) == {REDIS, UNGATED}
    assert len(series) == 2 * 2 * 5                          # stores × seeds × samples
    assert sorted(series[sessions.HOURS].unique()) == [0, 1, 2, 3, 4]
    with pytest.raises(KeyError, match="counters_without_ttl_now"):
        sessions.race_series(metrics.drop(columns=[sessions.WITHOUT_TTL_NOW]), table)


def test_the_race_findings_read_the_last_sample_and_the_peak():
    metrics, table = race_metrics()
    findings = sessions.race_findings(sessions.race_series(metrics, table))
    ungated = findings.set_index(sessions.STORE).loc[UNGATED]
    # At hour 4: 12 + seed, i.e. 13 and 14; the peak without a TTL is 2 × seed.
    assert (ungated["resurrected_median"], ungated["resurrected_worst"]) == (13.5, 14)
    assert (ungated["without_ttl_peak_median"], ungated["without_ttl_peak_worst"]) == (3, 4)
    assert ungated[sessions.HOURS] == 4
    assert ("av_state.redis, cleanup 0s after the end: 5.5 counters resurrected by hour 4 "
            "(worst seed 6); at most 0 live without a TTL (worst seed 0)"
            in sessions.race_lines(findings))


def test_race_bands_follow_each_store_over_time():
    metrics, table = race_metrics()
    bands = sessions.race_bands(sessions.race_series(metrics, table), sessions.RESURRECTED)
    fixed = bands[bands[sessions.STORE] == REDIS]
    assert fixed["median"].tolist() == [1.5, 2.5, 3.5, 4.5, 5.5]


# ------------------------------------------------------------------ figures


def assert_readable(figure: Figure) -> None:
    for ax in figure.axes:
        assert ax.get_xlabel() or ax.get_xticklabels()
        assert ax.get_ylabel()


def labels(ax) -> set[str]:
    return {line.get_label() for line in ax.lines if not line.get_label().startswith("_")}


def test_the_retry_figure_bands_each_retry_count_per_store_and_cost():
    figure = session_figures.plot_retry_damage(retry_grid())
    assert_readable(figure)
    assert len(figure.axes) == 2 * len(sessions.RETRY_METRICS)
    debits = figure.axes[1]                                  # the fixed store's double debits
    assert debits.get_title() == REDIS
    assert labels(debits) == {"no retries", "1 retry", "10 retries (redis-py's default)"}
    assert len(debits.collections) == 3                      # one seed band per retry count
    ten = next(line for line in debits.lines if line.get_label().startswith("10 retries"))
    assert list(ten.get_ydata()) == [2, 17, 32]              # medians at 0%, 5%, 10%


def test_the_twin_figure_draws_both_stores_per_lifetime_with_each_seed():
    table = twin_table()
    figure = session_figures.plot_twin(sessions.twin_comparison(table), table)
    assert_readable(figure)
    assert len(figure.axes) == len(sessions.TWIN_METRICS)
    resets = figure.axes[0]
    heights = [patch.get_height() for patch in resets.patches]
    assert heights == [0, 20, 0, 0]       # Redis per lifetime, then the twin per lifetime
    assert {text.get_text() for text in resets.get_legend().get_texts()} == {REDIS, TWIN}
    dots = sorted(y for line in resets.lines for y in line.get_ydata())
    assert dots == sorted([0] * 9 + [10, 20, 30, 99])


def test_the_race_figure_follows_each_store_and_cleanup_over_hours():
    metrics, table = race_metrics()
    figure = session_figures.plot_race(sessions.race_series(metrics, table))
    assert_readable(figure)
    assert [ax.get_xlabel() for ax in figure.axes] == ["virtual time (hours)"] * 2
    assert labels(figure.axes[0]) == {f"{REDIS}, cleanup 0s after the end",
                                      f"{UNGATED}, cleanup 0s after the end"}


# ------------------------------------------------------------------ the sweeps and the demo


def test_the_lab_sweeps_ask_the_notebook_questions():
    retries = sessions.load_session_sweep("data/sweeps/session-counters-retries.toml")
    assert set(retries.parameters) == {"store", "network.reply_loss", "network.retries"}
    assert {p.parameters["store"] for p in retries.points} == {REDIS, UNMARKED}
    twin = sessions.load_session_sweep("data/sweeps/session-counters-twin.toml")
    quiet = twin.scenario_at(twin.points[0])
    assert quiet.network.reply_loss == 0 and quiet.network.retries.count == 0
    assert {p.parameters["store"] for p in twin.points} == {REDIS, TWIN}
    # Every session ends inside the run, even the longest.
    longest = max(twin.scenario_at(p).workload.sessions.lifetime.params[-1] for p in twin.points)
    assert quiet.drain_us >= longest
    cleanup = sessions.load_session_sweep("data/sweeps/session-counters-cleanup.toml")
    assert {p.parameters["store"] for p in cleanup.points} == {REDIS, UNGATED}
    assert cleanup.scenario_at(cleanup.points[0]).metrics.sample_every_us > 0
    for sweep in (retries, twin, cleanup):
        assert len(sweep.seeds) >= 3


def test_the_notebook_parameters_reach_the_sweep():
    sweep = sessions.load_session_sweep(
        "data/sweeps/session-counters-retries.toml", seeds=2, stores=[REDIS],
        reply_losses=[0.0, 0.1], driver_retries=[0, 10], set_fields={"fleet.replicas": 3})
    assert sweep.seeds == (1, 2)
    assert sorted((p.parameters["network.reply_loss"], p.parameters["network.retries"])
                  for p in sweep.points) == [(0.0, 0), (0.0, 10), (0.1, 0), (0.1, 10)]
    assert sweep.scenario_at(sweep.points[0]).fleet.replicas == 3
    with pytest.raises(TypeError, match="unknown parameter"):
        sessions.load_session_sweep("data/sweeps/session-counters-retries.toml",
                                    lease_ttls=["5s"])


def test_a_session_table_reads_each_point_from_its_scenario():
    sweep = sessions.load_session_sweep(
        "data/sweeps/session-counters-twin.toml", seeds=2,
        lifetimes=["uniform(1h, 20h)", "uniform(24h, 72h)"])
    rows = [{"point": point.point_id, "seed": seed, sessions.DOUBLE_DEBITS: seed,
             "store": "(from the summary)"} for point in sweep.points for seed in (1, 2)]
    rows.append({**rows[0], "point": "gone"})                # a point of an earlier sweep
    table = sessions.session_table(pd.DataFrame(rows), sweep)
    assert len(table) == 2 * 2 * 2
    assert set(table[sessions.STORE]) == {REDIS, TWIN}
    assert set(table[sessions.LIFETIME_HOURS]) == {10.5, 48.0}
    assert set(table[sessions.REPLY_LOSS]) == {0.0} and set(table[sessions.DRIVER_RETRIES]) == {0}
    assert set(table[sessions.CLEANUP_AFTER]) == {"0s"}
    with pytest.raises(KeyError, match="double_debits"):
        sessions.session_table(pd.DataFrame(rows).drop(columns=[sessions.DOUBLE_DEBITS]), sweep)


def test_a_sweep_without_sessions_is_refused_naming_the_field():
    base = read_toml(lab_path("data", "scenarios", "demo.toml"), what="scenario")
    sweep = build_sweep({"name": "no-sessions", "vary": {"network.reply_loss": [0.0]}}, base)
    results = pd.DataFrame([{"point": sweep.points[0].point_id, "seed": 1,
                             sessions.DOUBLE_DEBITS: 0}])
    with pytest.raises(ScenarioError, match="workload.sessions"):
        sessions.session_table(results, sweep)


def test_the_sweep_is_described_with_what_it_varied():
    text = sessions.describe_sweep(
        sessions.load_session_sweep("data/sweeps/session-counters-retries.toml"))
    assert "about 144 sessions opening over the first 12 h" in text
    assert "- reply loss: `0%`, `2%`, `5%`, `10%`." in text
    assert "- session lifetime: `uniform(1h, 48h)` throughout." in text


def test_the_demo_shows_double_debits_resets_and_resurrections_and_mints_nothing():
    summary = run_scenario(load_scenario(lab_path("data", "scenarios", "av-state.toml"))).summary
    assert summary["double_debits"] > 0
    assert summary["false_refusals_from_double_debits"] > 0
    assert summary["counter_resets_by_counter_expired"] > 0
    assert summary["counters_resurrected_by_cleanup_race"] > 0
    assert summary[sessions.MINTED] == 0
    # Some sessions outlive the counters' 24 h TTL, and every one ends in the run.
    assert summary["sessions_closed"] == summary["sessions_opened"] > 100
    for name, value in summary.items():
        if "_by_store_logic" in name:
            assert value == 0, name
