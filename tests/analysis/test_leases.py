"""The lease-sizing notebook's analysis: Erlang-B, the standard errors of a
denial share, seed bands, the recommended (limit, TTL) region, its text and
its figures, on hand-made tables whose answers can be checked by hand."""

from __future__ import annotations

import math

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from simulator.analysis import lab_path, lease_figures, leases  # noqa: E402
from simulator.run.compose import run_scenario  # noqa: E402
from simulator.scenario.model import (  # noqa: E402
    ScenarioError,
    load_scenario,
    parse_scenario,
    read_toml,
)
from simulator.sweeps import load_sweep  # noqa: E402


def run(limit: int, ttl: float, seed: int = 1, offered: float = 15.0, denial: float = 0.0,
        leaked: float = 0.0, excess: float = 0.0, **fields: float) -> dict:
    """One run of a planner's table."""
    return {leases.OFFERED: offered, leases.LIMIT: limit, leases.TTL: ttl, leases.SEED: seed,
            leases.DENIAL_SHARE: denial, leases.LEAKED: leaked, leases.EXCESS: excess, **fields}


TARGETS = leases.RegionTargets(denial_share=0.05, leaked_lease_seconds=10.0,
                               concurrency_excess_lease_seconds=0.0)


# ------------------------------------------------------------------ Erlang-B


def test_erlang_b_has_its_textbook_value_for_20_slots_under_15_erlangs():
    assert leases.erlang_b(20, 15.0) == pytest.approx(0.0456, abs=5e-5)


@pytest.mark.parametrize(("servers", "offered", "expected"), [
    (0, 3.0, 1.0),            # no slot: everything is refused
    (1, 1.0, 0.5),            # A / (1 + A)
    (2, 1.0, 0.2),            # (1/2) / (1 + 1 + 1/2)
    (3, 2.0, 4 / 19),         # (8/6) / (1 + 2 + 2 + 8/6)
    (5, 0.0, 0.0),            # no load: nothing is refused
])
def test_erlang_b_matches_hand_computed_values(servers, offered, expected):
    assert leases.erlang_b(servers, offered) == pytest.approx(expected)


@pytest.mark.parametrize(("servers", "offered"), [(7, 3.5), (20, 15.0), (40, 50.0)])
def test_the_recursion_agrees_with_the_closed_form(servers, offered):
    terms = [offered ** k / math.factorial(k) for k in range(servers + 1)]
    assert leases.erlang_b(servers, offered) == pytest.approx(terms[-1] / sum(terms))


def test_erlang_b_stays_finite_for_thousands_of_slots():
    # The closed form would overflow a float here (4900^5000).
    blocking = leases.erlang_b(5000, 4900.0)
    assert 0 < blocking < leases.erlang_b(4950, 4900.0) < 1


def test_erlang_b_falls_as_slots_are_added_and_rises_with_the_load():
    by_slots = [leases.erlang_b(c, 15.0) for c in range(0, 40)]
    assert all(a > b for a, b in zip(by_slots, by_slots[1:], strict=False))
    by_load = [leases.erlang_b(20, a) for a in (5.0, 10.0, 15.0, 20.0)]
    assert by_load == sorted(by_load)


def test_the_fewest_slots_for_a_target_are_where_erlang_b_first_meets_it():
    assert leases.erlang_b_servers(15.0, 0.05) == 20      # B(19) = 0.0637, B(20) = 0.0456
    assert leases.erlang_b_servers(15.0, 0.0636) == 20    # just under B(19)
    assert leases.erlang_b_servers(15.0, 0.0637) == 19    # just over it
    assert leases.erlang_b_servers(1.0, 0.5) == 1
    assert leases.erlang_b_servers(0.0, 0.01) == 1


@pytest.mark.parametrize("call", [
    lambda: leases.erlang_b(-1, 1.0), lambda: leases.erlang_b(2, -1.0),
    lambda: leases.erlang_b(2, math.inf), lambda: leases.erlang_b(2.5, 1.0),  # type: ignore[arg-type]
    lambda: leases.erlang_b_servers(1.0, 0.0), lambda: leases.erlang_b_servers(1.0, 1.5),
])
def test_erlang_b_refuses_nonsense(call):
    with pytest.raises(ValueError):
        call()


# ------------------------------------------------------------------ standard errors


def test_the_binomial_standard_error_is_sqrt_p_q_over_n():
    assert leases.binomial_standard_error(0.05, 10_000) == pytest.approx(
        math.sqrt(0.05 * 0.95 / 10_000))
    assert leases.binomial_standard_error(0.0, 100) == 0.0
    with pytest.raises(ValueError):
        leases.binomial_standard_error(0.5, 0)


def test_the_standard_error_over_seeds_is_the_sample_deviation_over_root_n():
    # Deviations -0.01, 0, +0.01: sample variance 0.0001, deviation 0.01.
    assert leases.seed_standard_error([0.04, 0.05, 0.06]) == pytest.approx(0.01 / math.sqrt(3))
    assert leases.seed_standard_error([0.05, 0.05]) == 0.0
    with pytest.raises(ValueError, match="two seeds"):
        leases.seed_standard_error([0.05])


def test_the_comparison_puts_the_simulated_share_beside_erlang_b_in_standard_errors():
    table = pd.DataFrame([run(20, 60.0, seed, denial=share)
                          for seed, share in enumerate([0.04, 0.05, 0.06], start=1)])
    row = leases.erlang_b_comparison(table).iloc[0]
    assert row["simulated"] == pytest.approx(0.05)
    assert row["standard_error"] == pytest.approx(0.01 / math.sqrt(3))
    assert row["standard_error_method"] == "seeds"
    assert row["erlang_b"] == pytest.approx(leases.erlang_b(20, 15.0))
    assert row["z"] == pytest.approx((0.05 - leases.erlang_b(20, 15.0)) / (0.01 / math.sqrt(3)))
    assert row["runs"] == 3


def test_one_seed_falls_back_to_the_binomial_error_over_its_arrivals():
    table = pd.DataFrame([run(20, 60.0, denial=0.05, requests_arrived=10_000),
                          run(21, 60.0, denial=0.03)])
    compared = leases.erlang_b_comparison(table).set_index(leases.LIMIT)
    assert compared.loc[20, "standard_error"] == pytest.approx(math.sqrt(0.05 * 0.95 / 10_000))
    assert compared.loc[20, "standard_error_method"] == "binomial"
    # Without a count of arrivals there is no error to give, and no z.
    assert math.isnan(compared.loc[21, "standard_error"]) and math.isnan(compared.loc[21, "z"])


# ------------------------------------------------------------------ offered load


def scenario_with(**workload: str):
    data = read_toml(lab_path("data", "scenarios", "ttl-tuning.toml"))
    data["workload"].update(workload)
    return parse_scenario(data)


def test_the_offered_load_is_the_arrival_rate_times_the_mean_duration():
    # poisson(40/s) and pareto(1s, 1.5), whose mean is 1.5 / 0.5 = 3 s.
    assert leases.offered_erlangs_of(scenario_with()) == pytest.approx(120.0)
    # 120 replicas receiving 0.5/s each, 250 ms on average.
    per_replica = scenario_with(arrivals="poisson(0.5/s) per replica",
                                duration="exponential(250ms)")
    assert leases.offered_erlangs_of(per_replica) == pytest.approx(15.0)


@pytest.mark.parametrize(("workload", "field"), [
    ({"arrivals": "bursts(40/s, on=2s, off=8s)"}, "workload.arrivals"),
    ({"duration": "pareto(1s, 1.0)"}, "workload.duration"),
])
def test_a_load_erlang_b_cannot_describe_is_refused_naming_the_field(workload, field):
    with pytest.raises(ScenarioError, match=field):
        leases.offered_erlangs_of(scenario_with(**workload))


# ------------------------------------------------------------------ seed bands


def test_bands_give_the_median_spread_and_worst_seed_of_each_point():
    table = pd.DataFrame(
        [run(20, 5.0, seed, leaked=value) for seed, value in enumerate([1, 2, 3, 4, 100], 1)]
        + [run(20, 60.0, seed, leaked=value) for seed, value in enumerate([10, 20], 1)])
    bands = leases.point_bands(table, leases.LEAKED).set_index(leases.TTL)
    assert bands.loc[5.0, "median"] == 3
    assert bands.loc[5.0, "worst"] == 100
    assert bands.loc[5.0, "runs"] == 5
    # numpy's linear quantiles: the 10th percentile of 1..4,100 is 1.4.
    assert bands.loc[5.0, "low"] == pytest.approx(1.4)
    assert (bands.loc[60.0, "median"], bands.loc[60.0, "worst"]) == (15, 20)
    assert set(bands.columns) >= {leases.OFFERED, leases.LIMIT}


def test_bands_can_run_along_the_limit():
    table = pd.DataFrame([run(limit, 60.0, seed, denial=0.1 / limit * seed)
                          for limit in (10, 20) for seed in (1, 2)])
    bands = leases.point_bands(table, leases.DENIAL_SHARE, x=leases.LIMIT)
    assert bands[leases.LIMIT].tolist() == [10, 20]
    assert bands["worst"].tolist() == pytest.approx([0.02, 0.01])
    with pytest.raises(ValueError, match="x:"):
        leases.point_bands(table, leases.DENIAL_SHARE, x="seed")


# ------------------------------------------------------------------ the region


def grid(denial: dict[int, float], leaked: dict[float, float], excess: dict[float, float],
         seeds: int = 1, offered: float = 15.0) -> list[dict]:
    """Runs where the denial share depends on the limit only and the leaks and
    excess on the TTL only, as in a sizing sweep's ideal."""
    return [run(limit, ttl, seed, offered, denial[limit], leaked[ttl], excess[ttl])
            for limit in denial for ttl in leaked for seed in range(1, seeds + 1)]


DENIAL = {16: 0.12, 20: 0.045, 24: 0.01}        # target 0.05: 20 and 24 slots
LEAKED = {1.0: 0.0, 5.0: 4.0, 30.0: 40.0}       # target 10: up to 5 s
EXCESS = {1.0: 3.0, 5.0: 0.0, 30.0: 0.0}        # target 0: from 5 s


def test_the_region_is_where_every_cost_meets_its_target():
    recommendation = leases.recommend_region(pd.DataFrame(grid(DENIAL, LEAKED, EXCESS)),
                                             TARGETS)
    assert recommendation.found
    assert recommendation.region == [(20, 5.0), (24, 5.0)]
    assert recommendation.smallest_limit == 20
    assert recommendation.smallest_limit_by_ttl() == {5.0: 20}
    assert recommendation.ttl_range_at(24) == (5.0, 5.0)
    assert recommendation.ttl_range_at(16) is None
    per_point = recommendation.per_point.set_index([leases.LIMIT, leases.TTL])
    assert not per_point.loc[(16, 5.0), "denial_ok"]
    assert not per_point.loc[(20, 1.0), "excess_ok"] and per_point.loc[(20, 1.0), "leak_ok"]
    assert not per_point.loc[(20, 30.0), "leak_ok"] and per_point.loc[(20, 30.0), "excess_ok"]


def test_a_cost_exactly_at_its_target_meets_it():
    table = pd.DataFrame([run(20, 5.0, denial=0.05, leaked=10.0, excess=0.0)])
    assert leases.recommend_region(table, TARGETS).region == [(20, 5.0)]


def test_one_bad_seed_rules_a_point_out():
    rows = grid(DENIAL, LEAKED, EXCESS, seeds=3)
    # Seed 3 at (24 slots, 5 s) leaks 11 lease-seconds, the others 4: the median
    # would pass, the worst seed does not.
    for row in rows:
        if (row[leases.LIMIT], row[leases.TTL], row[leases.SEED]) == (24, 5.0, 3):
            row[leases.LEAKED] = 11.0
    recommendation = leases.recommend_region(pd.DataFrame(rows), TARGETS)
    assert recommendation.region == [(20, 5.0)]
    point = recommendation.per_point.set_index([leases.LIMIT, leases.TTL]).loc[(24, 5.0)]
    assert point["median_leaked_lease_seconds"] == 4.0
    assert point["worst_leaked_lease_seconds"] == 11.0
    assert point["runs"] == 3


def test_a_run_without_a_value_cannot_vouch_for_its_point():
    rows = grid(DENIAL, LEAKED, EXCESS, seeds=2)
    for row in rows:
        if (row[leases.LIMIT], row[leases.TTL], row[leases.SEED]) == (20, 5.0, 2):
            row[leases.EXCESS] = math.nan
    assert leases.recommend_region(pd.DataFrame(rows), TARGETS).region == [(24, 5.0)]


def test_a_pair_must_pass_at_every_offered_load():
    light = grid(DENIAL, LEAKED, EXCESS, offered=10.0)
    # At 20 Erlangs 20 slots deny 16%, 24 slots 9%: only a bigger limit would do.
    heavy = grid({16: 0.25, 20: 0.16, 24: 0.09}, LEAKED, EXCESS, offered=20.0)
    recommendation = leases.recommend_region(pd.DataFrame(light + heavy), TARGETS)
    assert recommendation.offered_erlangs == (10.0, 20.0)
    assert not recommendation.found
    assert recommendation.region == [] and recommendation.smallest_limit is None
    pairs = recommendation.pairs.set_index([leases.LIMIT, leases.TTL])
    assert pairs.loc[(20, 5.0), "loads_acceptable"] == 1
    assert pairs.loc[(20, 5.0), "loads_tested"] == 2
    assert len(recommendation.failing(leases.DENIAL_SHARE)) == 3 + 9  # 16 slots light, all heavy


def test_a_pair_not_tested_at_every_load_is_not_recommended():
    rows = grid(DENIAL, LEAKED, EXCESS, offered=10.0) + [run(24, 5.0, offered=12.0,
                                                           denial=0.02, leaked=4.0)]
    assert leases.recommend_region(pd.DataFrame(rows), TARGETS).region == [(24, 5.0)]


def test_the_ttls_recommended_at_a_limit_may_have_a_gap():
    leaked = {1.0: 0.0, 2.0: 0.0, 5.0: 4.0, 30.0: 40.0}
    excess = {1.0: 0.0, 2.0: 2.0, 5.0: 0.0, 30.0: 0.0}   # a stray excess at 2 s
    recommendation = leases.recommend_region(pd.DataFrame(grid(DENIAL, leaked, excess)),
                                             TARGETS)
    assert recommendation.ttl_range_at(20) == (1.0, 5.0)
    assert not recommendation.ttls_are_contiguous_at(20)
    assert recommendation.smallest_limit_by_ttl() == {1.0: 20, 5.0: 20}


def test_targets_refuse_nonsense():
    with pytest.raises(ValueError, match="denial_share"):
        leases.RegionTargets(denial_share=1.5, leaked_lease_seconds=1.0)
    with pytest.raises(ValueError, match="leaked_lease_seconds"):
        leases.RegionTargets(denial_share=0.01, leaked_lease_seconds=-1.0)
    with pytest.raises(ValueError, match="concurrency_excess"):
        leases.RegionTargets(denial_share=0.01, leaked_lease_seconds=1.0,
                             concurrency_excess_lease_seconds=math.nan)


def test_a_table_without_the_planner_columns_is_refused_naming_them():
    table = pd.DataFrame([run(20, 5.0)]).drop(columns=[leases.LEAKED])
    with pytest.raises(KeyError, match="leaked_lease_seconds"):
        leases.recommend_region(table, TARGETS)
    with pytest.raises(ValueError, match="no runs"):
        leases.recommend_region(pd.DataFrame(columns=list(leases.PLANNER_COLUMNS)), TARGETS)


# ------------------------------------------------------------------ the text


def test_the_conclusion_names_the_fewest_slots_and_their_ttls():
    recommendation = leases.recommend_region(pd.DataFrame(grid(DENIAL, LEAKED, EXCESS)),
                                             TARGETS)
    text = leases.describe_region(recommendation)
    assert "the fewest slots is 20, with a lease TTL of 5 s" in text
    assert "5 s → 20" in text
    # B(19, 15) = 0.064 > 0.05 >= B(20, 15) = 0.046.
    assert "Erlang-B alone (no faults) would need 20 slots" in text
    assert leases.region_line(recommendation) == (
        "recommended region: 20 slots, TTL 5 s; 24 slots, TTL 5 s")


def test_the_conclusion_says_so_when_no_pair_meets_every_target():
    light = grid(DENIAL, LEAKED, EXCESS, offered=10.0)
    heavy = grid({16: 0.25, 20: 0.16, 24: 0.09}, LEAKED, EXCESS, offered=20.0)
    recommendation = leases.recommend_region(pd.DataFrame(light + heavy), TARGETS)
    text = leases.describe_region(recommendation)
    assert "No tested (max_in_flight, lease TTL) pair meets every target" in text
    assert "Recommended" not in text
    assert "- Pairs within the denials target: none." in text
    assert "- Pairs within the leaks target: 16 slots, TTL 1 s; 16 slots, TTL 5 s;" in text
    assert leases.region_line(recommendation) == "recommended region: none"


def test_the_erlang_fit_counts_the_points_within_three_standard_errors():
    rows = [run(20, 60.0, seed, denial=share)
            for seed, share in enumerate([0.044, 0.046, 0.047], start=1)]
    rows += [run(16, 60.0, seed, denial=share)       # B(16, 15) = 0.11: far above it
             for seed, share in enumerate([0.30, 0.31, 0.32], start=1)]
    text = leases.describe_erlang_fit(leases.erlang_b_comparison(pd.DataFrame(rows)))
    assert text.startswith("1 of 2 points lie within 3 standard errors of Erlang-B")
    assert "(16 slots at 15 Erlangs" in text


# ------------------------------------------------------------------ the figures


def assert_readable(figure: Figure) -> None:
    for ax in figure.axes:
        assert ax.get_xlabel() and ax.get_ylabel()
        assert "(" in ax.get_ylabel(), "a y label names its unit"
        assert ax.get_legend() is not None


def test_the_erlang_b_figure_draws_each_curve_beside_its_simulated_points():
    rows = [run(limit, 60.0, seed, offered=load, denial=leases.erlang_b(limit, load) + noise)
            for load in (10.0, 15.0) for limit in (12, 16, 20)
            for seed, noise in enumerate([-0.002, 0.0, 0.002], start=1)]
    comparison = leases.erlang_b_comparison(pd.DataFrame(rows))
    figure = lease_figures.plot_erlang_b(comparison, target_denial_share=0.05)
    assert_readable(figure)
    by_limit, by_load = figure.axes
    curves = {line.get_label(): line for line in by_limit.lines
              if line.get_label() and not line.get_label().startswith("_")}
    fifteen = curves["15 Erlangs"]
    assert list(fifteen.get_xdata()) == list(range(12, 21))
    assert list(fifteen.get_ydata()) == pytest.approx([leases.erlang_b(c, 15.0)
                                                       for c in range(12, 21)])
    assert {"12 slots", "16 slots", "20 slots"} <= {line.get_label() for line in by_load.lines}
    # One error-bar container per curve: the simulated points beside it.
    assert len(by_limit.containers) == 2 and len(by_load.containers) == 3
    assert any(line.get_ydata()[0] == 0.05 for line in by_limit.lines
               if line.get_label().startswith("target"))


def test_the_ttl_figure_bands_each_limit_and_rings_the_recommended_points():
    table = pd.DataFrame(grid(DENIAL, LEAKED, EXCESS, seeds=3))
    recommendation = leases.recommend_region(table, TARGETS)
    figure = lease_figures.plot_ttl_costs(table, recommendation)
    assert_readable(figure)
    assert [ax.get_xscale() for ax in figure.axes] == ["log"] * 3
    leak_axis = figure.axes[1]
    assert {"16 slots", "20 slots", "24 slots"} <= {line.get_label()
                                                    for line in leak_axis.lines}
    assert len(leak_axis.collections) == 3   # one seed band per limit
    # Limits that cost alike draw one curve: a style each keeps them all in sight.
    limits = [line for line in leak_axis.lines if line.get_label().endswith("slots")]
    assert len({line.get_linestyle() for line in limits}) == len(limits)
    rings = [line for line in leak_axis.lines if line.get_markeredgecolor() == "tab:green"
             and len(line.get_xdata())]
    assert sorted(x for line in rings for x in line.get_xdata()) == [5.0, 5.0]
    with pytest.raises(ValueError, match="no runs at an offered load"):
        lease_figures.plot_ttl_costs(table, recommendation, offered_erlangs=99.0)


def cell_texts(figure: Figure) -> list[str]:
    return [text.get_text() for text in figure.axes[0].texts]


def test_the_region_figure_marks_each_pair_and_names_what_it_missed():
    recommendation = leases.recommend_region(pd.DataFrame(grid(DENIAL, LEAKED, EXCESS)),
                                             TARGETS)
    figure = lease_figures.plot_region(recommendation)
    assert_readable(figure)
    texts = cell_texts(figure)
    assert len(texts) == 9 and texts.count("✓") == 2
    assert "denials\nexcess" in texts       # 16 slots, 1 s
    assert "leaks" in texts                   # 20 slots, 30 s
    assert "2 recommended pair(s)" in figure.axes[0].get_title()


def test_the_region_figure_says_so_when_nothing_is_recommended():
    light = grid(DENIAL, LEAKED, EXCESS, offered=10.0)
    heavy = grid({16: 0.25, 20: 0.16, 24: 0.09}, LEAKED, EXCESS, offered=20.0)
    figure = lease_figures.plot_region(
        leases.recommend_region(pd.DataFrame(light + heavy), TARGETS))
    assert "✓" not in cell_texts(figure)
    assert "no tested pair meets every target" in figure.axes[0].get_title()


# ------------------------------------------------------------------ the sweeps


def test_the_lab_sweeps_size_a_lease_store_with_and_without_faults():
    erlang = leases.load_lease_sweep("data/sweeps/lease-sizing-erlang.toml")
    sizing = leases.load_lease_sweep("data/sweeps/lease-sizing.toml")
    quiet = erlang.scenario_at(erlang.points[0])
    assert quiet.store == "axond_leases.redis"
    assert quiet.faults.crash.rate == 0 and quiet.network.reply_loss == 0
    assert {leases.LIMIT_PARAMETER, leases.ARRIVALS_PARAMETER} == set(erlang.parameters)
    faulty = sizing.scenario_at(sizing.points[0])
    assert faulty.faults.crash.rate > 0 and faulty.faults.connection_stall.rate > 0
    assert {leases.LIMIT_PARAMETER, leases.TTL_PARAMETER} == set(sizing.parameters)
    assert len(sizing.seeds) >= 3 and len(sizing.points) >= 20
    assert leases.run_seconds_of(sizing) == 80.0
    assert "Faults: none." in leases.describe_sweep(erlang)
    assert "crash 20/h per replica" in leases.describe_sweep(sizing)


def test_the_notebook_parameters_reach_the_sweep():
    sweep = leases.load_lease_sweep("data/sweeps/lease-sizing.toml", seeds=2, limits=[4, 6],
                                    arrivals=["poisson(8/s)"], lease_ttls=["500ms", "5s"],
                                    set_fields={"fleet.replicas": 7})
    assert sweep.seeds == (1, 2)
    assert sorted((p.parameters[leases.LIMIT_PARAMETER], p.parameters[leases.TTL_PARAMETER])
                  for p in sweep.points) == [(4, "500ms"), (4, "5s"), (6, "500ms"), (6, "5s")]
    assert {p.parameters[leases.ARRIVALS_PARAMETER] for p in sweep.points} == {"poisson(8/s)"}
    assert sweep.scenario_at(sweep.points[0]).fleet.replicas == 7


def test_a_planner_table_reads_each_point_from_its_scenario():
    sweep = leases.load_lease_sweep("data/sweeps/lease-sizing.toml", seeds=2, limits=[4, 6],
                                    lease_ttls=["500ms"],
                                    set_fields={"workload.arrivals": "poisson(10/s)",
                                                "workload.duration": "exponential(2s)"})
    rows = [{"point": point.point_id, "seed": seed, leases.DENIAL_SHARE: 0.1 * seed,
             leases.LEAKED: 1.0, leases.EXCESS: 0.0, "requests_arrived": 100}
            for point in sweep.points for seed in (1, 2)]
    rows.append({**rows[0], "point": "gone"})   # a point of an earlier, wider sweep
    table = leases.planner_table(pd.DataFrame(rows), sweep)
    assert len(table) == 4
    assert table[leases.OFFERED].tolist() == pytest.approx([20.0] * 4)   # 10/s × 2 s
    assert table[leases.LIMIT].tolist() == [4, 4, 6, 6]
    assert table[leases.TTL].tolist() == [0.5] * 4
    assert table[leases.DENIAL_SHARE].tolist() == pytest.approx([0.1, 0.2, 0.1, 0.2])
    with pytest.raises(KeyError, match="leaked_lease_seconds"):
        leases.planner_table(pd.DataFrame(rows).drop(columns=[leases.LEAKED]), sweep)


def test_a_sweep_of_another_family_is_refused_naming_the_setting():
    sweep = load_sweep(lab_path("data", "sweeps", "ttl-tuning.toml"), seeds=1)
    results = pd.DataFrame([{"point": sweep.points[0].point_id, "seed": 1,
                             leases.DENIAL_SHARE: 0.0, leases.LEAKED: 0.0,
                             leases.EXCESS: 0.0}])
    with pytest.raises(ScenarioError, match="store_settings.max_in_flight"):
        leases.planner_table(results, sweep)


def test_targets_in_slots_are_lease_seconds_over_the_run():
    targets = leases.RegionTargets.in_average_slots(0.05, leaked_slots=1.5, excess_slots=0.25,
                                                    run_seconds=80.0)
    assert targets == leases.RegionTargets(0.05, 120.0, 20.0)
    with pytest.raises(ValueError, match="run_seconds"):
        leases.RegionTargets.in_average_slots(0.05, 1.0, 0.0, run_seconds=0.0)


def test_targets_per_run_need_runs_of_one_length():
    sweep = leases.load_lease_sweep("data/sweeps/lease-sizing.toml", seeds=1, limits=[4],
                                    lease_ttls=["5s"])
    varied = load_sweep(lab_path("data", "sweeps", "lease-sizing.toml"), seeds=1, vary={
        leases.LIMIT_PARAMETER: [4], leases.TTL_PARAMETER: ["5s"], "duration": ["10s", "20s"]})
    assert leases.run_seconds_of(sweep) == 80.0
    with pytest.raises(ScenarioError, match="30 s, 40 s"):
        leases.run_seconds_of(varied)


# ------------------------------------------------------------------ the demo


def test_the_leases_demo_leaks_leases_and_refuses_more_than_erlang_b():
    scenario = load_scenario(lab_path("data", "scenarios", "leases.toml"))
    summary = run_scenario(scenario).summary
    assert summary["leaked_lease_seconds"] > 0
    assert summary["false_denials_by_leaked_leases"] > 0
    expected = leases.erlang_b(scenario.settings.max_in_flight,
                               leases.offered_erlangs_of(scenario))
    assert summary["denial_share"] > expected
    assert summary["requests_denied_exceeded"] > 0   # the limit itself binds too


def test_the_limit_axis_ticks_whole_slots_only():
    rows = [run(limit, 60.0, 1, offered=1.5, denial=leases.erlang_b(limit, 1.5))
            for limit in (2, 3)]
    figure = lease_figures.plot_erlang_b(leases.erlang_b_comparison(pd.DataFrame(rows)))
    by_limit = figure.axes[0]
    figure.canvas.draw()  # the locator picks its ticks at drawing
    inside = [tick for tick in by_limit.get_xticks()
              if by_limit.get_xlim()[0] <= tick <= by_limit.get_xlim()[1]]
    assert inside and all(float(tick).is_integer() for tick in inside)
