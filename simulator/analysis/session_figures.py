"""The session-counter notebook's figures (``07_session_counters``), drawn from
what ``simulator.analysis.sessions`` computed: the cost of lost replies
against the reply-loss rate and the driver's retries, the in-memory twin
beside Redis on the same sessions, and the cleanup race over virtual time.
Nothing here computes a verdict; each function only draws one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from simulator.analysis import sessions
from simulator.analysis.spread import plot_band


def plot_retry_damage(table: pd.DataFrame,
                      metrics: Sequence[str] = sessions.RETRY_METRICS) -> Figure:
    """One row of panels per store, one panel per metric: the metric against
    the reply-loss rate, one band per number of driver retries (median over
    seeds, shaded from the 10th to the 90th percentile)."""
    stores = sorted(table[sessions.STORE].unique())
    figure = Figure(figsize=(4.6 * len(metrics), 3.8 * len(stores)), layout="constrained")
    axes = np.atleast_2d(figure.subplots(len(stores), len(metrics), squeeze=False))
    for row, store in zip(axes, stores, strict=True):
        of_store = table[table[sessions.STORE] == store]
        for ax, metric in zip(row, metrics, strict=True):
            bands = sessions.retry_bands(of_store, metric)
            for retries, rows in bands.groupby(sessions.DRIVER_RETRIES, sort=True):
                plot_band(ax, rows, sessions.REPLY_LOSS, label=_retries_label(int(retries)))
            ax.xaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=None))
            ax.set_xlabel("reply loss (share of replies lost)")
            ax.set_ylabel(f"{sessions.METRIC_NAMES.get(metric, metric)} per run")
            ax.set_title(f"{store}", fontsize=9)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8, loc="upper left", title="driver", title_fontsize=8)
    figure.suptitle("What lost replies cost as the driver re-sends (median over seeds; band: "
                    "10th–90th percentile over seeds)", fontsize=11)
    return figure


def _retries_label(retries: int) -> str:
    if retries == 0:
        return "no retries"
    if retries == 10:
        return "10 retries (redis-py's default)"
    return f"{retries} retr{'y' if retries == 1 else 'ies'}"


def plot_twin(comparison: pd.DataFrame, table: pd.DataFrame) -> Figure:
    """One panel per metric of ``twin_comparison``: per session lifetime, the
    reference store's and the twin's median over seeds as bars, each seed
    as a dot on its bar (the same seed ran the same sessions on both)."""
    reference, twin = comparison.attrs["reference"], comparison.attrs["twin"]
    metrics = list(dict.fromkeys(comparison["metric"]))
    lifetimes = list(dict.fromkeys(comparison[sessions.LIFETIME]))
    figure = Figure(figsize=(3.6 * len(metrics), 4.2), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(metrics), squeeze=False)[0])
    width = 0.38
    for ax, metric in zip(axes, metrics, strict=True):
        rows = comparison[comparison["metric"] == metric].set_index(sessions.LIFETIME)
        for offset, (kind, column, colour) in zip(
                (-width / 2, width / 2), ((reference, "reference_median", "tab:red"),
                                          (twin, "twin_median", "tab:blue")), strict=True):
            xs = np.arange(len(lifetimes)) + offset
            ax.bar(xs, [rows.loc[lifetime, column] for lifetime in lifetimes], width,
                   color=colour, alpha=0.6, label=kind)
            for x, lifetime in zip(xs, lifetimes, strict=True):
                runs = table[(table[sessions.STORE] == kind)
                             & (table[sessions.LIFETIME] == lifetime)]
                ax.plot([x] * len(runs), runs[metric], "o", color="black", markersize=3)
        ax.set_xticks(range(len(lifetimes)), [f"lifetime\n{lifetime}" for lifetime in lifetimes],
                      fontsize=8)
        ax.set_ylabel(f"{sessions.METRIC_NAMES.get(metric, metric)} per run", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    figure.suptitle(f"The in-memory twin beside {reference} on the same sessions (bars: median "
                    "over seeds; dots: each seed)", fontsize=11)
    return figure


def plot_race(series: pd.DataFrame,
              metrics: Sequence[str] = sessions.RACE_METRICS) -> Figure:
    """One panel per series of the cleanup race against virtual hours, one
    band per store and cleanup delay (median over seeds, shaded from the 10th
    to the 90th percentile)."""
    figure = Figure(figsize=(6.2 * len(metrics), 4.2), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(metrics), squeeze=False)[0])
    for ax, metric in zip(axes, metrics, strict=True):
        bands = sessions.race_bands(series, metric)
        for (store, cleanup), rows in bands.groupby([sessions.STORE, sessions.CLEANUP_AFTER],
                                                    sort=True):
            plot_band(ax, rows, sessions.HOURS, label=f"{store}, cleanup {cleanup} after the end",
                      marker="")
        _hour_axis(ax, series)
        ax.set_ylabel(sessions.METRIC_NAMES.get(metric, metric))
        ax.legend(fontsize=8, loc="upper left")
    figure.suptitle("The cleanup race over virtual time (median over seeds; band: 10th–90th "
                    "percentile over seeds)", fontsize=11)
    return figure


def _hour_axis(ax: Axes, series: pd.DataFrame) -> None:
    hours = series[sessions.HOURS]
    ax.set_xlim(hours.min(), hours.max())
    ax.set_xticks(np.arange(0, hours.max() + 1, 12 if hours.max() > 24 else 2))
    ax.set_xlabel("virtual time (hours)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
