"""The lease-sizing notebook's figures (``06_sizing_concurrency_leases``),
drawn from what ``simulator.analysis.leases`` computed: the simulated denial
share beside the Erlang-B curve, the costs of a lease TTL with their seed
bands, and the recommended (``max_in_flight``, TTL) region. Nothing here
computes a verdict; each function only draws one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, NullLocator

from simulator.analysis import leases
from simulator.analysis.spread import line_styles, plot_band
from simulator.analysis.ttl import format_seconds

ERROR_BAR_WIDTH = 3
"""Simulated shares are drawn ± this many standard errors: the tolerance of the
lab's Erlang-B anchor."""

COST_AXES = {
    leases.DENIAL_SHARE: "denial share (fraction of arrived requests)",
    leases.LEAKED: "leaked lease-seconds (lease·s per run)",
    leases.EXCESS: "concurrency excess (lease·s above the limit per run)",
}
"""Per cost, its axis label, with the unit."""


# ------------------------------------------------------------------ Erlang-B


def plot_erlang_b(comparison: pd.DataFrame, target_denial_share: float | None = None) -> Figure:
    """``erlang_b_comparison`` output as two panels: the denial share against
    ``max_in_flight`` (one colour per offered load) and against the offered
    load (one colour per limit). The lines are Erlang-B; the markers are the
    simulated means, with bars of ± ``ERROR_BAR_WIDTH`` standard errors."""
    figure = Figure(figsize=(12, 4.6), layout="constrained")
    by_limit, by_load = figure.subplots(1, 2)
    _erlang_panel(by_limit, comparison, group=leases.OFFERED, x=leases.LIMIT,
                  curve=lambda load, limits: [leases.erlang_b(int(c), load) for c in limits],
                  grid=lambda xs: np.arange(min(xs), max(xs) + 1),
                  name=lambda load: f"{load:.3g} Erlangs")
    by_limit.set_xlabel("max_in_flight (slots)")
    # Slots are whole: ticks only at whole numbers (the default put 2.5 slots).
    by_limit.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_limit.set_title("Denials against the limit, per offered load", fontsize=10)
    _erlang_panel(by_load, comparison, group=leases.LIMIT, x=leases.OFFERED,
                  curve=lambda limit, loads: [leases.erlang_b(int(limit), a) for a in loads],
                  grid=lambda xs: np.linspace(min(xs) * 0.9, max(xs) * 1.1, 100),
                  name=lambda limit: f"{int(limit)} slots")
    by_load.set_xlabel("offered load (Erlangs: arrivals/s × mean duration in s)")
    by_load.set_title("Denials against the offered load, per limit", fontsize=10)
    for ax in (by_limit, by_load):
        if target_denial_share is not None:
            ax.axhline(target_denial_share, color="tab:red", linestyle="--", linewidth=1,
                       label=f"target ({target_denial_share:g})")
        ax.set_ylabel("denial share (fraction of arrived requests)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        handles += [Line2D([], [], color="black", label="Erlang-B"),
                    Line2D([], [], color="black", marker="o", linestyle="none",
                           label=f"simulated (mean ± {ERROR_BAR_WIDTH} s.e.)")]
        ax.legend(handles=handles, fontsize=8, loc="best")
    runs = comparison["runs"]
    seeds = f"{runs.min()}" if runs.min() == runs.max() else f"{runs.min()}–{runs.max()}"
    figure.suptitle(f"Simulated denials beside Erlang-B B(c, A) ({seeds} seed(s) per point)",
                    fontsize=11)
    return figure


def _erlang_panel(ax: Axes, comparison: pd.DataFrame, group: str, x: str, curve, grid,
                  name) -> None:
    """One colour per value of ``group``: the Erlang-B curve over ``grid(x values)``
    and the simulated means with their error bars."""
    # Averaged over TTLs: without faults the TTL does not change who is refused.
    points = comparison.groupby([group, x], sort=True).agg(
        simulated=("simulated", "mean"), standard_error=("standard_error", "max")).reset_index()
    for value, rows in points.groupby(group, sort=True):
        xs = rows[x].to_numpy(dtype=float)
        line, = ax.plot(grid(xs), curve(value, grid(xs)), label=name(value))
        ax.errorbar(xs, rows["simulated"], yerr=ERROR_BAR_WIDTH * rows["standard_error"],
                    fmt="o", color=line.get_color(), capsize=3)


# ------------------------------------------------------------------ the lease TTL


def plot_ttl_costs(table: pd.DataFrame, recommendation: leases.RegionRecommendation,
                   offered_erlangs: float | None = None) -> Figure:
    """The three costs against the lease TTL at one offered load (default: the
    heaviest tested), one band per ``max_in_flight``: median over seeds, shaded
    from the 10th to the 90th percentile. The dashed red line is the target;
    a green ring marks a point of the recommended region."""
    load = max(recommendation.offered_erlangs) if offered_erlangs is None else offered_erlangs
    at_load = table[table[leases.OFFERED] == load]
    if at_load.empty:
        raise ValueError(f"no runs at an offered load of {load:.3g} Erlangs")
    region = set(recommendation.region)
    figure = Figure(figsize=(15, 4.4), layout="constrained")
    axes = figure.subplots(1, len(leases.COSTS))
    ttls = sorted(at_load[leases.TTL].unique())
    for ax, cost in zip(axes, leases.COSTS, strict=True):
        bands = leases.point_bands(at_load, cost, x=leases.TTL)
        # A style each: two limits that cost alike draw one curve, and both must show.
        for (limit, rows), style in zip(bands.groupby(leases.LIMIT, sort=True), line_styles(),
                                        strict=False):
            plot_band(ax, rows, leases.TTL, label=f"{int(limit)} slots", **style)
            chosen = rows[[(int(limit), float(t)) in region for t in rows[leases.TTL]]]
            ax.plot(chosen[leases.TTL], chosen["median"], "o", markersize=11,
                    markerfacecolor="none", markeredgecolor="tab:green", markeredgewidth=2)
        ax.axhline(recommendation.targets.of(cost), color="tab:red", linestyle="--",
                   linewidth=1, label=f"target ({recommendation.targets.of(cost):g})")
        ax.set_xscale("log")
        ax.set_xlim(min(ttls) / 1.3, max(ttls) * 1.3)
        # The tested TTLs as ticks, written as people write durations.
        ax.set_xticks(ttls, [format_seconds(t) for t in ttls])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("lease TTL (s)")
        ax.set_ylabel(COST_AXES[cost])
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], marker="o", linestyle="none", markersize=9,
                              markerfacecolor="none", markeredgecolor="tab:green",
                              markeredgewidth=2, label="in the recommended region"))
        ax.legend(handles=handles, fontsize=8, loc="best")
    figure.suptitle(f"What the lease TTL costs at {load:.3g} Erlangs (median over seeds; band: "
                    "10th–90th percentile over seeds)", fontsize=11)
    return figure


# ------------------------------------------------------------------ the region


def plot_region(recommendation: leases.RegionRecommendation) -> Figure:
    """Every tested (TTL, ``max_in_flight``) pair as a cell: green when
    recommended, grey otherwise, written with the costs whose target its
    worst seed missed at some offered load."""
    pairs = recommendation.pairs
    ttls = sorted(pairs[leases.TTL].unique())
    limits = sorted(pairs[leases.LIMIT].unique())
    cells = np.full((len(limits), len(ttls)), np.nan)
    figure = Figure(figsize=(max(6.0, 1.1 * len(ttls) + 3), max(3.5, 0.5 * len(limits) + 2)),
                    layout="constrained")
    ax = figure.subplots()
    misses = _misses(recommendation)
    for row in pairs.itertuples(index=False):
        limit, ttl = getattr(row, leases.LIMIT), getattr(row, leases.TTL)
        i, j = limits.index(limit), ttls.index(ttl)
        cells[i, j] = 1.0 if row.recommended else 0.0
        text = "✓" if row.recommended else "\n".join(misses.get((limit, ttl), ["untested load"]))
        ax.text(j, i, text, ha="center", va="center", fontsize=7)
    colours = ListedColormap(["lightgrey", "tab:green"])
    ax.imshow(np.ma.masked_invalid(cells), cmap=colours, vmin=0, vmax=1, aspect="auto",
              origin="lower", alpha=0.6)
    _cell_axis(ax, ttls, limits)
    ax.legend(handles=[Patch(color="tab:green", alpha=0.6, label="recommended"),
                       Patch(color="lightgrey", alpha=0.6, label="misses a target (named)")],
              fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    loads = ", ".join(f"{load:.3g}" for load in recommendation.offered_erlangs)
    verdict = (f"{len(recommendation.region)} recommended pair(s)" if recommendation.found
               else "no tested pair meets every target")
    ax.set_title(f"(max_in_flight, lease TTL): {verdict}\n"
                 f"(worst seed of every point; offered load {loads} Erlangs)", fontsize=10)
    return figure


def _misses(recommendation: leases.RegionRecommendation) -> dict[tuple, list[str]]:
    """Per (limit, TTL) pair, the short names of the costs it missed at some load."""
    misses: dict[tuple, list[str]] = {}
    for cost in leases.COSTS:
        failing = recommendation.failing(cost)
        for pair in sorted(set(zip(failing[leases.LIMIT], failing[leases.TTL], strict=True))):
            misses.setdefault(pair, []).append(leases.COST_NAMES[cost])
    return misses


def _cell_axis(ax: Axes, ttls: Sequence[float], limits: Sequence[int]) -> None:
    ax.set_xticks(range(len(ttls)), [format_seconds(t) for t in ttls])
    ax.set_yticks(range(len(limits)), [str(int(limit)) for limit in limits])
    # White lines between the cells, so neighbouring cells of one colour stay apart.
    ax.set_xticks([j + 0.5 for j in range(len(ttls) - 1)], minor=True)
    ax.set_yticks([i + 0.5 for i in range(len(limits) - 1)], minor=True)
    ax.grid(True, which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("lease TTL (s)")
    ax.set_ylabel("max_in_flight (slots)")
