"""The TTL notebook's figures (``02_tuning_the_reservation_ttl``), drawn from
what ``simulator.analysis.ttl`` computed: the costs of a short and of a long
reservation TTL with their seed bands, the trade-off between them with the
recommended range shaded, the request-duration tail against the tested TTLs,
and what the store miscounts over one run. Nothing here computes a verdict;
each function only draws one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from simulator.analysis.spread import plot_band, seed_bands
from simulator.analysis.ttl import (
    LEAK_COLUMN,
    OVERSHOOT_COLUMN,
    TTL_SECONDS,
    RequestDurations,
    TtlRecommendation,
    duration_exceedance,
)

# ------------------------------------------------------------------ the costs against the TTL


def _mark_range(ax: Axes, recommendation: TtlRecommendation, label: bool = True) -> None:
    """Shade the recommended range; edges drawn too, so a one-TTL range still shows."""
    if not recommendation.found:
        return
    low, high = recommendation.low_seconds, recommendation.high_seconds
    ax.axvspan(low, high, color="tab:green", alpha=0.15, linewidth=0,
               label="recommended TTL range" if label else None)
    for edge in (low, high):
        ax.axvline(edge, color="tab:green", linewidth=1)


def _mark_quantiles(ax: Axes, quantiles: Mapping[str, float]) -> None:
    """Dotted vertical lines at request-duration quantiles, named at the top."""
    left, right = ax.get_xlim()
    for name, seconds in quantiles.items():
        if not left <= seconds <= right:
            continue
        ax.axvline(seconds, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"{name} duration", xy=(seconds, 1), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", rotation=90, va="top",
                    fontsize=7, color="grey")


def _ttl_axis(ax: Axes, ttls: Sequence[float]) -> None:
    ax.set_xscale("log")
    ax.set_xlim(min(ttls) / 1.3, max(ttls) * 1.3)
    ax.set_xlabel("reservation TTL (s)")
    ax.grid(True, which="major", alpha=0.3)


def _panels(shares: pd.DataFrame, recommendation: TtlRecommendation,
            quantiles: Mapping[str, float], title: str,
            panels: Sequence[tuple[str, Sequence[tuple[str, str]], tuple[float, str] | None]]
            ) -> Figure:
    """One row of panels against the TTL: each a y label, its (column, label)
    series with seed bands, and a limit to draw with its unit (or None)."""
    figure = Figure(figsize=(5 * len(panels), 4.2), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    ttls = sorted(shares[TTL_SECONDS].unique())
    runs = shares.groupby(TTL_SECONDS).size()
    for ax, (ylabel, series, limit) in zip(axes, panels, strict=True):
        for column, label in series:
            plot_band(ax, seed_bands(shares, TTL_SECONDS, column), TTL_SECONDS, label=label)
        _ttl_axis(ax, ttls)
        _mark_range(ax, recommendation)
        if limit is not None:
            value, unit = limit
            ax.axhline(value, color="tab:red", linestyle="--", linewidth=1,
                       label=f"limit ({value:.3g}% of {unit})")
        _mark_quantiles(ax, quantiles)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="best")
    seeds = (f"{runs.min()}" if runs.min() == runs.max() else f"{runs.min()}–{runs.max()}")
    figure.suptitle(f"{title}\n(median over {seeds} seed(s) per TTL; band: 10th–90th "
                    "percentile over seeds)", fontsize=11)
    return figure


def plot_too_short(shares: pd.DataFrame, recommendation: TtlRecommendation,
                   quantiles: Mapping[str, float]) -> Figure:
    """The cost of a short TTL: premature expiries and the overshoot they cause."""
    return _panels(shares, recommendation, quantiles,
                   "Too short: holds expire under running requests and the cap is overshot", [
        ("premature expiries (% of admitted requests)",
         [("premature_expiries_percent_of_admitted", "holds reclaimed while running")], None),
        ("money whose hold expired early (% of caps)",
         [("premature_expiry_money_percent_of_cap", "held money reclaimed early")], None),
        ("cap overshoot (% of caps)",
         [(OVERSHOOT_COLUMN, "overshoot caused by premature expiry")],
         (recommendation.overshoot_limit, "caps")),
    ])


def plot_too_long(shares: pd.DataFrame, recommendation: TtlRecommendation,
                  quantiles: Mapping[str, float]) -> Figure:
    """The cost of a long TTL: leaked holds, how much they block, the denials they cause."""
    return _panels(shares, recommendation, quantiles,
                   "Too long: holds of crashed requests block the budget until their TTL", [
        ("leaked hold money × time ($·s)",
         [("leaked_hold_dollar_seconds", "leaked hold-seconds")], None),
        ("peak leaked money on one subject (% of its cap)",
         [("leaked_hold_peak_percent_of_cap", "peak leaked share")], None),
        ("denials (% of arrived requests)",
         [("false_denials_percent_of_arrived", "false denials (truth had room)"),
          (LEAK_COLUMN, "denials caused by leaked holds")],
         (recommendation.leak_limit, "arrived")),
    ])


def plot_trade_off(shares: pd.DataFrame, recommendation: TtlRecommendation,
                   quantiles: Mapping[str, float]) -> Figure:
    """Both criteria of the recommendation against the TTL, with their limits."""
    figure = Figure(figsize=(11, 5), layout="constrained")
    ax = figure.subplots()
    ttls = sorted(shares[TTL_SECONDS].unique())
    overshoot = seed_bands(shares, TTL_SECONDS, OVERSHOOT_COLUMN)
    leaks = seed_bands(shares, TTL_SECONDS, LEAK_COLUMN)
    plot_band(ax, overshoot, TTL_SECONDS, "overshoot caused by premature expiry (% of caps)",
              color="tab:orange")
    plot_band(ax, leaks, TTL_SECONDS, "denials caused by leaked holds (% of arrived requests)",
              color="tab:blue")
    # Interleaved dashes: the two limits are often equal and must both stay visible.
    ax.axhline(recommendation.overshoot_limit, color="tab:orange", linestyle=(0, (4, 4)),
               linewidth=1.2, label=f"overshoot limit ({recommendation.overshoot_limit:.3g}%)")
    ax.axhline(recommendation.leak_limit, color="tab:blue", linestyle=(4, (4, 4)),
               linewidth=1.2, label=f"leak-denial limit ({recommendation.leak_limit:.3g}%)")
    _ttl_axis(ax, ttls)
    _mark_range(ax, recommendation)
    _mark_quantiles(ax, quantiles)
    # Linear up to the limits, logarithmic above: the decision happens near the
    # limits, while a long TTL's leak denials can be tens of times larger.
    threshold = max(recommendation.overshoot_limit, recommendation.leak_limit, 0.1)
    ax.set_yscale("symlog", linthresh=threshold, linscale=2)
    ax.set_ylim(bottom=0)
    top = ax.get_ylim()[1]
    ticks = [threshold * m for m in (0, 0.25, 0.5, 0.75, 1, 2, 5, 10, 20, 50, 100, 200, 500)]
    ax.set_yticks([tick for tick in ticks if tick <= top])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel(f"cost (%; linear below {threshold:.3g}%, logarithmic above)")
    verdict = ("shaded: the recommended TTL range" if recommendation.found
               else "no TTL meets both limits")
    ax.set_title(f"The trade-off: overshoot falls, leak denials rise as the TTL grows\n"
                 f"(median and 10th–90th percentile over seeds; {verdict})", fontsize=11)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


# ------------------------------------------------------------------ the duration tail


def plot_duration_tail(durations: RequestDurations, ttl_seconds: Sequence[float],
                       recommendation: TtlRecommendation,
                       quantiles: Mapping[str, float]) -> Figure:
    """The share of requests outliving each TTL: the duration distribution's tail
    ``P(D > t)`` on log-log axes, with the tested TTLs marked."""
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.subplots()
    ttls = sorted(ttl_seconds)
    grid = np.geomspace(min(ttls) / 1.3, max(ttls) * 1.3, 200)
    tail = [duration_exceedance(durations, t) for t in grid]
    ax.plot(grid, tail, color="black", label=f"P(duration > t) for {durations}")
    marks = [duration_exceedance(durations, t) for t in ttls]
    ax.plot(ttls, marks, "o", color="tab:purple", label="tested TTLs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(grid[0], grid[-1])
    positive = [value for value in [*tail, *marks] if value > 0]
    if positive:
        ax.set_ylim(min(positive) / 2, 1.5)
    ax.set_xlabel("t = request duration or reservation TTL (s)")
    ax.set_ylabel("requests running longer than t (fraction of requests)")
    ax.grid(True, which="major", alpha=0.3)
    _mark_range(ax, recommendation)
    _mark_quantiles(ax, quantiles)
    ax.set_title("How many requests outlive a TTL: the request-duration tail", fontsize=11)
    ax.legend(fontsize=8, loc="lower left")
    return figure


# ------------------------------------------------------------------ over one run


def plot_over_time(series: pd.DataFrame) -> Figure:
    """``aggregate_series`` output over virtual time: the money a short TTL stops
    counting too early, and the money a long TTL keeps counting too late."""
    figure = Figure(figsize=(12, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2, sharex=True)
    for label, rows in series.groupby("example", sort=False):
        left.plot(rows["time_s"], rows["expired_while_running_percent_of_cap"], label=label)
        right.plot(rows["time_s"], rows["leaked_percent_of_cap"], label=label)
    left.set_title("running requests the store no longer counts\n(hold expired while running)",
                   fontsize=10)
    right.set_title("leaked holds the store still counts\n(their request died with its replica)",
                    fontsize=10)
    for ax in (left, right):
        ax.set_xlabel("virtual time (s)")
        ax.set_ylabel("money (% of caps)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(title="TTL", fontsize=8)
    seed = series["seed"].iloc[0] if "seed" in series.columns and len(series) else "?"
    figure.suptitle(f"Over one run (seed {seed}): what the store miscounts at three TTLs",
                    fontsize=11)
    return figure
