"""The TTL notebook's analysis: cost shares, the recommended TTL range, the
duration tail, the conclusions' text and the figures, on synthetic results."""

from __future__ import annotations

import math
import random
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from simulator.analysis import lab_path, ttl, ttl_figures  # noqa: E402
from simulator.scenario.distributions import parse_distribution  # noqa: E402
from simulator.scenario.empirical import Empirical  # noqa: E402
from simulator.scenario.model import ScenarioError, read_toml  # noqa: E402
from simulator.sweeps import build_sweep, results_dir_for  # noqa: E402

CAP = 100_000
TTLS = [1.0, 2.0, 4.0, 8.0, 16.0]


def run_row(ttl_seconds: float, seed: int, overshoot: int = 0, leak_denials: int = 0,
            **fields: float) -> dict:
    """One synthetic run: 10 subjects with a 100,000 µ$ cap each (1,000,000 in all)
    and 1,000 arrivals, so 10,000 µ$ of overshoot is 1% of the caps and 10
    denials are 1% of arrivals."""
    row = {
        "point": f"p{ttl_seconds:g}", "seed": seed, ttl.TTL_SECONDS: ttl_seconds,
        "keys_total": 10, "requests_arrived": 1000, "requests_admitted": 500,
        "premature_expiries": 0, "premature_expiry_microdollars": 0,
        "cap_overshoot_by_hold_expired_while_running_microdollars": overshoot,
        "leaked_hold_microdollar_seconds": 0.0, "leaked_hold_peak_share_of_cap": 0.0,
        "false_denials": leak_denials, "denials_caused_by_leaked_holds": leak_denials,
    }
    row.update(fields)
    return row


def sweep_frame(overshoot: list[int], leaks: list[int], seeds: int = 1) -> pd.DataFrame:
    """Runs at ``TTLS`` with the given overshoot (µ$) and leak denials per TTL."""
    return pd.DataFrame([run_row(t, seed, o, d) for t, o, d in zip(TTLS, overshoot, leaks,
                                                                 strict=True)
                         for seed in range(1, seeds + 1)])


def shares_of(frame: pd.DataFrame) -> pd.DataFrame:
    return ttl.with_cost_shares(frame, CAP)


# ------------------------------------------------------------------ cost shares


def test_cost_shares_are_percentages_of_the_caps_and_of_arrivals():
    frame = pd.DataFrame([run_row(2.0, 1, overshoot=25_000, leak_denials=30,
                                  premature_expiries=50, premature_expiry_microdollars=250_000,
                                  leaked_hold_microdollar_seconds=3_000_000.0,
                                  leaked_hold_peak_share_of_cap=0.04, false_denials=40)])
    row = shares_of(frame).iloc[0]
    assert row["cap_total_microdollars"] == 1_000_000
    assert row[ttl.OVERSHOOT_COLUMN] == pytest.approx(2.5)
    assert row["premature_expiries_percent_of_admitted"] == pytest.approx(10.0)
    assert row["premature_expiry_money_percent_of_cap"] == pytest.approx(25.0)
    assert row["leaked_hold_dollar_seconds"] == pytest.approx(3.0)
    assert row["leaked_hold_peak_percent_of_cap"] == pytest.approx(4.0)
    assert row[ttl.LEAK_COLUMN] == pytest.approx(3.0)
    assert row["false_denials_percent_of_arrived"] == pytest.approx(4.0)


def test_cost_shares_use_each_rows_own_cap_when_the_sweep_varies_it():
    frame = pd.DataFrame([run_row(2.0, 1, overshoot=10_000),
                          run_row(2.0, 2, overshoot=10_000)])
    frame["store_settings.subject_cap_microdollars"] = [100_000, 200_000]
    shares = ttl.with_cost_shares(frame, subject_cap_microdollars=1)
    assert shares[ttl.OVERSHOOT_COLUMN].tolist() == pytest.approx([1.0, 0.5])


def test_a_run_with_no_arrivals_has_no_denial_share_rather_than_a_division_error():
    frame = pd.DataFrame([run_row(2.0, 1, requests_arrived=0, requests_admitted=0)])
    shares = shares_of(frame)
    assert math.isnan(shares[ttl.LEAK_COLUMN].iloc[0])
    assert math.isnan(shares["premature_expiries_percent_of_admitted"].iloc[0])


def test_cost_shares_name_the_metric_a_result_lacks():
    frame = pd.DataFrame([run_row(2.0, 1)]).drop(columns=["denials_caused_by_leaked_holds"])
    with pytest.raises(KeyError, match="denials_caused_by_leaked_holds"):
        shares_of(frame)


# ------------------------------------------------------------------ the recommendation


def test_the_range_is_where_both_costs_are_within_tolerance_of_their_minimum():
    # Overshoot (% of caps): 6, 3, 0.8, 0.2, 0; leak denials (%): 0, 0, 0.5, 0.9, 5.
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    recommendation = ttl.recommend_ttl_range(shares_of(frame))
    assert recommendation.found
    assert (recommendation.low_seconds, recommendation.high_seconds) == (4.0, 8.0)
    assert recommendation.overshoot_limit == pytest.approx(1.0)
    assert recommendation.leak_limit == pytest.approx(1.0)
    assert recommendation.shortest_ttl_within_overshoot_limit == 4.0
    assert recommendation.longest_ttl_within_leak_limit == 8.0
    assert recommendation.per_ttl["acceptable"].tolist() == [False, False, True, True, False]


def test_limits_are_measured_from_each_costs_own_minimum_not_from_zero():
    # Leak denials never fall below 2%: the limit is 2% + 1 point, not 1%.
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0],
                        leaks=[20, 20, 25, 29, 80])
    recommendation = ttl.recommend_ttl_range(shares_of(frame))
    assert recommendation.leak_limit == pytest.approx(3.0)
    assert (recommendation.low_seconds, recommendation.high_seconds) == (4.0, 8.0)


def test_no_range_when_overshoot_is_tolerable_only_above_the_ttls_leaks_allow():
    frame = sweep_frame(overshoot=[60_000, 40_000, 30_000, 5_000, 0], leaks=[0, 5, 30, 40, 50])
    recommendation = ttl.recommend_ttl_range(shares_of(frame))
    assert not recommendation.found
    assert recommendation.low_seconds is None and recommendation.high_seconds is None
    assert recommendation.shortest_ttl_within_overshoot_limit == 8.0
    assert recommendation.longest_ttl_within_leak_limit == 2.0


def test_wider_tolerances_widen_the_range():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    wide = ttl.recommend_ttl_range(shares_of(frame), ttl.TtlTolerances(
        overshoot_percent_of_cap=3.5, leak_denials_percent_of_arrived=6.0))
    assert (wide.low_seconds, wide.high_seconds) == (2.0, 16.0)


def test_the_longest_run_of_acceptable_ttls_wins_over_a_stray_acceptable_ttl():
    # 1 s is acceptable on its own (a lucky seed), 2 s is not, 4-16 s are.
    frame = sweep_frame(overshoot=[0, 30_000, 0, 0, 0], leaks=[0, 0, 0, 0, 0])
    recommendation = ttl.recommend_ttl_range(shares_of(frame))
    assert (recommendation.low_seconds, recommendation.high_seconds) == (4.0, 16.0)
    assert not recommendation.acceptable_is_contiguous


def test_a_higher_seed_quantile_judges_a_ttl_by_its_bad_seeds():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50],
                        seeds=3)
    # One bad seed at 8 s denies 5% of requests on leaked holds.
    bad = (frame[ttl.TTL_SECONDS] == 8.0) & (frame["seed"] == 3)
    frame.loc[bad, "denials_caused_by_leaked_holds"] = 50
    by_median = ttl.recommend_ttl_range(shares_of(frame))
    by_worst = ttl.recommend_ttl_range(shares_of(frame), ttl.TtlTolerances(seed_quantile=1.0))
    assert by_median.high_seconds == 8.0
    assert by_worst.high_seconds == 4.0


def test_tolerances_refuse_nonsense():
    with pytest.raises(ValueError):
        ttl.TtlTolerances(overshoot_percent_of_cap=-1)
    with pytest.raises(ValueError):
        ttl.TtlTolerances(seed_quantile=1.5)


# ------------------------------------------------------------------ the duration tail


@pytest.mark.parametrize("text", ["pareto(1s, 1.5)", "lognormal(2s, 1.2)", "exponential(3s)",
                                  "uniform(1s, 5s)", "normal(4s, 1s)"])
def test_the_analytic_tail_matches_seeded_samples_of_the_same_distribution(text):
    durations = parse_distribution(text, "duration")
    rng = random.Random(7)
    draws = sorted(durations.sample(rng) / 1e6 for _ in range(20_000))
    for probability in (0.5, 0.9, 0.99):
        quantile = ttl.duration_quantile(durations, probability)
        sampled = draws[int(probability * len(draws))]
        assert sampled == pytest.approx(quantile, rel=0.15)
        share_longer = sum(d > quantile for d in draws) / len(draws)
        assert share_longer == pytest.approx(1 - probability, abs=0.01)


@pytest.mark.parametrize("text", ["pareto(1s, 1.5)", "lognormal(2s, 1.2)", "exponential(3s)",
                                  "uniform(1s, 5s)", "normal(4s, 1s)"])
def test_the_quantile_inverts_the_exceedance(text):
    durations = parse_distribution(text, "duration")
    for probability in (0.1, 0.5, 0.9, 0.999):
        seconds = ttl.duration_quantile(durations, probability)
        assert ttl.duration_exceedance(durations, seconds) == pytest.approx(1 - probability)


def test_a_pareto_tail_has_its_textbook_quantiles():
    durations = parse_distribution("pareto(1s, 1.5)", "duration")
    assert ttl.duration_quantiles(durations) == pytest.approx(
        {"p50": 2 ** (2 / 3), "p90": 10 ** (2 / 3), "p99": 100 ** (2 / 3), "p99.9": 100.0})
    assert ttl.duration_exceedance(durations, 0.5) == 1.0


def test_an_empirical_sample_has_the_quantiles_of_its_values():
    durations = Empirical(tuple(range(1_000_000, 11_000_000, 1_000_000)), "duration", "e")
    assert ttl.duration_quantile(durations, 0.5) == 5.0
    assert ttl.duration_quantile(durations, 0.9) == 9.0
    assert ttl.duration_exceedance(durations, 7.5) == pytest.approx(0.3)


def test_an_empirical_quantile_is_the_smallest_value_with_that_share_at_or_below_it():
    from simulator.scenario.empirical import load_empirical

    durations = load_empirical("data/workloads/durations_ms.csv", "duration", "e")
    values = [v / 1e6 for v in durations.values]
    # data/workloads/README.md: median 2.4 s.
    assert ttl.duration_quantile(durations, 0.5) == pytest.approx(2.4, abs=0.1)
    for probability in (0.5, 0.9, 0.99):
        quantile = ttl.duration_quantile(durations, probability)
        assert sum(v <= quantile for v in values) / len(values) >= probability
        assert sum(v < quantile for v in values) / len(values) < probability


def test_a_ttl_is_placed_in_the_tail_with_its_share_and_percentile():
    durations = parse_distribution("pareto(1s, 1.5)", "duration")
    assert ttl.tail_position(durations, 4.0) == (
        "12% of requests run longer (it is the p88 of request duration)")
    assert ttl.tail_position(durations, 100.0).startswith("0.10% of requests run longer "
                                                          "(it is the p99.90")
    assert ttl.tail_position(durations, 0.5).startswith("every request runs longer")
    constant = parse_distribution("2s", "duration")
    assert ttl.tail_position(constant, 3.0).startswith("no request runs longer")


def test_percentiles_and_durations_are_labelled_as_people_write_them():
    assert ttl.percentile_label(0.999) == "p99.9"
    assert ttl.percentile_label(0.5) == "p50"
    assert ttl.format_seconds(0.5) == "500 ms"
    assert ttl.format_seconds(3.904) == "3.9 s"
    assert ttl.format_seconds(300) == "5 min"


# ------------------------------------------------------------------ the text


def test_the_conclusion_names_the_range_and_where_its_ends_sit_in_the_tail():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    recommendation = ttl.recommend_ttl_range(shares_of(frame))
    text = ttl.describe_recommendation(recommendation,
                                       parse_distribution("pareto(1s, 1.5)", "duration"))
    assert "**Recommended reservation TTL: 4 s to 8 s**" in text
    assert "At 4 s, 12% of requests run longer (it is the p88" in text
    assert "The next tested TTL below, 2 s, overshoots by 3% of the caps." in text
    assert "The next tested TTL above, 16 s, denies 5% of requests on leaked holds." in text


def test_the_conclusion_says_so_when_no_ttl_meets_both_limits():
    frame = sweep_frame(overshoot=[60_000, 40_000, 30_000, 5_000, 0], leaks=[0, 5, 30, 40, 50])
    text = ttl.describe_recommendation(ttl.recommend_ttl_range(shares_of(frame)),
                                       parse_distribution("pareto(1s, 1.5)", "duration"))
    assert "No tested TTL meets both limits" in text
    assert "Recommended" not in text
    assert "TTLs within the overshoot limit: 8 s, 16 s." in text
    assert "TTLs within the leak-denial limit: 1 s, 2 s." in text


def test_a_range_at_the_edge_of_the_sweep_says_it_may_extend_further():
    frame = sweep_frame(overshoot=[0, 0, 0, 0, 0], leaks=[0, 0, 5, 20, 50])
    text = ttl.describe_recommendation(ttl.recommend_ttl_range(shares_of(frame)),
                                       parse_distribution("pareto(1s, 1.5)", "duration"))
    assert "No TTL below 1 s was tested" in text


def test_the_trends_report_the_medians_at_both_ends_of_the_sweep():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    text = ttl.describe_trends(shares_of(frame))
    assert "went from 6% to 0% of the caps" in text
    assert "from 0% to 5%" in text


# ------------------------------------------------------------------ the figures


def shaded_spans(figure: Figure) -> list[Rectangle]:
    return [patch for ax in figure.axes for patch in ax.patches
            if patch.get_label() == "recommended TTL range"
            or (isinstance(patch, Rectangle) and patch.get_facecolor()[:3] == pytest.approx(
                matplotlib.colors.to_rgb("tab:green")))]


def assert_readable(figure: Figure) -> None:
    assert figure._suptitle is not None or all(ax.get_title() for ax in figure.axes)
    for ax in figure.axes:
        assert ax.get_xlabel() and ax.get_ylabel()
        assert "(" in ax.get_ylabel(), "a y label names its unit"
        assert ax.get_legend() is not None


@pytest.mark.parametrize("plot", [ttl_figures.plot_too_short, ttl_figures.plot_too_long,
                                  ttl_figures.plot_trade_off])
def test_each_cost_figure_is_labelled_and_shades_the_recommended_range(plot):
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50],
                        seeds=3)
    shares = shares_of(frame)
    recommendation = ttl.recommend_ttl_range(shares)
    quantiles = {"p50": 1.59, "p90": 4.64}
    figure = plot(shares, recommendation, quantiles)
    assert_readable(figure)
    assert all(ax.get_xscale() == "log" for ax in figure.axes)
    assert len(shaded_spans(figure)) == len(figure.axes)


def test_a_figure_shades_nothing_when_there_is_no_range():
    frame = sweep_frame(overshoot=[60_000, 40_000, 30_000, 5_000, 0], leaks=[0, 5, 30, 40, 50])
    shares = shares_of(frame)
    figure = ttl_figures.plot_trade_off(shares, ttl.recommend_ttl_range(shares), {})
    assert shaded_spans(figure) == []
    assert "no TTL meets both limits" in figure.axes[0].get_title()


def test_the_tail_figure_marks_every_tested_ttl_at_its_share_of_longer_requests():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    recommendation = ttl.recommend_ttl_range(shares_of(frame))
    durations = parse_distribution("pareto(1s, 1.5)", "duration")
    figure = ttl_figures.plot_duration_tail(durations, TTLS, recommendation, {"p90": 4.64})
    assert_readable(figure)
    marks = next(line for line in figure.axes[0].lines if line.get_label() == "tested TTLs")
    assert list(marks.get_xdata()) == TTLS
    assert list(marks.get_ydata()) == pytest.approx([1.0, 2 ** -1.5, 4 ** -1.5, 8 ** -1.5,
                                                     16 ** -1.5])


def metric_rows(point: str, seed: int, leaked: list[int], expired: list[int]) -> list[dict]:
    return [{"point": point, "seed": seed, "scope": "subject", "namespace": "*",
             "subject": "*", "time_us": index * 500_000,
             "leaked_holds_live_microdollars": leak,
             "shortfall_hold_expired_while_running_microdollars": gone}
            for index, (leak, gone) in enumerate(zip(leaked, expired, strict=True))]


def test_the_series_over_time_show_miscounted_money_as_a_share_of_the_caps():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50],
                        seeds=2)
    shares = shares_of(frame)
    recommendation = ttl.recommend_ttl_range(shares)
    examples = ttl.example_ttls(recommendation)
    assert list(examples.values()) == [1.0, 8.0, 16.0]
    rows = []
    for t in TTLS:
        for seed in (1, 2):
            rows += metric_rows(f"p{t:g}", seed, leaked=[0, 10_000 * t], expired=[0, 5_000])
    # A per-key row must not be mixed into the aggregate.
    rows.append({**rows[0], "namespace": "ns0", "leaked_holds_live_microdollars": 10 ** 9})
    series = ttl.aggregate_series(pd.DataFrame(rows), shares, examples)
    assert set(series["seed"]) == {1}
    longest = series[series["example"] == "longest (16 s)"]
    assert longest["leaked_percent_of_cap"].tolist() == pytest.approx([0.0, 16.0])
    assert longest["expired_while_running_percent_of_cap"].tolist() == pytest.approx([0, 0.5])
    assert longest["time_s"].tolist() == [0.0, 0.5]
    figure = ttl_figures.plot_over_time(series)
    assert_readable(figure)
    assert len(figure.axes[0].lines) == 3
    # Two TTLs that miscount alike draw one curve: a style each keeps both in sight.
    assert len({line.get_linestyle() for line in figure.axes[0].lines}) == 3


def test_the_example_ttls_fall_back_to_the_middle_tested_ttl_without_a_range():
    frame = sweep_frame(overshoot=[60_000, 40_000, 30_000, 5_000, 0], leaks=[0, 5, 30, 40, 50])
    examples = ttl.example_ttls(ttl.recommend_ttl_range(shares_of(frame)))
    assert examples == {"shortest (1 s)": 1.0, "middle (4 s)": 4.0, "longest (16 s)": 16.0}


# ------------------------------------------------------------------ the sweep


def test_the_lab_ttl_sweep_varies_only_the_ttl_of_a_redis_budget_store():
    from simulator.sweeps import load_sweep

    sweep = load_sweep(lab_path("data", "sweeps", "ttl-tuning.toml"))
    scenario = ttl.ttl_sweep_scenario(sweep)
    assert scenario.store.startswith("axond_budget.redis_")
    assert ttl.subject_cap_of(scenario) > 0
    assert scenario.faults.crash is not None
    assert len(sweep.points) >= 5 and len(sweep.seeds) >= 3


def test_a_sweep_varying_anything_but_the_ttl_is_refused():
    base = read_toml(lab_path("data", "scenarios", "ttl-tuning.toml"))
    sweep = build_sweep({"name": "mixed", "vary": {
        "store_settings.reservation_ttl": ["1s", "2s"], "network.reply_loss": [0.0, 0.1]}},
        base)
    with pytest.raises(ScenarioError, match="network.reply_loss"):
        ttl.ttl_sweep_scenario(sweep)


def test_results_of_a_different_base_scenario_go_to_a_different_folder(tmp_path: Path):
    base = read_toml(lab_path("data", "scenarios", "ttl-tuning.toml"))
    spec = {"name": "ttl", "vary": {"store_settings.reservation_ttl": ["1s", "2s"]}}
    first = results_dir_for(build_sweep(spec, base), tmp_path)
    again = results_dir_for(build_sweep(spec, base), tmp_path)
    other = results_dir_for(build_sweep({**spec, "set": {"faults.crash.rate": "1/m"}}, base),
                                tmp_path)
    assert first == again
    assert first != other
    assert first.parent == tmp_path


def test_the_notebook_parameters_reach_the_sweep():
    sweep = ttl.load_ttl_sweep("data/sweeps/ttl-tuning.toml", seeds=2,
                               ttl_range=["1s", "30s"],
                               request_duration="empirical(data/workloads/durations_ms.csv)",
                               crash_rate="1/m", set_fields={"fleet.replicas": 7})
    scenario = ttl.ttl_sweep_scenario(sweep)
    assert sweep.seeds == (1, 2)
    assert [point.parameters[ttl.TTL_PARAMETER] for point in sweep.points] == ["1s", "30s"]
    assert isinstance(scenario.workload.duration, Empirical)
    assert scenario.faults.crash.rate == pytest.approx(1 / 60)
    assert scenario.fleet.replicas == 7


def test_without_parameters_the_notebook_runs_the_sweep_file_as_written():
    sweep = ttl.load_ttl_sweep("data/sweeps/ttl-tuning.toml")
    scenario = ttl.ttl_sweep_scenario(sweep)
    written = read_toml(lab_path("data", "scenarios", "ttl-tuning.toml"))
    assert str(scenario.workload.duration) == written["workload"]["duration"]
    from simulator.sweeps import load_sweep

    as_written = load_sweep(lab_path("data", "sweeps", "ttl-tuning.toml"))
    assert sweep.points == as_written.points and sweep.seeds == as_written.seeds


def test_the_ttl_axis_names_every_tested_ttl():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    shares = shares_of(frame)
    figure = ttl_figures.plot_trade_off(shares, ttl.recommend_ttl_range(shares), {})
    ax = figure.axes[0]
    assert list(ax.get_xticks()) == TTLS
    assert [label.get_text() for label in ax.get_xticklabels()] == [
        "1 s", "2 s", "4 s", "8 s", "16 s"]


def test_a_one_ttl_range_is_shaded_with_a_width_and_its_value_written():
    # Only 8 s meets both limits.
    frame = sweep_frame(overshoot=[60_000, 30_000, 20_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    shares = shares_of(frame)
    recommendation = ttl.recommend_ttl_range(shares)
    assert (recommendation.low_seconds, recommendation.high_seconds) == (8.0, 8.0)
    figure = ttl_figures.plot_trade_off(shares, recommendation, {})
    ax = figure.axes[0]
    (span,) = shaded_spans(figure)
    left, right = span.get_x(), span.get_x() + span.get_width()  # in data units (s)
    assert left < 8.0 < right and right / left > 1.2
    assert "recommended: 8 s" in [text.get_text() for text in ax.texts]
    assert "recommended: 8 s" in ax.get_title()


def test_equal_limits_are_one_line_and_cost_ticks_are_round():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    shares = shares_of(frame)
    recommendation = ttl.recommend_ttl_range(shares)
    assert recommendation.overshoot_limit == recommendation.leak_limit
    ax = ttl_figures.plot_trade_off(shares, recommendation, {}).axes[0]
    limits = [line for line in ax.lines if "limit" in line.get_label()]
    assert len(limits) == 1 and "both" in limits[0].get_label()
    assert all(float(f"{tick:.2g}") == tick for tick in ax.get_yticks())
    top = max(shares[column].max() for column in (ttl.OVERSHOOT_COLUMN, ttl.LEAK_COLUMN))
    assert ax.get_ylim()[1] > top  # the highest band is not cut at the top


def test_a_quantile_label_stays_readable_over_the_curves():
    frame = sweep_frame(overshoot=[60_000, 30_000, 8_000, 2_000, 0], leaks=[0, 0, 5, 9, 50])
    shares = shares_of(frame)
    ax = ttl_figures.plot_trade_off(shares, ttl.recommend_ttl_range(shares),
                                    {"p50": 2.0}).axes[0]
    (label,) = [text for text in ax.texts if text.get_text() == "p50 duration"]
    assert label.get_bbox_patch() is not None
    assert label.get_zorder() > max(line.get_zorder() for line in ax.lines)
