"""Cap overshoot under faults: how it grows, and why, as replicas crash and
replies are lost (notebook ``01_cap_overshoot_under_faults``).

Each budget store takes its own settings (the v2 layout needs a namespace
cap), so the question is asked with sweeps per store, all over the same base
scenario (``data/scenarios/overshoot-under-faults.toml``): one per fault axis,
the other fault off, each crossed with the store's unavailable policy
(``data/sweeps/overshoot-vs-faults-<axis>-<store>.toml``). This module

* runs those sweeps (``run_overshoot_sweeps``), each into a directory named
  after the sweep and its base fingerprint, so a re-run resumes and a changed
  base never collides with old results;
* reads every run's faults back from its scenario (``point_facts``): the crash
  rate per replica-hour, the reply-loss rate, the unavailable policy and the
  cap, whether the sweep varied them or not;
* normalises overshoot (``normalise``): as a percentage of the summed caps of
  the keys that saw traffic, or in micro-dollars per 1,000 admissions;
* averages each cause of overshoot over seeds (``overshoot_by_cause``) and
  draws the figures: the headline (worst key's overshoot vs fault rate, with
  seed bands), overshoot stacked by cause, the per-replica stores apart (their
  cap is enforced per replica, so their overshoot is by design), and what the
  faults cost in false denials instead;
* states what the data shows (``findings``, ``describe_findings``), computed,
  never assumed.

Fleet-wide stores and per-replica stores are never mixed in one panel.
Everything here is deterministic: no randomness, only the runs' results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.analysis import lab_path
from simulator.analysis.spread import seed_bands
from simulator.families.axond_budget.causes import SUBJECT_CAUSES as CAUSES
from simulator.sweeps import Sweep, load_sweep, read_results, results_dir_for, run_sweep

SWEEP_FILES: dict[str, tuple[str, ...]] = {
    "axond_budget.redis_v1": ("overshoot-vs-faults-crashes-redis-v1.toml",
                              "overshoot-vs-faults-reply-loss-redis-v1.toml"),
    "axond_budget.redis_v2": ("overshoot-vs-faults-crashes-redis-v2.toml",
                              "overshoot-vs-faults-reply-loss-redis-v2.toml"),
    "axond_budget.in_memory": ("overshoot-vs-faults-crashes-in-memory.toml",),
}
"""The sweep files (in ``data/sweeps/``) that ask the question of each store:
one per fault axis, the other fault off (a full crash x reply-loss grid would
spend half its runs on points no figure shows)."""

CRASHES = "crashes_per_replica_hour"
"""Column: each run's replica crash rate, crashes per replica per hour."""

REPLY_LOSS = "reply_loss"
"""Column: each run's reply-loss rate (the fraction of replies lost)."""

POLICY = "on_unavailable"
"""Column: what the store does when it cannot be reached: deny (fail closed) or allow."""

CAP = "subject_cap_microdollars"
"""Column: each run's subject cap."""

FAULT_AXES: dict[str, str] = {
    CRASHES: "replica crash rate (crashes per replica-hour)",
    REPLY_LOSS: "reply-loss rate (fraction of replies lost)",
}
"""The fault axes, with the label their figures use."""

Per = Literal["total_cap", "admissions"]

PER_LABEL: dict[str, str] = {
    "total_cap": "cap overshoot (% of the summed caps)",
    "admissions": "cap overshoot (µ$ per 1,000 admissions)",
}
"""The y-axis label of each normalisation of overshoot."""

PER_UNIT: dict[str, str] = {"total_cap": "% of the caps", "admissions": " µ$ per 1,000"}
"""The unit of each normalisation, as a number in a panel says it."""

WORST_KEY = "overshoot_max_percent_of_cap"
"""Column: the worst key's overshoot as % of its cap (``cap_overshoot_max_ratio`` × 100)."""

FALSE_DENIALS = "false_denials_percent_of_arrived"
"""Column: denials an ideal limiter would not have made, as % of the requests that arrived."""

STORE_LABELS: dict[str, str] = {
    "axond_budget.redis_v1": "Redis v1",
    "axond_budget.redis_v2": "Redis v2",
    "axond_budget.in_memory": "in-memory (per replica)",
}

CAUSE_COLORS: dict[str, str] = {
    "estimate_underrun": "#4c72b0",
    "hold_expired_while_running": "#dd8452",
    "settlement_lost": "#c44e52",
    "server_data_loss": "#8172b3",
    "eviction": "#937860",
    "fail_open_admission": "#55a868",
    "duplicate_execution": "#da8bc3",
    "per_replica_ledger": "#8c8c8c",
    "crashed_replica_ledger": "#64b5cd",
    "migration_interrupted": "#ccb974",
    "misaligned_reply": "#4c4c9a",
    "store_logic": "#000000",
}
"""One fixed colour per cause, so every figure of the lab reads the same way."""


def cause_column(cause: str) -> str:
    """The summary column of one cause's overshoot, in micro-dollars."""
    return f"cap_overshoot_by_{cause}_microdollars"


def store_label(store: str) -> str:
    return STORE_LABELS.get(store, store)


# ------------------------------------------------------------------ the sweeps


def overshoot_sweeps(stores: Iterable[str] = tuple(SWEEP_FILES),
                     seeds: int | list[int] | None = None,
                     set_fields: Mapping[str, Any] | None = None,
                     vary: Mapping[str, Any] | None = None,
                     sweeps_dir: str | Path | None = None) -> dict[str, Sweep]:
    """The sweeps of each store in ``stores`` (``SWEEP_FILES``), by sweep name,
    adjusted as a notebook's parameters ask: ``seeds``, ``set_fields`` (dotted
    scenario paths, at every point) and ``vary`` (replacing the values of a
    varied parameter; only the sweeps that vary it take it, so e.g. the
    reply-loss values never turn the crash sweeps into a grid)."""
    folder = Path(sweeps_dir) if sweeps_dir is not None else lab_path("data", "sweeps")
    sweeps = {}
    for store in stores:
        if store not in SWEEP_FILES:
            raise KeyError(f"no overshoot sweep for store {store!r}; "
                           f"known: {', '.join(SWEEP_FILES)}")
        for file in SWEEP_FILES[store]:
            path = folder / file
            varied = load_sweep(path).parameters
            relevant = {name: values for name, values in (vary or {}).items()
                        if name in varied}
            sweep = load_sweep(path, seeds=seeds, set_fields=dict(set_fields or {}),
                               vary=relevant)
            sweeps[sweep.name] = sweep
    return sweeps


def run_overshoot_sweeps(sweeps: Mapping[str, Sweep], results_dir: str | Path,
                         workers: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Run every sweep (what is not done yet), then return all their runs as
    one frame, with each run's faults and shares (``tidy``), each fault-free
    run once.
    A run that failed stops here, naming it: a figure must not quietly miss it."""
    frames = []
    for sweep in sweeps.values():
        out = results_dir_for(sweep, results_dir)
        run_sweep(sweep, out, workers=workers, progress=progress).raise_for_failures()
        frames.append(tidy(read_results(out), point_facts(sweep)))
    frame = pd.concat(frames, ignore_index=True)
    # Both axes of a store include the fault-free point: the same scenario and
    # seed, run once per sweep, with the same trace. Keep one of each.
    same_run = ["store", CRASHES, REPLY_LOSS, POLICY, "seed", "trace_fingerprint"]
    return frame.drop_duplicates(subset=[c for c in same_run if c in frame.columns],
                                 ignore_index=True)


def point_facts(sweep: Sweep) -> pd.DataFrame:
    """One row per point of ``sweep``: its crash rate (per replica-hour, 0
    without crashes), reply-loss rate, unavailable policy (None for a
    per-replica store, which has no server to be cut off from) and subject cap,
    read from the point's scenario, so they are known whether varied or fixed."""
    rows = []
    for point in sweep.points:
        scenario = sweep.scenario_at(point)
        crash = scenario.faults.crash
        # A per-replica store's policy is about a full table of ledgers, not
        # an unreachable server: it is no fault setting here.
        policy = (None if scenario.kind.per_replica
                  else getattr(scenario.settings, "on_unavailable", None))
        rows.append({
            "point": point.point_id,
            CRASHES: (crash.rate * 3600) if crash is not None else 0.0,
            REPLY_LOSS: float(scenario.network.reply_loss),
            POLICY: getattr(policy, "value", policy),  # an enum's value: "deny", "allow"
            CAP: getattr(scenario.settings, "subject_cap_microdollars", None),
        })
    return pd.DataFrame(rows)


def tidy(results: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """A sweep's results with each run's faults (``point_facts``) joined on, and
    the overshoot on comparable scales: the worst key as % of its cap
    (``WORST_KEY``) and false denials as % of arrivals (``FALSE_DENIALS``)."""
    facts_only = facts.drop(columns=[c for c in facts.columns
                                     if c != "point" and c in results.columns])
    frame = results.merge(facts_only, on="point", how="left", validate="many_to_one")
    frame[WORST_KEY] = 100.0 * frame["cap_overshoot_max_ratio"].astype(float)
    arrived = frame["requests_arrived"].where(frame["requests_arrived"] > 0)
    frame[FALSE_DENIALS] = 100.0 * frame["false_denials"] / arrived
    return frame


def normalise(frame: pd.DataFrame, per: Per = "total_cap") -> pd.DataFrame:
    """Overshoot in total and by cause, one column per cause (named after the
    cause), on one scale:

    * ``total_cap``: % of the summed caps of the keys that saw traffic
      (``CAP`` × ``keys_total``): how much more than the fleet was allowed to
      spend, all keys together;
    * ``admissions``: micro-dollars per 1,000 admitted requests.

    Returns a frame with the identifying columns kept (``store``, ``seed``,
    the faults...), a ``total`` column and one column per cause."""
    if per == "total_cap":
        scale = 100.0 / (frame[CAP].astype(float) * frame["keys_total"])
    elif per == "admissions":
        scale = 1000.0 / frame["requests_admitted"].astype(float)
    else:
        raise ValueError(f"per: expected 'total_cap' or 'admissions', got {per!r}")
    scale = scale.replace([np.inf, -np.inf], np.nan)
    keep = [c for c in ("point", "seed", "store", "cap_enforced_per", CRASHES, REPLY_LOSS,
                        POLICY) if c in frame.columns]
    out = frame[keep].copy()
    out["total"] = frame["cap_overshoot_microdollars_total"].astype(float) * scale
    for cause in CAUSES:
        out[cause] = frame[cause_column(cause)].astype(float) * scale
    return out


def one_factor(frame: pd.DataFrame, axis: str) -> pd.DataFrame:
    """The runs along one fault axis with the other fault off: the crash axis
    at no reply loss, the reply-loss axis without crashes."""
    if axis not in FAULT_AXES:
        raise KeyError(f"axis: expected one of {', '.join(FAULT_AXES)}, got {axis!r}")
    others = [other for other in FAULT_AXES if other != axis]
    mask = np.ones(len(frame), dtype=bool)
    for other in others:
        mask &= frame[other].to_numpy() == 0
    return frame[mask]


def overshoot_by_cause(frame: pd.DataFrame, axis: str, per: Per = "total_cap",
                       by: Sequence[str] = ("store", POLICY)) -> pd.DataFrame:
    """The mean over seeds of overshoot by cause (normalised ``per``), for each
    value of the fault ``axis`` (the other fault off) and of the ``by`` columns.
    Causes that are zero in every row are dropped; the rest keep the order of
    ``CAUSES``. A ``runs`` column counts the seeds averaged."""
    runs = one_factor(frame, axis)
    scaled = normalise(runs, per)
    by = [column for column in by if column in scaled.columns]
    grouped = scaled.groupby([*by, axis], sort=True, dropna=False)
    means = grouped[["total", *CAUSES]].mean()
    means["runs"] = grouped.size()
    present = [cause for cause in CAUSES if (means[cause].abs() > 0).any()]
    return means[["total", *present, "runs"]].reset_index()


def policies_in(frame: pd.DataFrame) -> list[str]:
    """The unavailable policies in ``frame``: fail closed (the default) first."""
    present = set(frame[POLICY].dropna())
    return [p for p in ("deny", "allow") if p in present] + sorted(present - {"deny", "allow"})


def causes_in(table: pd.DataFrame) -> list[str]:
    """The cause columns of an ``overshoot_by_cause`` table, in ``CAUSES`` order."""
    return [cause for cause in CAUSES if cause in table.columns]


# ------------------------------------------------------------------ figures


def fleet_wide(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs of stores whose cap holds across the fleet (one shared record)."""
    return frame[frame["cap_enforced_per"] != "replica"]


def per_replica(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs of stores that enforce the cap per replica (in-memory ledgers)."""
    return frame[frame["cap_enforced_per"] == "replica"]


def _fault_ticks(ax: Axes, axis: str, values: Sequence[float]) -> None:
    ax.set_xticks(range(len(values)))
    if axis == REPLY_LOSS:
        ax.set_xticklabels([f"{value:g}" for value in values])
    else:
        ax.set_xticklabels([f"{value:g}/h" for value in values])


def plot_stacked_causes(ax: Axes, table: pd.DataFrame, axis: str, causes: Sequence[str],
                        title: str, ylabel: str) -> float:
    """Draw one slice of an ``overshoot_by_cause`` table as stacked bars: one
    bar per value of ``axis``, one segment per cause (in ``causes`` order).
    Returns the tallest bar."""
    table = table.sort_values(axis)
    positions = np.arange(len(table))
    bottom = np.zeros(len(table))
    for cause in causes:
        values = table[cause].to_numpy(dtype=float) if cause in table else np.zeros(len(table))
        ax.bar(positions, values, bottom=bottom, width=0.7, color=CAUSE_COLORS.get(cause),
               label=cause.replace("_", " "))
        bottom += values
    _fault_ticks(ax, axis, table[axis].tolist())
    ax.set_xlabel(FAULT_AXES[axis])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    ax.grid(axis="y", alpha=0.3)
    return float(bottom.max(initial=0.0))


def note_small_bars(ax: Axes, tallest: float, unit: str, visible_share: float = 0.01) -> None:
    """Say in a panel whose bars are too small to see on the shared scale (or
    absent) what its tallest bar is, so an empty-looking panel is not read as a
    missing one."""
    top = ax.get_ylim()[1]
    if tallest <= 0:
        text = "no overshoot at any rate tried"
    elif tallest < visible_share * top:
        text = f"at most {tallest:.2g}{unit}:\ntoo small to see on this scale"
    else:
        return
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            color="dimgrey", fontsize="small")


def causes_figure(frame: pd.DataFrame, per: Per = "total_cap") -> Figure:
    """Overshoot stacked by cause, mean over seeds, for the fleet-wide stores:
    one row per store; one column per fault axis and unavailable policy. One
    y scale for every panel, so a flat panel really is small."""
    runs = fleet_wide(frame)
    if runs.empty:
        raise ValueError("no runs of a fleet-wide store (redis_v1, redis_v2) in these results")
    stores = sorted(runs["store"].unique())
    policies = policies_in(runs)
    tables = {axis: overshoot_by_cause(runs, axis, per) for axis in FAULT_AXES}
    causes = [cause for cause in CAUSES
              if any(cause in table.columns for table in tables.values())]
    columns = [(axis, policy) for axis in FAULT_AXES for policy in policies]
    figure = Figure(figsize=(3.6 * len(columns), 3.2 * len(stores) + 0.9), layout="constrained")
    axes = figure.subplots(len(stores), len(columns), squeeze=False, sharey=True)
    tallest: dict[Any, float] = {}
    for row, store in enumerate(stores):
        for column, (axis, policy) in enumerate(columns):
            table = tables[axis]
            piece = table[(table["store"] == store) & (table[POLICY] == policy)]
            ax = axes[row][column]
            if piece.empty:
                ax.set_axis_off()
                continue
            tallest[ax] = plot_stacked_causes(
                ax, piece, axis, causes, ylabel=PER_LABEL[per] if column == 0 else "",
                title=f"{store_label(store)}, {_policy_text(policy)}")
    for ax, height in tallest.items():  # after every panel is drawn: the shared scale is final
        note_small_bars(ax, height, PER_UNIT[per])
    handles, labels = _legend_entries(axes)
    if handles:
        figure.legend(handles, labels, title="cause of the overshoot", loc="outside lower center",
                      ncols=min(len(labels), 5))
    figure.suptitle("Cap overshoot by cause as faults grow (mean over seeds; "
                    "the other fault off)")
    return figure


def per_replica_figure(frame: pd.DataFrame, per: Per = "total_cap") -> Figure:
    """The per-replica stores apart: overshoot stacked by cause vs crash rate.
    Their cap is enforced by each replica on its own ledger, so the fleet may
    spend up to a cap per replica serving a key: overshoot by design."""
    runs = per_replica(frame)
    if runs.empty:
        raise ValueError("no runs of a per-replica store (in_memory) in these results")
    table = overshoot_by_cause(runs, CRASHES, per, by=("store",))
    stores = sorted(table["store"].unique())
    figure = Figure(figsize=(5.5 * len(stores), 4.2), layout="constrained")
    axes = figure.subplots(1, len(stores), squeeze=False)[0]
    for ax, store in zip(axes, stores, strict=True):
        plot_stacked_causes(ax, table[table["store"] == store], CRASHES, causes_in(table),
                            title=f"{store_label(store)}: cap enforced per replica",
                            ylabel=PER_LABEL[per])
        ax.legend(title="cause", fontsize="small")
    figure.suptitle("Per-replica ledgers: overshoot by design, by cause (mean over seeds)")
    return figure


def headline_figure(frame: pd.DataFrame, y: str = WORST_KEY,
                    ylabel: str = "worst key's overshoot (% of its cap)",
                    title: str = "Cap overshoot as faults grow") -> Figure:
    """The headline: ``y`` against each fault axis (the other fault off), one
    line per fleet-wide store and unavailable policy: the median over seeds,
    shaded from the 10th to the 90th percentile."""
    runs = fleet_wide(frame)
    figure = Figure(figsize=(11, 4.2), layout="constrained")
    axes = figure.subplots(1, len(FAULT_AXES), squeeze=False, sharey=True)[0]
    stores = sorted(runs["store"].unique())
    colors = dict(zip(stores, ("#4c72b0", "#dd8452", "#55a868", "#c44e52"), strict=False))
    markers = dict(zip(stores, ("o", "s", "^", "D"), strict=False))
    styles = {"deny": "-", "allow": "--"}
    for ax, axis in zip(axes, FAULT_AXES, strict=True):
        along = one_factor(runs, axis)
        bands = seed_bands(along, axis, y, by=("store", POLICY))
        for store in stores:
            for policy in policies_in(bands):
                band = bands[(bands["store"] == store) & (bands[POLICY] == policy)]
                if band.empty:
                    continue
                line, = ax.plot(band[axis], band["median"], marker=markers.get(store),
                                linestyle=styles.get(policy, ":"), color=colors.get(store),
                                label=f"{store_label(store)}, {_policy_text(policy)}")
                ax.fill_between(band[axis], band["low"], band["high"],
                                color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_xlabel(FAULT_AXES[axis])
        ax.set_ylabel(ylabel)
        ax.set_title(f"vs {FAULT_AXES[axis].split(' (')[0]}", fontsize="medium")
        ax.grid(alpha=0.3)
    if not runs.empty and (runs[y].dropna() >= 0).all():
        axes[0].set_ylim(bottom=0)  # a share of a cap or of arrivals: never below zero
    axes[0].legend(fontsize="small", title="store, when unreachable")
    figure.suptitle(f"{title} (median over seeds, band: 10th-90th percentile)")
    return figure


def false_denials_figure(frame: pd.DataFrame) -> Figure:
    """What the faults cost where they cost no overshoot: false denials (the
    truth had room) as % of arrivals, against each fault axis."""
    return headline_figure(frame, y=FALSE_DENIALS,
                           ylabel="false denials (% of arrived requests)",
                           title="What the faults cost in availability: false denials")


def _policy_text(policy: Any) -> str:
    return {"deny": "fail closed (deny)", "allow": "fail open (allow)"}.get(policy, str(policy))


def _legend_entries(axes: Any) -> tuple[list, list[str]]:
    handles, labels = [], []
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


# ------------------------------------------------------------------ findings


def findings(frame: pd.DataFrame, per: Per = "total_cap") -> pd.DataFrame:
    """For each store, unavailable policy and fault axis: the mean overshoot
    (normalised ``per``) with no fault and at the axis's highest rate, the
    largest cause at the highest rate, and the false denials (% of arrivals)
    at both ends. Fleet-wide stores first. Computed from the runs, for the
    notebook to state."""
    rows = []
    for axis in FAULT_AXES:
        runs = one_factor(frame, axis)
        scaled = normalise(runs, per)
        scaled[FALSE_DENIALS] = runs[FALSE_DENIALS].to_numpy()
        by = [c for c in ("cap_enforced_per", "store", POLICY) if c in scaled.columns]
        for keys, group in scaled.groupby(by, sort=True, dropna=False):
            means = group.groupby(axis, sort=True)[["total", *CAUSES, FALSE_DENIALS]].mean()
            if len(means) < 2:
                continue  # this store was not run along this axis
            low, high = means.iloc[0], means.iloc[-1]
            causes = {cause: high[cause] for cause in CAUSES if high[cause] > 0}
            row = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
            row.update({
                "axis": axis,
                "fault_at_low": means.index[0], "fault_at_high": means.index[-1],
                "overshoot_at_low": low["total"], "overshoot_at_high": high["total"],
                "largest_cause_at_high": max(causes, key=causes.__getitem__) if causes else None,
                "false_denials_at_low": low[FALSE_DENIALS],
                "false_denials_at_high": high[FALSE_DENIALS],
            })
            rows.append(row)
    table = pd.DataFrame(rows)
    if "cap_enforced_per" in table.columns:  # "fleet" sorts before "replica"
        table = table.sort_values("cap_enforced_per", kind="stable", ignore_index=True)
    return table


def describe_findings(table: pd.DataFrame, per: Per = "total_cap",
                      flat_below: float = 0.05) -> list[str]:
    """One sentence per row of a ``findings`` table, saying whether overshoot
    grew along that fault axis (by more than ``flat_below`` in the unit of
    ``per``), what caused most of it, and what happened to false denials."""
    unit = "% of the summed caps" if per == "total_cap" else " µ$ per 1,000 admissions"
    sentences = []
    for row in table.itertuples(index=False):
        fields = row._asdict()
        who = store_label(fields["store"])
        if fields.get(POLICY) in ("deny", "allow"):
            who += f", {_policy_text(fields[POLICY])}"
        axis = FAULT_AXES[fields["axis"]].split(" (")[0]
        low, high = fields["overshoot_at_low"], fields["overshoot_at_high"]
        change = high - low
        if abs(change) <= flat_below:
            verdict = f"overshoot stays flat ({low:.3g} → {high:.3g}{unit})"
        elif change > 0:
            verdict = f"overshoot grows from {low:.3g} to {high:.3g}{unit}"
        else:
            verdict = f"overshoot falls from {low:.3g} to {high:.3g}{unit}"
        cause = fields["largest_cause_at_high"]
        because = f", mostly {cause.replace('_', ' ')}" if cause and high > flat_below else ""
        denials = ""
        if not (np.isnan(fields["false_denials_at_low"]) or
                np.isnan(fields["false_denials_at_high"])):
            denials = (f"; false denials {fields['false_denials_at_low']:.3g}% → "
                       f"{fields['false_denials_at_high']:.3g}% of arrivals")
        sentences.append(f"{who}, {axis} {_fault_text(fields['axis'], fields['fault_at_low'])} → "
                         f"{_fault_text(fields['axis'], fields['fault_at_high'])}: "
                         f"{verdict}{because}{denials}.")
    return sentences


def _fault_text(axis: str, value: float) -> str:
    return f"{value:g}" if axis == REPLY_LOSS else f"{value:g}/h"
