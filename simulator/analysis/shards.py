"""Notebook 10 (a Redis Cluster's shards): what one shard's failover costs a
store against its replica's lag, and how hot the v2 layout's namespace shard
runs against the subjects per namespace.

The sweeps (``data/sweeps/shard-*.toml``) run a store on a simulated
three-shard cluster. A failover sweep varies the shard a scheduled failover
hits and the promoted replica's lag; a hot-shard sweep varies the subjects
and namespaces of a fault-free fleet. ``shard_table`` reads either one's
results, a row per run, with the point's values as columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.analysis.notebook_sweeps import adjusted_sweep
from simulator.analysis.spread import seed_bands
from simulator.sweeps.design import Sweep

LAG = "lag_s"
SHARD = "shard"
STORE = "store"
SUBJECTS = "subjects"
NAMESPACES = "namespaces"
SEED = "seed"
BUSIEST = "busiest_shard_share"

PARAMETERS = {
    "lags": "faults.schedule.0.lag",
    "shards_hit": "faults.schedule.0.shard",
    "subjects": "workload.keys.subjects",
    "namespaces": "workload.keys.namespaces",
}
"""A notebook's parameters, by the scenario field each varies."""

FAILOVER_DAMAGE: Mapping[str, tuple[tuple[str, str], ...]] = {
    "axond_budget": (("conservation_drift_microdollars_total", "drift (µ$)"),
                     ("cap_overshoot_microdollars_total", "cap overshoot (µ$)"),
                     ("leaked_hold_microdollar_seconds", "leaked holds (µ$·s)")),
    "axond_leases": (("concurrency_excess_lease_seconds", "concurrency excess (lease·s)"),
                     ("leaked_lease_seconds", "leaked leases (lease·s)"),
                     ("false_denials", "false denials")),
}
"""What a failover costs each family, by metric, with its axis label."""


def load_shard_sweep(sweep_file: str | Path, seeds: int | list[int] | None = None,
                     set_fields: Mapping[str, Any] | None = None,
                     **values: Sequence[Any] | None) -> Sweep:
    """A shard sweep as a notebook's parameters adjust it: ``seeds``, other
    fields set at every point, and any of ``PARAMETERS`` varied instead of the
    file's. A relative ``sweep_file`` is inside the lab's checkout."""
    return adjusted_sweep(sweep_file, PARAMETERS, "load_shard_sweep", seeds, set_fields, values)


def shard_table(results: pd.DataFrame, sweep: Sweep) -> pd.DataFrame:
    """A shard sweep's results (``simulator.sweeps.read_results``), a row per
    run, with its point's store, shard hit and lag (seconds), subjects and
    namespaces beside every summary metric. Runs of points the sweep no
    longer has are left out."""
    rows = []
    for point in sweep.points:
        scenario = sweep.scenario_at(point)
        failover = next((fault for fault in scenario.faults.schedule
                         if fault.fault == "failover"), None)
        keys = scenario.workload.keys
        rows.append({"point": point.point_id, STORE: scenario.store,
                     SHARD: None if failover is None else failover.shard,
                     LAG: None if failover is None else failover.lag / 1e6,
                     SUBJECTS: keys.subjects, NAMESPACES: keys.namespaces})
    points = pd.DataFrame(rows)
    kept = results.drop(columns=[column for column in (STORE, SHARD, LAG, SUBJECTS, NAMESPACES)
                                 if column in results.columns])
    table = points.merge(kept, on="point", how="inner")
    return table.sort_values([STORE, NAMESPACES, SUBJECTS, SHARD, LAG, SEED],
                             ignore_index=True, na_position="first")


def failover_bands(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``metric`` over seeds against the lag, per shard hit (median and band)."""
    return seed_bands(table, LAG, metric, by=[SHARD])


def failover_lines(table: pd.DataFrame, family: str) -> list[str]:
    """What the figure shows, in words: per metric, the shard whose failover
    cost the most at the longest lag, against the same shard with no lag."""
    lines = []
    longest = table[LAG].max()
    for metric, label in FAILOVER_DAMAGE[family]:
        medians = table.groupby([SHARD, LAG])[metric].median()
        at_longest = medians.xs(longest, level=LAG)
        worst = at_longest.abs().idxmax()
        no_lag = medians.get((worst, 0.0))
        against = "" if no_lag is None else f", against {no_lag:,.0f} with no lag"
        lines.append(f"{family}: {label}: worst when shard {worst} fails over to a replica "
                     f"{longest:g} s behind, {at_longest[worst]:,.0f} (median of "
                     f"{int(table[SEED].nunique())} seed(s)){against}")
    return lines


def hot_shard_table(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The busiest shard's share of the commands, per store, namespaces and
    subjects, from hot-shard sweeps' tables (medians over seeds)."""
    table = pd.concat(tables, ignore_index=True)
    return (table.groupby([STORE, NAMESPACES, SUBJECTS])[BUSIEST].median()
            .reset_index().sort_values([STORE, NAMESPACES, SUBJECTS], ignore_index=True))


def hot_shard_lines(hot: pd.DataFrame, shards: int = 3) -> list[str]:
    """Per store and namespace count: the busiest shard's share with the most
    subjects, against an even spread (1 / shards)."""
    lines = []
    for (store, namespaces), rows in hot.groupby([STORE, NAMESPACES], sort=True):
        most = rows.loc[rows[SUBJECTS].idxmax()]
        lines.append(f"{store}, {namespaces} namespace(s), {int(most[SUBJECTS])} subjects: "
                     f"the busiest shard runs {most[BUSIEST]:.0%} of the commands "
                     f"(even: {1 / shards:.0%})")
    return lines
