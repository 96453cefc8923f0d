"""The lease-ledger notebook's analysis: its two sweeps, the fault sweep's
points in grid order, the conservation equation's runs and what they say,
losses by cause, the exchange side by side, and the figures drawn from them,
on hand-made tables whose answers can be checked by hand."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from simulator.analysis import kept_png, ledger, ledger_figures  # noqa: E402
from simulator.sweeps import Sweep  # noqa: E402

SCENARIO = "data/scenarios/tollgate.toml"
LEDGER, COMPOSING = "tollgate.ledger", "tollgate.variants.release_then_acquire"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def faults_sweep() -> Sweep:
    """Crashes 0/h or 240/h × reply loss 0 or 5%, seeds 1 and 2: in grid
    order quiet, lossy, crashing, both."""
    return ledger.fault_rate_sweep(SCENARIO, 2, ["0/h", "240/h"], [0.0, 0.05])


@pytest.fixture(scope="module")
def trade_sweep() -> Sweep:
    return ledger.exchange_sweep(SCENARIO, 2, [LEDGER, COMPOSING], 3_000_000)


def run_row(sweep: Sweep, index: int, seed: int, **metrics: float) -> dict:
    """One run of the fault sweep's point ``index``: its point, its seed, and
    the metrics given (every other metric the analysis reads at 0)."""
    point = sweep.points[index]
    every = dict.fromkeys((
        "fault_crash_count", "reply_lost_count", "billing_loss_units_by_holder_crashed",
        "billing_loss_units_by_store_logic", "units_stranded_by_ambiguous_acquire",
        "units_stranded_by_store_logic", "settlement_loss_units", "settlement_loss_true_units",
        "settlement_loss_excess_units", "conservation_residual_max_units",
        "conservation_violations"), 0)
    return {"point": point.point_id, "seed": seed, **point.parameters, **every, **metrics}


def faults_table(sweep: Sweep) -> pd.DataFrame:
    """Mean faults per point: quiet 0, lossy 10, crashing 30, both 40 (the
    harshest); billing loss under holder_crashed only where replicas crash
    (2 M a run at the crashing point, 1 M at both); stranded units by lost
    grants only where replies are lost; the reported settlement loss 200
    units above the true loss in every run. Rows are not in grid order."""
    rows = []
    for index, faults, billed_loss, stranded in ((3, (40, 40), (1_000_000, 1_000_000), 500),
                                                 (0, (0, 0), (0, 0), 0),
                                                 (2, (20, 40), (1_500_000, 2_500_000), 0),
                                                 (1, (10, 10), (0, 0), 700)):
        for seed in (1, 2):
            rows.append(run_row(
                sweep, index, seed, fault_crash_count=faults[seed - 1] // 2,
                reply_lost_count=faults[seed - 1] - faults[seed - 1] // 2,
                billing_loss_units_by_holder_crashed=billed_loss[seed - 1],
                units_stranded_by_ambiguous_acquire=stranded * seed,
                settlement_loss_units=1_000 * seed + 200,
                settlement_loss_true_units=1_000 * seed))
    return pd.DataFrame(rows)


def sample(sweep: Sweep, index: int, seed: int, seconds: int, namespace: str = "*",
           **terms: int) -> dict:
    """One sample of a run's metric series (every term not given at 0)."""
    every = dict.fromkeys((*ledger.TERMS_RIGHT, "deposited", "overage_recorded",
                           "residual_units", "units_consumed", "units_billed"), 0)
    return {"point": sweep.points[index].point_id, "seed": seed, "time_us": seconds * 1_000_000,
            "namespace": namespace, **every, **terms}


def metric_series(sweep: Sweep) -> pd.DataFrame:
    """Three samples of every run, out of time order; the drawn run (the
    harshest point, seed 1) leases 3 M of 8 M at 1 s and settles by 2 s. Also
    an account's own rows and a seed the sweep did not run: neither counts."""
    settled = dict(deposited=8_000_000, balance=6_500_000, settled_usage=1_200_000,
                   settlement_loss=300_000, units_consumed=1_250_000, units_billed=1_200_000)
    leasing = dict(deposited=8_000_000, balance=5_000_000, active_lease_grants=3_000_000,
                   units_consumed=1_000_000)
    rows = []
    for index in range(4):
        for seed in (1, 2):
            rows += [sample(sweep, index, seed, 2, **settled), sample(sweep, index, seed, 0),
                     sample(sweep, index, seed, 1, **leasing)]
    rows.append(sample(sweep, 3, 1, 1, namespace="account-1", residual_units=5))
    rows.append(sample(sweep, 3, 9, 1, residual_units=7))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ the sweeps


def test_the_fault_sweep_crosses_crash_rates_with_reply_losses_over_the_scenario():
    sweep = ledger.fault_rate_sweep(SCENARIO, [3, 5], ["0/h", "60/h"], [0.0, 0.01, 0.05],
                                    set_fields={"duration": "20s"})
    assert sweep.name == ledger.FAULT_SWEEP
    assert sweep.seeds == (3, 5)
    assert [(point.parameters[ledger.CRASH_RATE], point.parameters[ledger.REPLY_LOSS])
            for point in sweep.points] == [("0/h", 0.0), ("0/h", 0.01), ("0/h", 0.05),
                                           ("60/h", 0.0), ("60/h", 0.01), ("60/h", 0.05)]
    assert sweep.base["duration"] == "20s"


def test_the_exchange_sweep_funds_every_account_with_the_deposit_and_keeps_the_stores_order(
        trade_sweep: Sweep):
    assert trade_sweep.name == ledger.EXCHANGE_SWEEP
    assert ledger.exchange_kinds(trade_sweep) == [LEDGER, COMPOSING]
    for point in trade_sweep.points:
        assert trade_sweep.scenario_at(point).store_settings["deposit"] == 3_000_000


def test_a_ledger_table_keeps_only_the_sweeps_runs_and_counts_unmet_refusals_as_zero(
        trade_sweep: Sweep):
    ours = trade_sweep.points[0].point_id
    results = pd.DataFrame([
        {"point": ours, "seed": 1, "spends_refused_by_storage": None, "convergence_us": None},
        {"point": ours, "seed": 3, "spends_refused_by_storage": 4.0, "convergence_us": 1.0},
        {"point": "another", "seed": 1, "spends_refused_by_storage": 5.0, "convergence_us": 1.0},
        {"point": ours, "seed": 2, "spends_refused_by_storage": 6.0, "convergence_us": 2.0}])
    table = ledger.ledger_table(results, trade_sweep)
    assert table[["seed", "spends_refused_by_storage"]].to_dict("list") == {
        "seed": [1, 2], "spends_refused_by_storage": [0.0, 6.0]}
    assert list(table.index) == [0, 1]
    assert table["convergence_us"].isna().tolist() == [True, False]  # only refusals are filled


# ------------------------------------------------------------------ shaping


def test_units_read_in_millions_past_a_million():
    assert ledger.units(999_999) == "999,999"
    assert ledger.units(1_000_000) == "1.00 M"
    assert ledger.units(-2_504_000) == "-2.50 M"
    assert ledger.units(0) == "0"


def test_causes_are_the_columns_of_a_prefix_in_the_summarys_order():
    table = pd.DataFrame(columns=["units_stranded", "units_stranded_by_b", "stranded_unit_seconds",
                                  "units_stranded_by_a"])
    assert ledger.causes_of(table, ledger.STRANDED) == ["units_stranded_by_b",
                                                        "units_stranded_by_a"]


def test_means_follow_the_order_given_and_a_value_without_runs_is_nan():
    table = pd.DataFrame({"store": ["b", "a", "b"], "x": [1.0, 4.0, 3.0]})
    assert ledger.means_by(table, "store", ["x"])["x"].to_dict() == {"a": 4.0, "b": 2.0}
    ordered = ledger.means_by(table, "store", ["x"], ["b", "c", "a"])["x"]
    assert list(ordered.index) == ["b", "c", "a"]
    assert ordered["b"] == 2.0 and pd.isna(ordered["c"]) and ordered["a"] == 4.0
    runs = ledger.runs_by(table, "store", "x", ["a", "b"])
    assert [list(values) for values in runs] == [[4.0], [1.0, 3.0]]


# ------------------------------------------------------------------ the fault sweep's points


def test_fault_points_are_in_grid_order_with_the_mean_faults_their_runs_saw(
        faults_sweep: Sweep):
    points = ledger.fault_points(faults_table(faults_sweep), faults_sweep)
    assert list(points.index) == [point.point_id for point in faults_sweep.points]
    assert points["faults"].tolist() == [0, 10, 30, 40]
    assert points["label"].tolist()[1] == "crashes 0/h\nreply loss 5%"
    assert points["name"].tolist()[2] == "crashes 240/h, reply loss 0%"
    assert ledger.calmest(points) == faults_sweep.points[0].point_id
    assert ledger.harshest(points) == faults_sweep.points[3].point_id


def test_the_harshest_point_on_a_tie_is_the_first_in_grid_order_and_runless_points_are_left_out(
        faults_sweep: Sweep):
    table = pd.DataFrame([run_row(faults_sweep, 2, 1, fault_crash_count=9),
                          run_row(faults_sweep, 1, 1, fault_crash_count=9),
                          run_row(faults_sweep, 0, 1)])
    points = ledger.fault_points(table, faults_sweep)
    assert list(points.index) == [point.point_id for point in faults_sweep.points[:3]]
    assert ledger.harshest(points) == faults_sweep.points[1].point_id


def test_faults_seen_are_crashes_plus_replies_lost():
    table = pd.DataFrame({"fault_crash_count": [2, 0], "reply_lost_count": [3, 7]})
    assert ledger.faults_seen(table).tolist() == [5, 7]


# ------------------------------------------------------------------ the equation over time


def test_the_conservation_runs_are_every_aggregate_sample_and_the_harshest_points_run_by_time(
        faults_sweep: Sweep):
    points = ledger.fault_points(faults_table(faults_sweep), faults_sweep)
    runs = ledger.conservation_runs(metric_series(faults_sweep), points, faults_sweep)
    assert len(runs.every_run) == 4 * 2 * 3  # neither the account's rows nor seed 9
    assert (runs.point, runs.seed) == (faults_sweep.points[3].point_id, 1)
    assert runs.point_name == "crashes 240/h, reply loss 5%"
    assert runs.drawn["time_us"].tolist() == [0, 1_000_000, 2_000_000]
    assert set(runs.drawn["point"]) == {runs.point} and set(runs.drawn["seed"]) == {1}
    assert (runs.points, runs.seeds) == (4, 2)
    assert ledger.conservation_runs(metric_series(faults_sweep), points, faults_sweep,
                                    series_seed=2).seed == 2


def test_a_series_seed_the_sweep_did_not_run_is_refused_naming_the_parameter(faults_sweep: Sweep):
    points = ledger.fault_points(faults_table(faults_sweep), faults_sweep)
    with pytest.raises(ValueError, match=r"series_seed: no samples of seed 7 .* seeds are 1, 2"):
        ledger.conservation_runs(metric_series(faults_sweep), points, faults_sweep, 7)


def test_the_drawn_run_is_told_from_its_last_sample_and_its_peak_on_leases(faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    points = ledger.fault_points(table, faults_sweep)
    runs = ledger.conservation_runs(metric_series(faults_sweep), points, faults_sweep)
    text = ledger.drawn_run_text(runs, table)
    assert text.startswith("**The run drawn** (crashes 240/h, reply loss 5%, seed 1: 20 crashes, "
                           "20 replies lost). Of 8.00 M units deposited (+ 0 overage), at the "
                           "end 6.50 M sit in the balance, 1.20 M were billed as settled usage, "
                           "300,000 written off as settlement loss, 0 expired, and 0 are still "
                           "out on active leases.")
    assert "At most 3.00 M units were out on leases at once (at 1 s)." in text
    assert text.endswith("The holders consumed 1.25 M units; the ledger billed 1.20 M, "
                         "50,000 short.")


def test_a_residual_zero_everywhere_is_said_so_with_the_samples_counted(faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    points = ledger.fault_points(table, faults_sweep)
    runs = ledger.conservation_runs(metric_series(faults_sweep), points, faults_sweep)
    text = ledger.conservation_text(runs, table)
    assert "**The residual** `deposited + overage − (balance + active lease grants + settled " \
           "usage + settlement loss + expired)` was **0 at every one of the 24 samples of all " \
           "8 runs**, and after every transaction of every run (the oracle checks each one): " \
           "no violation." in text
    assert text.startswith("**The run drawn**")


def test_a_residual_left_zero_is_counted_by_run_and_the_worst_transaction_named(
        faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    table.loc[0, ["conservation_residual_max_units", "conservation_violations"]] = [1_500_000, 3]
    series = metric_series(faults_sweep)
    series.loc[0, "residual_units"] = -2_000_000
    series.loc[4, "residual_units"] = 12
    points = ledger.fault_points(table, faults_sweep)
    text = ledger.residual_text(ledger.conservation_runs(series, points, faults_sweep), table)
    assert "left zero in **2 of 8 runs** (largest |residual| at a sample: 2.00 M units)" in text
    assert text.endswith("and after the transactions: 3 violations, the worst residual "
                         "1.50 M units.")


# ------------------------------------------------------------------ losses by cause


def test_each_cause_is_told_at_the_calmest_and_harshest_points_and_where_largest(
        faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    points = ledger.fault_points(table, faults_sweep)
    assert ledger.cause_lines(table, ledger.BILLING_LOSS, "Billing loss", points) == [
        "- Billing loss under `holder_crashed`: 0 per run at crashes 0/h, reply loss 0%, "
        "1.00 M at crashes 240/h, reply loss 5%; largest at crashes 240/h, reply loss 0% "
        "(2.00 M).",
        "- Billing loss under `store_logic`: zero in all 8 runs."]
    assert ledger.cause_lines(table, ledger.STRANDED, "Units stranded", points)[0] == (
        "- Units stranded under `ambiguous_acquire`: 0 per run at crashes 0/h, reply loss 0%, "
        "750 at crashes 240/h, reply loss 5%; largest at crashes 0/h, reply loss 5% (1,050).")


def test_the_settlement_loss_is_set_against_the_true_loss_and_no_excess_is_said_so(
        faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    assert ledger.settlement_line(table) == (
        "- Settlement loss: the ledger reported 200 units per run more than the true loss, on "
        "average; `settlement_loss_excess_units` (what no billing loss explains) is **0 in "
        "every run**: the reported loss is the true loss plus the billing loss of settled "
        "leases, exactly.")
    table.loc[[1, 5], "settlement_loss_excess_units"] = [5, -3_000_000]
    assert ledger.settlement_line(table).endswith(
        "is nonzero in 2 of 8 runs (the ledger's own; largest 3.00 M units).")


def test_the_loss_text_is_billing_loss_then_stranded_units_then_settlement(faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    points = ledger.fault_points(table, faults_sweep)
    lines = ledger.loss_text(table, points).splitlines()
    assert [line.split(" under ")[0] for line in lines[:4]] == [
        "- Billing loss", "- Billing loss", "- Units stranded", "- Units stranded"]
    assert lines[4] == ledger.settlement_line(table)


# ------------------------------------------------------------------ the exchange


def exchange_table(sweep: Sweep) -> pd.DataFrame:
    """Two seeds per holder; only the composing one re-grants below credit."""
    rows = []
    for kind, below, short, refused, admitted, consumed in (
            (LEDGER, (0, 0), (0, 0), (100, 120), (900, 880), (5_000_000, 4_800_000)),
            (COMPOSING, (10, 30), (5_000, 15_000), (130, 110), (870, 890),
             (4_900_000, 4_900_000))):
        for seed in (1, 2):
            rows.append({
                "point": next(point.point_id for point in sweep.points
                              if point.parameters["store"] == kind),
                "seed": seed, "store": kind, "regrants_below_credit": below[seed - 1],
                "regrant_shortfall_units": short[seed - 1], "spends_refused": refused[seed - 1],
                "spends_admitted": admitted[seed - 1], "units_consumed": consumed[seed - 1],
                "spends_refused_by_grant_too_small": refused[seed - 1],
                "spends_refused_by_storage": 0})
    return pd.DataFrame(rows)


def test_each_holder_is_told_by_its_regrants_and_set_against_the_reference_seed_by_seed(
        trade_sweep: Sweep):
    lines = ledger.exchange_lines(exchange_table(trade_sweep), ledger.exchange_kinds(trade_sweep))
    assert lines == [
        f"- `{LEDGER}` re-granted below credit in none of its 2 runs; it refused a median of "
        "110 spends and admitted 890, consuming 4.90 M units.",
        f"- `{COMPOSING}` re-granted below credit in 2 of 2 runs, a median of 20 times per run, "
        "10,000 units short in all (median; 500 per short re-grant, 0.20% of the units "
        "consumed); it refused a median of 120 spends and admitted 880, consuming 4.90 M units; "
        f"against `{LEDGER}` it refused more spends on 1 of 2 seeds, fewer on 1 (median "
        "difference +10), and consumed fewer units on 1 of 2 seeds (median difference +0)."]


# ------------------------------------------------------------------ figures


def legend_texts(ax) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_the_conservation_figure_stacks_the_terms_and_draws_every_runs_residual(
        faults_sweep: Sweep):
    points = ledger.fault_points(faults_table(faults_sweep), faults_sweep)
    runs = ledger.conservation_runs(metric_series(faults_sweep), points, faults_sweep)
    figure = ledger_figures.plot_conservation(runs)
    assert isinstance(figure, Figure)
    top, middle, bottom = figure.axes
    assert top.get_title() == "Where the units sit: crashes 240/h, reply loss 5%, seed 1"
    assert set(legend_texts(top)) == {"balance", "active lease grants", "settled usage",
                                      "settlement loss", "expired", "deposited + overage"}
    assert legend_texts(middle) == ["consumed by holders (truth)", "billed by the ledger"]
    assert len(bottom.get_lines()) == 8                      # one residual line a run
    assert bottom.get_ylim() == pytest.approx((-1.2, 1.2))   # zero sits mid-panel
    assert bottom.get_title().endswith("(4 points × 2 seeds)")
    assert bottom.get_xlabel() == "virtual time (s)"


def test_the_losses_figure_stacks_only_causes_that_occurred_and_sets_reported_beside_true(
        faults_sweep: Sweep):
    table = faults_table(faults_sweep)
    points = ledger.fault_points(table, faults_sweep)
    billing, stranded, settlement = ledger_figures.plot_losses(table, points).axes
    assert billing.get_title() == "Billing loss by cause"
    assert legend_texts(billing) == ["holder_crashed"]          # store_logic was zero
    assert [bar.get_height() for bar in billing.patches] == [0, 0, 2.0, 1.0]
    assert legend_texts(stranded) == ["ambiguous_acquire"]
    assert [tick.get_text() for tick in settlement.get_xticklabels()] == points["label"].tolist()
    assert legend_texts(settlement) == ["reported by the ledger", "true"]
    assert len(settlement.patches) == 2 * 4
    assert len(settlement.get_lines()) == 2 * 4                 # a column of seed dots a bar


def test_the_exchange_figure_has_refusals_regrants_and_shortfall_per_holder(trade_sweep: Sweep):
    table = exchange_table(trade_sweep)
    figure = ledger_figures.plot_exchange(table, ledger.exchange_kinds(trade_sweep), 3_000_000, 2)
    refused, below, shortfall = figure.axes
    assert legend_texts(refused) == ["grant_too_small"]         # no storage refusal met
    assert [bar.get_height() for bar in refused.patches] == [110, 120]
    assert [bar.get_height() for bar in below.patches] == [0, 20]
    assert [bar.get_height() for bar in shortfall.patches] == [0, 10_000]
    assert [tick.get_text() for tick in below.get_xticklabels()] == [
        "ledger", "variants\nrelease_then_acquire"]
    assert shortfall.get_title() == "Regrant shortfall (units)"
    assert figure.get_suptitle() == ("Each account funded with 3.00 M units (mean over 2 seeds; "
                                     "dots: seeds)")


def test_a_kept_figure_is_written_beside_the_runs_as_the_png_returned(tmp_path):
    figure = Figure()
    figure.subplots().plot([0, 1], [0, 1])
    png = kept_png(figure, tmp_path, "line")
    assert png.startswith(PNG_SIGNATURE)
    assert (tmp_path / "line.png").read_bytes() == png
