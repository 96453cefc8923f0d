"""Notebook 10's figures: a shard failover's cost against the replica's lag,
and the busiest shard's share against the subjects per namespace."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter

from simulator.analysis.shards import (
    BUSIEST,
    FAILOVER_DAMAGE,
    LAG,
    NAMESPACES,
    SHARD,
    STORE,
    SUBJECTS,
    failover_bands,
)
from simulator.analysis.spread import plot_band


def plot_failover(table: pd.DataFrame, family: str) -> Figure:
    """One panel per metric of ``family``'s damage: its median over seeds (a
    band from the 10th to the 90th percentile) against the promoted replica's
    lag, one line per shard the failover hit."""
    metrics = FAILOVER_DAMAGE[family]
    figure = Figure(figsize=(4.2 * len(metrics), 3.6), layout="constrained")
    lags = sorted(table[LAG].unique())
    for ax, (metric, label) in zip(figure.subplots(1, len(metrics)), metrics, strict=True):
        bands = failover_bands(table, metric)
        for shard, rows in bands.groupby(SHARD, sort=True):
            plot_band(ax, rows, LAG, f"shard {shard}")
        ax.set_xscale("symlog", linthresh=0.1)
        ax.xaxis.set_major_locator(FixedLocator(lags))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.set_xlabel("replica lag (s)")
        ax.set_ylabel(label)
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    figure.axes[0].legend(title="failover of", fontsize=8)
    figure.suptitle(f"{family}: one shard's failover, against its replica's lag")
    return figure


def plot_hot_shard(hot: pd.DataFrame, shards: int = 3) -> Figure:
    """One panel per namespace count: the busiest shard's share of the
    commands against the subjects, one line per store, the even spread dashed."""
    counts = sorted(hot[NAMESPACES].unique())
    figure = Figure(figsize=(4.2 * len(counts), 3.6), layout="constrained")
    axes = figure.subplots(1, len(counts), sharey=True, squeeze=False)[0]
    for ax, namespaces in zip(axes, counts, strict=True):
        for store, rows in hot[hot[NAMESPACES] == namespaces].groupby(STORE, sort=True):
            ax.plot(rows[SUBJECTS], rows[BUSIEST], marker="o", label=store.split(".")[-1])
        ax.axhline(1 / shards, linestyle="--", color="grey", label=f"even ({shards} shards)")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("subjects in all")
        ax.set_title(f"{namespaces} namespace(s)", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("busiest shard's share of commands")
    axes[0].legend(fontsize=8)
    figure.suptitle("How hot the busiest shard runs: v1 spreads subjects, v2 keeps a "
                    "namespace on one shard")
    return figure
