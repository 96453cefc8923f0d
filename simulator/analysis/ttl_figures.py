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

from simulator.analysis.spread import line_styles, plot_band, seed_bands
from simulator.analysis.ttl import (
    LEAK_COLUMN,
    OVERSHOOT_COLUMN,
    TTL_SECONDS,
    RequestDurations,
    TtlRecommendation,
    duration_exceedance,
    format_seconds,
)

# ------------------------------------------------------------------ the costs against the TTL


def recommended_words(recommendation: TtlRecommendation) -> str:
    """``recommended: 8 s–30 s`` (one TTL: ``recommended: 8 s``); "" when none."""
    if not recommendation.found:
        return ""
    low, high = recommendation.low_seconds, recommendation.high_seconds
    assert low is not None and high is not None
    span = format_seconds(low) if low == high else f"{format_seconds(low)}–{format_seconds(high)}"
    return f"recommended: {span}"


def _mark_range(ax: Axes, recommendation: TtlRecommendation, label: bool = True) -> None:
    """Shade the recommended range and write it. A range of one TTL has no
    width on the axis: it is shaded a third of the way to its neighbours
    (a factor of 1.15 each side on the log axis), so it reads as a range."""
    if not recommendation.found:
        return
    low, high = recommendation.low_seconds, recommendation.high_seconds
    assert low is not None and high is not None
    shaded = (low / 1.15, high * 1.15) if low == high else (low, high)
    ax.axvspan(*shaded, color="tab:green", alpha=0.15, linewidth=0,
               label="recommended TTL range" if label else None)
    for edge in (low, high):
        ax.axvline(edge, color="tab:green", linewidth=1)
    ax.annotate(recommended_words(recommendation), xy=((low * high) ** 0.5, 0.5),
                xycoords=("data", "axes fraction"), ha="center", va="center", rotation=90,
                fontsize=8, color="darkgreen",
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "linewidth": 0})


def _mark_quantiles(ax: Axes, quantiles: Mapping[str, float]) -> None:
    """Dotted vertical lines at request-duration quantiles, named at the top."""
    left, right = ax.get_xlim()
    for name, seconds in quantiles.items():
        if not left <= seconds <= right:
            continue
        ax.axvline(seconds, color="grey", linestyle=":", linewidth=1)
        # On a white ground above the curves: a marker or a line must not hide it.
        ax.annotate(f"{name} duration", xy=(seconds, 1), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", rotation=90, va="top",
                    fontsize=7, color="dimgrey", zorder=5,
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.85,
                          "linewidth": 0})


def _ttl_axis(ax: Axes, ttls: Sequence[float]) -> None:
    """A log axis ticked at the tested TTLs, each named (a decade's ticks
    alone named two or three of them)."""
    ax.set_xscale("log")
    ax.set_xlim(min(ttls) / 1.3, max(ttls) * 1.3)
    ax.set_xticks(list(ttls), [format_seconds(ttl) for ttl in ttls],
                  rotation=45 if len(ttls) > 8 else 0)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("reservation TTL")
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
    for limit, color, label in limit_lines(recommendation):
        ax.axhline(limit, color=color, linestyle="--", linewidth=1.2, label=label)
    _ttl_axis(ax, ttls)
    _mark_range(ax, recommendation)
    # Linear up to the limits, logarithmic above: the decision happens near the
    # limits, while a long TTL's leak denials can be tens of times larger.
    threshold = max(recommendation.overshoot_limit, recommendation.leak_limit, 0.1)
    ax.set_yscale("symlog", linthresh=threshold, linscale=2)
    highest = max([*overshoot["high"], *leaks["high"], threshold])
    ax.set_ylim(0, highest * 1.5)
    ax.set_yticks(cost_ticks(threshold, highest * 1.5))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    _mark_quantiles(ax, quantiles)
    ax.set_ylabel(f"cost (%; linear below {threshold:.3g}%, logarithmic above)")
    verdict = (f"shaded: {recommended_words(recommendation)}" if recommendation.found
               else "no TTL meets both limits")
    ax.set_title(f"The trade-off: overshoot falls, leak denials rise as the TTL grows\n"
                 f"(median and 10th–90th percentile over seeds; {verdict})", fontsize=11)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


def limit_lines(recommendation: TtlRecommendation) -> list[tuple[float, str, str]]:
    """The limits to draw, ``(value, colour, label)``: one line when both are
    equal (two lines on top of each other read as one, mislabelled)."""
    overshoot, leak = recommendation.overshoot_limit, recommendation.leak_limit
    if overshoot == leak:
        return [(overshoot, "black", f"limit of both costs ({overshoot:.3g}%)")]
    return [(overshoot, "tab:orange", f"overshoot limit ({overshoot:.3g}%)"),
            (leak, "tab:blue", f"leak-denial limit ({leak:.3g}%)")]


def cost_ticks(threshold: float, top: float) -> list[float]:
    """Round ticks for the trade-off's cost axis: a few on its linear part,
    then 1-2-5 per decade up to ``top``."""
    step = 10 ** np.floor(np.log10(threshold / 2))
    for factor in (1, 2, 5, 10):
        if threshold / (step * factor) <= 4:
            step *= factor
            break
    linear = [float(value) for value in np.arange(0, threshold + step / 2, step)]
    decades = [float(mantissa * 10 ** exponent) for exponent in range(-3, 6)
               for mantissa in (1, 2, 5)]
    above = [value for value in decades if linear[-1] * 1.5 < value <= top]
    return [round(value, 10) for value in [*linear, *above]]


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
    # A style each: two TTLs that miscount alike draw one curve, and both must show.
    for (label, rows), style in zip(series.groupby("example", sort=False), line_styles(),
                                    strict=False):
        left.plot(rows["time_s"], rows["expired_while_running_percent_of_cap"], label=label,
                  **style)
        right.plot(rows["time_s"], rows["leaked_percent_of_cap"], label=label, **style)
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
