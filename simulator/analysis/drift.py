"""Conservation drift over time, per cause (notebook ``03_conservation_drift``).

Conservation drift is the store's recorded spend minus the true spend
(``docs/metrics.md``): negative when spend never reached the record,
positive when it was recorded twice. The oracle splits it over
``DRIFT_CAUSES`` at every metrics sample. The notebook shows three
mechanisms, each with its own sweep over ``data/scenarios/drift-base.toml``
(``MECHANISMS``): lost settlements (requests lost on their way to the
server), duplicate execution (the driver re-sends a command whose reply was
lost, and a settle runs twice) and server data loss (restarts under each
persistence model). This module

* runs those sweeps (``run_drift_sweeps``) and reads each back as its runs'
  final numbers (``DriftRuns.results``, with the drift as a share of the true
  spend) and their drift time series (``DriftRuns.series``: the aggregate
  row of each sample, with the point's parameter and the time in seconds);
* draws drift over time, stacked by cause, positive and negative parts
  apart (``drift_over_time_figure``), and the final drift by persistence
  model (``persistence_figure``);
* checks that each mechanism produces its cause, and only where expected
  (``cause_checks``): the evidence the notebook prints.

Everything here is deterministic: no randomness, only the runs' results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.analysis import lab_path
from simulator.analysis.overshoot import CAUSE_COLORS
from simulator.analysis.spread import seed_bands
from simulator.families.axond_budget.causes import SUBJECT_DRIFT_CAUSES as DRIFT_CAUSES
from simulator.sweeps import (
    Sweep,
    load_sweep,
    read_metrics,
    read_results,
    results_dir_for,
    run_sweep,
)
from stores.quantities import parse_rate_per_second


@dataclass(frozen=True)
class Mechanism:
    """One way the record strays from the truth, and the sweep that shows it."""

    sweep_file: str
    cause: str
    """The ``DRIFT_CAUSES`` entry it produces."""
    parameter: str
    """The scenario field its sweep varies to turn it up."""
    label: str
    """That parameter, as a figure says it."""


MECHANISMS: dict[str, Mechanism] = {
    "lost_settlements": Mechanism(
        "drift-lost-settlements.toml", "settlement_lost", "network.request_loss",
        "request-loss rate (fraction of commands lost)"),
    "duplicate_execution": Mechanism(
        "drift-duplicate-execution.toml", "duplicate_execution", "network.retries.count",
        "driver retries after a timeout"),
    "server_data_loss": Mechanism(
        "drift-persistence.toml", "server_data_loss", "server.persistence",
        "server persistence model"),
}
"""The three mechanisms the notebook shows, by name."""

PERSISTENCE_ORDER = ("none", "rdb", "aof-everysec", "aof-always")
"""Persistence models from keeping nothing to keeping every write."""

RESTART_RATE = "faults.server_restart.rate"

DRIFT_COLORS: dict[str, str] = {
    "settlement_in_flight": "#ccb974",
    **{cause: CAUSE_COLORS[cause] for cause in DRIFT_CAUSES if cause in CAUSE_COLORS},
}
"""One colour per drift cause (shared causes keep the overshoot notebook's colours)."""

MICRODOLLARS_PER_DOLLAR = 1_000_000


def drift_column(cause: str) -> str:
    """The metrics-series column of one cause's drift, in micro-dollars."""
    return f"drift_{cause}_microdollars"


def final_drift_column(cause: str) -> str:
    """The summary column of one cause's drift at the end of the run."""
    return f"conservation_drift_by_{cause}_microdollars"


def share_column(cause: str) -> str:
    """The column ``DriftRuns.results`` adds: one cause's final drift as % of true spend."""
    return f"drift_{cause}_percent_of_true_spend"


TOTAL_SHARE = "drift_percent_of_true_spend"
"""Column: the whole final drift as % of the true spend."""


@dataclass(frozen=True)
class DriftRuns:
    """One mechanism's sweep, read back."""

    mechanism: Mechanism
    results: pd.DataFrame
    """One row per run: the summary, plus the drift as % of true spend."""
    series: pd.DataFrame
    """One row per run and sample: the aggregate drift by cause over time."""


# ------------------------------------------------------------------ the sweeps


def drift_sweeps(mechanisms: Iterable[str] = tuple(MECHANISMS),
                 seeds: int | list[int] | None = None,
                 set_fields: Mapping[str, Any] | None = None,
                 vary: Mapping[str, Mapping[str, Any]] | None = None,
                 sweeps_dir: str | Path | None = None) -> dict[str, Sweep]:
    """The sweep of each mechanism, from its file, adjusted as a notebook's
    parameters ask: ``seeds``, ``set_fields`` (at every point of every sweep)
    and ``vary`` (by mechanism name: the values to vary instead of the file's)."""
    folder = Path(sweeps_dir) if sweeps_dir is not None else lab_path("data", "sweeps")
    unknown = set(vary or {}) - set(MECHANISMS)
    if unknown:
        raise KeyError(f"vary: no mechanism {', '.join(sorted(unknown))}; "
                       f"known: {', '.join(MECHANISMS)}")
    sweeps = {}
    for name in mechanisms:
        if name not in MECHANISMS:
            raise KeyError(f"no mechanism {name!r}; known: {', '.join(MECHANISMS)}")
        sweeps[name] = load_sweep(folder / MECHANISMS[name].sweep_file, seeds=seeds,
                                  set_fields=dict(set_fields or {}),
                                  vary=dict((vary or {}).get(name, {})))
    return sweeps


def run_drift_sweeps(sweeps: Mapping[str, Sweep], results_dir: str | Path,
                     workers: int | None = None, progress: bool = True) -> dict[str, DriftRuns]:
    """Run every sweep (what is not done yet) and read each back. A failed
    run stops here, naming it."""
    runs = {}
    for name, sweep in sweeps.items():
        out = results_dir_for(sweep, results_dir)
        run_sweep(sweep, out, workers=workers, progress=progress).raise_for_failures()
        results = with_drift_shares(read_results(out))
        runs[name] = DriftRuns(MECHANISMS[name], results,
                               drift_series(read_metrics(out), results, sweep.parameters))
    return runs


def with_drift_shares(results: pd.DataFrame) -> pd.DataFrame:
    """The results with each cause's final drift, and the whole, as % of the
    true spend (``share_column``, ``TOTAL_SHARE``): comparable across runs
    that spent different amounts."""
    frame = results.copy()
    true_spend = frame["true_spend_microdollars_total"].astype(float)
    true_spend = true_spend.where(true_spend > 0)
    for cause in DRIFT_CAUSES:
        frame[share_column(cause)] = 100.0 * frame[final_drift_column(cause)] / true_spend
    frame[TOTAL_SHARE] = 100.0 * frame["conservation_drift_microdollars_total"] / true_spend
    return frame


def drift_series(metrics: pd.DataFrame, results: pd.DataFrame,
                 parameters: Sequence[str]) -> pd.DataFrame:
    """The aggregate rows of the subject scope (the store's whole record
    against the whole truth), with each run's ``parameters`` joined on by
    point and the time in seconds (``time_s``)."""
    rows = metrics
    if "namespace" in rows.columns:
        rows = rows[rows["namespace"] == "*"]
    if "scope" in rows.columns:
        rows = rows[rows["scope"] == "subject"]
    keep = [name for name in parameters if name in results.columns]
    points = results[["point", *keep]].drop_duplicates("point")
    series = rows.merge(points, on="point", how="left", validate="many_to_one")
    series["time_s"] = series["time_us"] / 1e6
    return series.sort_values(["point", "seed", "time_us"]).reset_index(drop=True)


def series_of(series: pd.DataFrame, parameter: str, value: Any, seed: int | None = None,
              where: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The drift over time of the runs at ``parameter == value`` (and at every
    ``where`` column's value): one seed's run, or (``seed=None``) the mean over
    seeds at each sample time. Columns: ``time_s``,
    ``conservation_drift_microdollars`` and one per drift cause."""
    conditions = {parameter: value, **(where or {})}
    rows = series
    for column, wanted in conditions.items():
        rows = rows[rows[column] == wanted]
    if seed is not None:
        rows = rows[rows["seed"] == seed]
    if rows.empty:
        which = ", ".join(f"{column} = {wanted!r}" for column, wanted in conditions.items())
        raise KeyError(f"no runs with {which}" + (f" and seed {seed}" if seed is not None
                                                  else ""))
    columns = ["conservation_drift_microdollars", *(drift_column(c) for c in DRIFT_CAUSES)]
    return rows.groupby("time_s", sort=True)[columns].mean().reset_index()


# ------------------------------------------------------------------ figures


def plot_drift_over_time(ax: Axes, one: pd.DataFrame, title: str) -> None:
    """Drift by cause over time as stacked areas, in dollars: the causes that
    added spend above zero, those that lost it below, each stacked on its own
    side, and the total drift as a black line."""
    time = one["time_s"].to_numpy()
    dollars = {cause: one[drift_column(cause)].to_numpy(dtype=float) / MICRODOLLARS_PER_DOLLAR
               for cause in DRIFT_CAUSES}
    present = [cause for cause in DRIFT_CAUSES if np.any(dollars[cause] != 0)]
    for sign in (1, -1):
        parts = [np.clip(sign * dollars[cause], 0, None) * sign for cause in present]
        if parts:
            ax.stackplot(time, *parts, colors=[DRIFT_COLORS.get(c) for c in present],
                         labels=[c.replace("_", " ") if sign == 1 else "_" for c in present],
                         alpha=0.85, linewidth=0)
    total = one["conservation_drift_microdollars"].to_numpy(dtype=float) / MICRODOLLARS_PER_DOLLAR
    ax.plot(time, total, color="black", linewidth=1.2, label="total drift")
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("drift (US$, recorded − true)")
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)


def drift_over_time_figure(runs: DriftRuns, values: Sequence[Any] | None = None,
                           seed: int | None = None, where: Mapping[str, Any] | None = None,
                           title: str | None = None) -> Figure:
    """One panel per value of the mechanism's parameter (``values``, default:
    every value the sweep ran), drift by cause over time, one y scale for all.
    ``seed``: one run's series; None: the mean over seeds. ``where``: fix the
    sweep's other parameters (e.g. the restart rate), so runs that differ in
    them are never averaged together."""
    parameter = runs.mechanism.parameter
    present = runs.series[parameter].dropna().unique().tolist()
    chosen = list(values) if values is not None else _ordered(present, parameter)
    figure = Figure(figsize=(4.2 * len(chosen), 3.8), layout="constrained")
    axes = figure.subplots(1, len(chosen), squeeze=False, sharey=True)[0]
    short = runs.mechanism.label.split(" (")[0]
    for ax, value in zip(axes, chosen, strict=True):
        plot_drift_over_time(ax, series_of(runs.series, parameter, value, seed, where),
                             title=f"{short}: {value}")
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels and not label.startswith("_"):
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, title="drift cause", loc="outside right center")
    which = f"seed {seed}" if seed is not None else "mean over seeds"
    fixed = "".join(f", {column} = {value}" for column, value in (where or {}).items())
    figure.suptitle(f"{title or 'Conservation drift over time'} ({which}{fixed})")
    return figure


def persistence_figure(runs: DriftRuns) -> Figure:
    """The final drift by persistence model: left, what restarts took away
    (``server_data_loss``) as % of the true spend, one series per restart rate,
    median over seeds with a 10th-90th percentile bar; right, the mean final
    drift of every cause at the highest restart rate, stacked."""
    results = runs.results.copy()
    models = [m for m in PERSISTENCE_ORDER if m in set(results["server.persistence"])]
    results["model_index"] = results["server.persistence"].map(
        {model: index for index, model in enumerate(models)})
    rate_of = _restart_rate_per_minute(results)
    figure = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    rates = sorted(rate_of.unique()) if rate_of is not None else [None]
    for offset, rate in zip(np.linspace(-0.12, 0.12, len(rates)), rates, strict=True):
        rows = results if rate is None else results[rate_of == rate]
        bands = seed_bands(rows, "model_index", share_column("server_data_loss"))
        x = bands["model_index"] + offset
        left.errorbar(x, bands["median"], yerr=[bands["median"] - bands["low"],
                                                  bands["high"] - bands["median"]],
                      marker="o", capsize=3, linestyle="none",
                      label="restarts: " + (f"{rate:g}/min" if rate is not None else "as run"))
    left.set_xticks(range(len(models)))
    left.set_xticklabels(models)
    left.axhline(0, color="grey", linewidth=0.6)
    left.set_xlabel("server persistence model")
    left.set_ylabel("drift from server data loss (% of true spend)")
    left.set_title("What restarts took from the record", fontsize="medium")
    left.grid(alpha=0.3)
    left.legend(fontsize="small")

    top = results if rate_of is None else results[rate_of == max(rates)]
    means = top.groupby("model_index")[[share_column(c) for c in DRIFT_CAUSES]].mean()
    bottom_pos = np.zeros(len(means))
    bottom_neg = np.zeros(len(means))
    for cause in DRIFT_CAUSES:
        values = means[share_column(cause)].to_numpy(dtype=float)
        if not np.any(values != 0):
            continue
        base = np.where(values >= 0, bottom_pos, bottom_neg)
        right.bar(means.index, values, bottom=base, width=0.6, color=DRIFT_COLORS.get(cause),
                  label=cause.replace("_", " "))
        bottom_pos += np.clip(values, 0, None)
        bottom_neg += np.clip(values, None, 0)
    right.set_xticks(range(len(models)))
    right.set_xticklabels(models)
    right.axhline(0, color="grey", linewidth=0.6)
    right.set_xlabel("server persistence model")
    right.set_ylabel("final drift (% of true spend)")
    at = f"{max(rates):g} restarts/min" if rate_of is not None else "as run"
    right.set_title(f"Every cause, mean over seeds ({at})", fontsize="medium")
    right.grid(axis="y", alpha=0.3)
    right.legend(fontsize="small", title="drift cause")
    figure.suptitle("Final conservation drift by server persistence model")
    return figure


def highest_restart_rate(runs: DriftRuns) -> str | None:
    """The highest server restart rate the persistence sweep ran (as written,
    e.g. ``"12/m"``), or None when its runs did not vary it."""
    rates = _restart_rate_per_minute(runs.results)
    if rates is None:
        return None
    return runs.results.loc[rates.idxmax(), RESTART_RATE]


def _restart_rate_per_minute(results: pd.DataFrame) -> pd.Series | None:
    if RESTART_RATE not in results.columns:
        return None
    return results[RESTART_RATE].map(lambda text: parse_rate_per_second(text) * 60)


def _ordered(values: list[Any], parameter: str) -> list[Any]:
    if parameter == "server.persistence":
        return [m for m in PERSISTENCE_ORDER if m in values] + sorted(
            v for v in values if v not in PERSISTENCE_ORDER)
    return sorted(values)


# ------------------------------------------------------------------ checks


def final_drift_table(runs: DriftRuns) -> pd.DataFrame:
    """The mean final drift of each cause (% of true spend) at each value of
    the mechanism's parameter (and restart rate, for the persistence sweep),
    with how many seeds were averaged."""
    results = runs.results
    by = [runs.mechanism.parameter]
    if RESTART_RATE in results.columns and runs.mechanism.parameter != RESTART_RATE:
        by.append(RESTART_RATE)
    columns = [TOTAL_SHARE, *(share_column(c) for c in DRIFT_CAUSES)]
    grouped = results.groupby(by, sort=True)
    table = grouped[columns].mean()
    table["runs"] = grouped.size()
    table = table.sort_values(by, key=_sort_key).reset_index()
    return table.rename(columns={share_column(c): c for c in DRIFT_CAUSES}
                        | {TOTAL_SHARE: "total"})


def _sort_key(column: pd.Series) -> pd.Series:
    """Persistence models from none to aof-always, rates by their value (not
    as text, where "12/m" sorts before "6/m"), anything else as it is."""
    if column.name == "server.persistence":
        order = {model: index for index, model in enumerate(PERSISTENCE_ORDER)}
        return column.map(lambda model: order.get(model, len(order)))
    if column.name == RESTART_RATE:
        return column.map(parse_rate_per_second)
    return column


def cause_checks(runs: Mapping[str, DriftRuns]) -> pd.DataFrame:
    """Whether each mechanism shows its cause where expected, from the final
    drift of every run (micro-dollars, summed over seeds):

    * lost settlements: no ``settlement_lost`` drift without request loss,
      some (negative) at the highest loss;
    * duplicate execution: no ``duplicate_execution`` drift without retries,
      some (positive) with the most retries;
    * server data loss: some with persistence ``none``, none with
      ``aof-always``, and ``none`` loses at least as much as any other model.

    One row per check: what was expected, what was seen, and ``holds``."""
    rows = []
    for name, mechanism_runs in runs.items():
        mechanism = mechanism_runs.mechanism
        results = mechanism_runs.results
        column = final_drift_column(mechanism.cause)
        by_value = results.groupby(mechanism.parameter)[column].sum()
        if name == "server_data_loss":
            lost = {model: by_value.get(model) for model in PERSISTENCE_ORDER}
            if lost["none"] is not None:
                rows.append(_check(name, mechanism.cause, "persistence none loses spend",
                                   lost["none"], lost["none"] < 0))
                others = [v for m, v in lost.items() if m != "none" and v is not None]
                rows.append(_check(name, mechanism.cause,
                                   "none loses at least as much as any other model",
                                   lost["none"], all(lost["none"] <= v for v in others)))
            if lost["aof-always"] is not None:
                rows.append(_check(name, mechanism.cause, "aof-always loses nothing",
                                   lost["aof-always"], lost["aof-always"] == 0))
            continue
        values = sorted(by_value.index)
        low, high = values[0], values[-1]
        sign = -1 if mechanism.cause == "settlement_lost" else 1
        direction = "negative" if sign < 0 else "positive"
        rows.append(_check(name, mechanism.cause, f"none at {mechanism.parameter} = {low}",
                           by_value[low], by_value[low] == 0))
        rows.append(_check(name, mechanism.cause,
                           f"{direction} at {mechanism.parameter} = {high}",
                           by_value[high], sign * by_value[high] > 0))
    return pd.DataFrame(rows, columns=["mechanism", "cause", "expected", "drift_microdollars",
                                       "holds"])


def _check(mechanism: str, cause: str, expected: str, seen: float, holds: bool
           ) -> dict[str, Any]:
    return {"mechanism": mechanism, "cause": cause, "expected": expected,
            "drift_microdollars": int(seen), "holds": bool(holds)}
