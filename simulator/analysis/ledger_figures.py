"""The lease-ledger notebook's figures (``08_ledger_conservation``), drawn from
what ``simulator.analysis.ledger`` shaped: the conservation equation's terms
and residual over time, the losses by cause as faults grow, and the two
holders' exchanges side by side. Nothing here computes a verdict; each
function only draws one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.analysis import ledger
from simulator.analysis.ledger import MILLION, POINT, STORE


def plot_conservation(runs: ledger.ConservationRuns) -> Figure:
    """Three panels against virtual time: the drawn run's right side of the
    equation stacked under its left side (dashed); the units its holders
    consumed against the units the ledger billed; every run's residual."""
    series = runs.drawn
    seconds = series["time_us"] / 1e6
    figure = Figure(figsize=(11, 10), layout="constrained")
    top, middle, bottom = figure.subplots(3, 1, sharex=True, height_ratios=(3, 2, 2))
    top.stackplot(seconds, *(series[term] / MILLION for term in ledger.TERMS_RIGHT),
                  labels=[term.replace("_", " ") for term in ledger.TERMS_RIGHT], alpha=0.8)
    top.plot(seconds, (series["deposited"] + series["overage_recorded"]) / MILLION, "k--",
             label="deposited + overage")
    top.set_ylabel("units (millions)")
    top.set_title(f"Where the units sit: {runs.point_name}, seed {runs.seed}", fontsize=10)
    top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    middle.plot(seconds, series["units_consumed"] / MILLION, label="consumed by holders (truth)")
    middle.plot(seconds, series["units_billed"] / MILLION, label="billed by the ledger")
    middle.set_ylabel("units (millions)")
    middle.legend(fontsize=8, loc="upper left")
    for _, run in runs.every_run.groupby([POINT, ledger.SEED]):
        bottom.plot(run["time_us"] / 1e6, run["residual_units"], color="tab:red", alpha=0.4,
                    linewidth=1)
    span = 1.2 * max(1, runs.every_run["residual_units"].abs().max())  # a zero line sits mid-panel
    bottom.set_ylim(-span, span)
    bottom.set_ylabel("residual (units)")
    bottom.set_xlabel("virtual time (s)")
    bottom.set_title(f"The residual, every run of the sweep ({runs.points} points × "
                     f"{runs.seeds} seeds)", fontsize=10)
    for ax in (top, middle, bottom):
        ax.grid(True, alpha=0.3)
    return figure


def plot_losses(table: pd.DataFrame, points: pd.DataFrame) -> Figure:
    """One bar per point of ``ledger.fault_points`` (mean over seeds): billing
    loss stacked by cause, units stranded stacked by cause, and the
    settlement loss the ledger reported beside the true loss (each seed a dot)."""
    figure = Figure(figsize=(max(8, 1.2 * len(points)), 11), layout="constrained")
    billing_ax, stranded_ax, settlement_ax = figure.subplots(3, 1, sharex=True)
    for ax, prefix, title in ((billing_ax, ledger.BILLING_LOSS, "Billing loss by cause"),
                              (stranded_ax, ledger.STRANDED, "Units stranded by cause")):
        means = ledger.means_by(table, POINT, ledger.causes_of(table, prefix), points.index)
        _stacked_bars(ax, means / MILLION, prefix)
        ax.set_xticks(range(len(points)), points["label"], fontsize=7)
        ax.set_ylabel("units (millions), mean per run")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    width = 0.38
    for offset, column, label in ((-width / 2, "settlement_loss_units", "reported by the ledger"),
                                  (width / 2, "settlement_loss_true_units", "true")):
        means = ledger.means_by(table, POINT, [column], points.index)[column] / MILLION
        xs = np.arange(len(points)) + offset
        settlement_ax.bar(xs, means, width, alpha=0.6, label=label)
        _seed_dots(settlement_ax, xs, [runs / MILLION for runs in
                                       ledger.runs_by(table, POINT, column, points.index)], 2.5)
    settlement_ax.set_xticks(range(len(points)), points["label"], fontsize=7)
    settlement_ax.set_ylabel("units (millions) per run")
    settlement_ax.set_title("Settlement loss: reported against true", fontsize=10)
    settlement_ax.legend(fontsize=8, loc="upper left")
    for ax in (billing_ax, stranded_ax, settlement_ax):
        ax.grid(True, axis="y", alpha=0.3)
    return figure


def plot_exchange(table: pd.DataFrame, kinds: Sequence[str], deposit: int, seeds: int) -> Figure:
    """One bar per store of ``kinds`` (mean over ``seeds``; each seed a dot):
    spends refused stacked by refusal, re-grants below credit, and the units
    they fell short by, each account funded with ``deposit`` units."""
    figure = Figure(figsize=(4.2 * 3, 4.6), layout="constrained")
    refused_ax, below_ax, shortfall_ax = figure.subplots(1, 3)
    refusals = ledger.means_by(table, STORE, ledger.causes_of(table, ledger.REFUSED), kinds)
    _stacked_bars(refused_ax, refusals, ledger.REFUSED)
    refused_ax.set_title("Spends refused, by refusal", fontsize=10)
    refused_ax.legend(fontsize=8, loc="lower right")
    for ax, metric, title in ((below_ax, "regrants_below_credit", "Re-grants below credit"),
                              (shortfall_ax, "regrant_shortfall_units",
                               "Regrant shortfall (units)")):
        ax.bar(range(len(kinds)), ledger.means_by(table, STORE, [metric], kinds)[metric],
               alpha=0.6)
        ax.set_title(title, fontsize=10)
    for ax, metric in ((refused_ax, "spends_refused"), (below_ax, "regrants_below_credit"),
                       (shortfall_ax, "regrant_shortfall_units")):
        _seed_dots(ax, range(len(kinds)), ledger.runs_by(table, STORE, metric, kinds), 3)
        ax.set_xticks(range(len(kinds)), [_store_tick(kind) for kind in kinds], fontsize=8)
        ax.set_ylabel("per run")
        ax.grid(True, axis="y", alpha=0.3)
    figure.suptitle(f"Each account funded with {ledger.units(deposit)} units (mean over "
                    f"{seeds} seeds; dots: seeds)", fontsize=11)
    return figure


def _stacked_bars(ax: Axes, means: pd.DataFrame, prefix: str) -> None:
    """One bar per row of ``means``, one segment per column that is not zero
    everywhere, labelled by the column less ``prefix``; a row with no runs
    stacks nothing."""
    bottom = np.zeros(len(means))
    for column in means.columns:
        values = means[column].fillna(0).to_numpy()
        if values.any():
            ax.bar(range(len(means)), values, bottom=bottom, label=column.removeprefix(prefix))
            bottom += values


def _seed_dots(ax: Axes, xs: Sequence[float], runs: Sequence[pd.Series], size: float) -> None:
    """Each run of a bar as a black dot on it."""
    for x, values in zip(xs, runs, strict=True):
        ax.plot([x] * len(values), values, "o", color="black", markersize=size)


def _store_tick(kind: str) -> str:
    """A store kind on two lines, less the family's name: ``variants`` above
    the variant's name."""
    return kind.replace("tollgate.", "").replace(".", "\n", 1)
