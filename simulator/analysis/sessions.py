"""Session counters: what the av_state sweeps say about per-session budgets
kept in counters (notebook ``07_session_counters``). Compute only; the
figures are in ``simulator.analysis.session_figures``.

A store of session budgets (av_state's: each tool call checks and charges
several counters in one script, gives back what it did not use, and the
session's counters are cleared when it closes) can go wrong three ways the
notebook asks about:

* **lost replies and driver retries** — a spend whose reply was lost and
  that the driver re-sends is charged twice (a *double debit*: conservative,
  but it refuses calls the budget had room for); a refund re-sent the same
  way would credit twice (*budget minted*) but for its one-shot replay
  marker. ``retry_bands`` and ``retry_findings`` put both against the
  reply-loss rate and the driver's retries;
* **the in-memory twin's missing TTL** — av_state's twin never expires a
  counter. On the same sessions (same seed, same sessions) Redis resets a
  counter idle for a day, the twin keeps every counter forever.
  ``twin_comparison`` sets the twin beside ``av_state.redis`` run by run;
* **the cleanup race** — a session's counters are cleared at its end while
  its last call may still run: whatever that call writes afterwards
  re-creates a counter (*resurrected*), with a TTL or, from a broken refund,
  without one. ``race_series`` reads both over virtual time from the runs'
  metric series.

A session table has one row per run: the point (``store``, ``reply_loss``,
``driver_retries``, ``session_lifetime``, ``cleanup_after``, each read from
the scenario at the run's point whether the sweep varied it or not), its
``seed``, and every summary metric of the family (``docs/metrics.md``,
"Session counters"). Everything is deterministic: no randomness, only the
runs' results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.analysis.notebook_sweeps import adjusted_sweep
from simulator.analysis.spread import seed_bands
from simulator.scenario.arrivals import Bursts, Poisson, arrivals_as_written
from simulator.scenario.model import Scenario, ScenarioError
from simulator.sweeps import Sweep

MICROSECONDS_PER_HOUR = 3_600_000_000

# ------------------------------------------------------------------ columns

STORE = "store"
"""Column: the store kind of the run."""

REPLY_LOSS = "reply_loss"
"""Column: the chance a reply is lost after its command ran (0..1)."""

DRIVER_RETRIES = "driver_retries"
"""Column: how many times the driver re-sends a command after a timeout."""

LIFETIME = "session_lifetime"
"""Column: the sessions' lifetime distribution, as written (``"uniform(1h, 48h)"``)."""

LIFETIME_HOURS = "session_lifetime_mean_hours"
"""Column: the sessions' mean lifetime in hours (orders ``LIFETIME``)."""

CLEANUP_AFTER = "cleanup_after"
"""Column: when a session's counters are cleared after its end, as written (``"0s"``)."""

SEED = "seed"

POINT = (STORE, REPLY_LOSS, DRIVER_RETRIES, LIFETIME, CLEANUP_AFTER)
"""The columns that identify a point of a session table."""

HOURS = "hours"
"""Column of a race series: virtual time of the sample, in hours."""

# ------------------------------------------------------------------ the family's metrics

MINTED = "budget_minted_units"
"""Credit from refunds beyond what their calls debited, in counter units."""

DOUBLE_DEBITS = "double_debits"
"""Spends of one call charged more than once."""

DOUBLE_DEBIT_REFUSALS = "false_refusals_from_double_debits"
"""Calls refused only because of the double debits before them."""

OVERSHOOT = "budget_overshoot_units"
"""Callers' true spend past their budget's limit, summed over budgets."""

RESETS = "counter_resets"
"""A live session's counter vanished (its TTL ran out, it was evicted...)."""

KEPT_PAST_TTL = "counters_kept_past_ttl"
"""Counters still held a day after they were last touched (Redis would have expired them)."""

HOURS_KEPT_PAST_TTL = "counter_hours_kept_past_ttl"
"""Counter-hours held past the 24 h TTL."""

WITHOUT_TTL_AT_END = "counters_without_ttl_at_end"
"""Counters with no expiry at the end of the run."""

RESURRECTED = "counters_resurrected"
"""Counters re-created after their session's cleanup removed them (cumulative)."""

RESURRECTED_WITHOUT_TTL = "counters_resurrected_without_ttl"
"""Of those, the ones re-created with no expiry."""

WITHOUT_TTL_NOW = "counters_without_ttl_now"
"""Column of a metric series: counters with no expiry at the sample."""

RETRY_METRICS = (MINTED, DOUBLE_DEBITS, DOUBLE_DEBIT_REFUSALS)
"""What lost replies and driver retries cost, in the order the notebook shows them."""

TWIN_METRICS = (RESETS, OVERSHOOT, KEPT_PAST_TTL, HOURS_KEPT_PAST_TTL, WITHOUT_TTL_AT_END)
"""What the twin's missing TTL changes against Redis, in the order shown."""

RACE_METRICS = (RESURRECTED, WITHOUT_TTL_NOW)
"""The cleanup race over time: both columns of the runs' metric series."""

METRIC_NAMES = {
    MINTED: "budget minted (units)",
    DOUBLE_DEBITS: "double debits",
    DOUBLE_DEBIT_REFUSALS: "false refusals from double debits",
    OVERSHOOT: "budget overshoot (units)",
    RESETS: "counter resets",
    KEPT_PAST_TTL: "counters kept past the 24 h TTL",
    HOURS_KEPT_PAST_TTL: "counter-hours kept past the 24 h TTL",
    WITHOUT_TTL_AT_END: "counters without a TTL at the end",
    RESURRECTED: "counters resurrected (cumulative)",
    RESURRECTED_WITHOUT_TTL: "counters resurrected without a TTL",
    WITHOUT_TTL_NOW: "counters without a TTL (live)",
}
"""Per metric, its name in text and on axes."""

REDIS_KIND = "av_state.redis"
TWIN_KIND = "av_state.in_memory"


# ------------------------------------------------------------------ a sweep's results

PARAMETERS = {
    "stores": "store",
    "reply_losses": "network.reply_loss",
    "driver_retries": "network.retries",
    "lifetimes": "workload.sessions.lifetime",
    "cleanup_afters": "workload.sessions.cleanup_after",
}
"""Each list a notebook may give ``load_session_sweep``, and the field it varies."""


def load_session_sweep(sweep_file: str | Path, seeds: int | list[int] | None = None,
                       set_fields: Mapping[str, Any] | None = None,
                       **values: Sequence[Any] | None) -> Sweep:
    """A session sweep as a notebook's parameters adjust it: the sweep file,
    with ``seeds``, other scenario fields set at every point (``set_fields``,
    dotted paths), and any of ``stores``, ``reply_losses``, ``driver_retries``
    (counts of re-sends), ``lifetimes`` and ``cleanup_afters`` varied instead
    of the file's when given (``PARAMETERS``). A relative ``sweep_file`` is
    inside the lab's checkout."""
    return adjusted_sweep(sweep_file, PARAMETERS, "load_session_sweep", seeds, set_fields, values)


def point_of(scenario: Scenario) -> dict[str, Any]:
    """The point columns of a scenario's runs (``POINT`` and ``LIFETIME_HOURS``)."""
    sessions = scenario.workload.sessions
    if sessions is None:
        raise ScenarioError("workload.sessions: a session table needs sessions; give the "
                            "scenario a [workload.sessions] table")
    return {STORE: scenario.store, REPLY_LOSS: scenario.network.reply_loss,
            DRIVER_RETRIES: scenario.network.retries.count,
            LIFETIME: str(sessions.lifetime),
            LIFETIME_HOURS: sessions.lifetime.mean / MICROSECONDS_PER_HOUR,
            CLEANUP_AFTER: str(sessions.cleanup_after)}


def session_table(results: pd.DataFrame, sweep: Sweep) -> pd.DataFrame:
    """A session sweep's results (``simulator.sweeps.read_results``) as a session
    table: every run of the sweep's points, its point columns read from the
    scenario at its point beside every summary metric. Runs of points the
    sweep no longer has (a narrower re-run in the same folder) are left out."""
    missing = [column for column in ("point", SEED, DOUBLE_DEBITS) if column not in results]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in these results; "
                       "are they a session-counter store's?")
    points = pd.DataFrame([{"point": point.point_id, **point_of(sweep.scenario_at(point))}
                           for point in sweep.points])
    # The point's own values replace any column of the same name in the results.
    kept = results.drop(columns=[column for column in (*POINT, LIFETIME_HOURS)
                                 if column in results.columns])
    table = points.merge(kept, on="point", how="inner")
    return table.sort_values([STORE, LIFETIME_HOURS, REPLY_LOSS, DRIVER_RETRIES, CLEANUP_AFTER,
                              SEED], ignore_index=True)


# ------------------------------------------------------------------ lost replies and retries


def retry_bands(table: pd.DataFrame, metric: str, low: float = 0.1,
                high: float = 0.9) -> pd.DataFrame:
    """One metric's spread over seeds against the reply-loss rate: per store,
    number of driver retries and reply-loss rate, the ``median`` over seeds,
    the ``low``/``high`` quantiles, the ``worst`` seed and ``runs``."""
    _require(table, (STORE, DRIVER_RETRIES, REPLY_LOSS, metric))
    by = [STORE, DRIVER_RETRIES]
    bands = seed_bands(table, REPLY_LOSS, metric, by=by, low=low, high=high)
    worst = table.groupby([*by, REPLY_LOSS], sort=True)[metric].max().rename("worst")
    return bands.merge(worst.reset_index(), on=[*by, REPLY_LOSS])


def retry_findings(table: pd.DataFrame,
                   metrics: Sequence[str] = RETRY_METRICS) -> pd.DataFrame:
    """Per store and metric, where it was largest: the point (``reply_loss``,
    ``driver_retries``) of the largest median over seeds (ties: the least
    reply loss, then the fewest retries), that ``median`` and the ``worst``
    seed there, and how many runs of the store had any (``runs_with_any``)
    of ``runs``. With no retries, a lost reply is never re-sent by the
    driver, so ``median_without_retries`` (at the same reply-loss rate) says
    how much of it the retries brought."""
    _require(table, (STORE, DRIVER_RETRIES, REPLY_LOSS, *metrics))
    _require_rows(table)
    rows = []
    for store, runs in table.groupby(STORE, sort=True):
        for metric in metrics:
            medians = runs.groupby([REPLY_LOSS, DRIVER_RETRIES], sort=True)[metric].median()
            # The largest median; among equal ones, the first in (loss, retries) order.
            loss, retries = medians.index[int(medians.to_numpy().argmax())]
            at_point = runs[(runs[REPLY_LOSS] == loss) & (runs[DRIVER_RETRIES] == retries)]
            unretried = runs[(runs[REPLY_LOSS] == loss) & (runs[DRIVER_RETRIES] == 0)]
            rows.append({
                STORE: store, "metric": metric, REPLY_LOSS: float(loss),
                DRIVER_RETRIES: int(retries), "median": float(medians.max()),
                "worst": float(at_point[metric].max()),
                "median_without_retries": (float(unretried[metric].median())
                                           if len(unretried) else float("nan")),
                "runs_with_any": int((runs[metric] > 0).sum()), "runs": len(runs)})
    return pd.DataFrame(rows)


def retry_lines(findings: pd.DataFrame) -> list[str]:
    """The findings, one line per store and metric, for a log or a test:
    ``"av_state.redis: double debits: at most a median of 14 (worst seed 19)
    at 10% reply loss with 10 driver retries; 0 there without retries; in 8
    of 12 runs"``, or ``"...: budget minted (units): none in any of 12 runs"``."""
    lines = []
    for row in findings.itertuples(index=False):
        name = f"{getattr(row, STORE)}: {METRIC_NAMES.get(row.metric, row.metric)}"
        if row.runs_with_any == 0:
            lines.append(f"{name}: none in any of {row.runs} runs")
            continue
        line = (f"{name}: at most a median of {row.median:g} (worst seed {row.worst:g}) at "
                f"{_percent(getattr(row, REPLY_LOSS))} reply loss with "
                f"{getattr(row, DRIVER_RETRIES)} driver retries")
        if getattr(row, DRIVER_RETRIES) != 0 and not math.isnan(row.median_without_retries):
            line += f"; {row.median_without_retries:g} there without retries"
        lines.append(f"{line}; in {row.runs_with_any} of {row.runs} runs")
    return lines


# ------------------------------------------------------------------ the in-memory twin


def twin_comparison(table: pd.DataFrame, metrics: Sequence[str] = TWIN_METRICS,
                    reference: str = REDIS_KIND, twin: str = TWIN_KIND) -> pd.DataFrame:
    """The twin beside the reference store on the same sessions: per session
    lifetime and metric, the ``reference_median`` and ``twin_median`` over
    seeds, and the twin's difference run by run (a seed runs the same
    sessions on both: ``difference_median``, ``difference_low`` and
    ``difference_high``, the smallest and largest over seeds), from the
    ``seeds`` both stores ran at the same point (but for the store)."""
    _require(table, (*POINT, LIFETIME_HOURS, SEED, *metrics))
    stores = set(table[STORE])
    for kind in (reference, twin):
        if kind not in stores:
            raise ValueError(f"no runs of {kind!r} in this table (it has "
                             f"{', '.join(sorted(stores)) or 'none'}); the twin is compared "
                             "with the reference on the same sessions")
    others = [column for column in POINT if column != STORE]
    keys = [*others, LIFETIME_HOURS, SEED]
    paired = table[table[STORE] == reference].merge(
        table[table[STORE] == twin], on=keys, suffixes=("_reference", "_twin"))
    if paired.empty:
        raise ValueError(f"{reference!r} and {twin!r} share no point and seed: nothing to "
                         "compare run by run")
    rows = []
    for (lifetime, hours), runs in paired.groupby([LIFETIME, LIFETIME_HOURS], sort=False):
        for metric in metrics:
            difference = runs[f"{metric}_twin"] - runs[f"{metric}_reference"]
            rows.append({LIFETIME: lifetime, LIFETIME_HOURS: hours, "metric": metric,
                         "reference_median": float(runs[f"{metric}_reference"].median()),
                         "twin_median": float(runs[f"{metric}_twin"].median()),
                         "difference_median": float(difference.median()),
                         "difference_low": float(difference.min()),
                         "difference_high": float(difference.max()),
                         "seeds": len(runs)})
    comparison = pd.DataFrame(rows)
    comparison.attrs.update(reference=reference, twin=twin)
    return comparison.sort_values([LIFETIME_HOURS, "metric"], key=_metric_order(metrics),
                                  ignore_index=True)


def twin_lines(comparison: pd.DataFrame) -> list[str]:
    """The comparison, one line per lifetime and metric: ``"sessions
    uniform(1h, 48h): counter resets: av_state.redis 12, av_state.in_memory 0
    (median over 3 seeds; the twin's difference -15 to -9)"``."""
    reference, twin = comparison.attrs["reference"], comparison.attrs["twin"]
    return [f"sessions {getattr(row, LIFETIME)}: {METRIC_NAMES.get(row.metric, row.metric)}: "
            f"{reference} {row.reference_median:g}, {twin} {row.twin_median:g} (median over "
            f"{row.seeds} seeds; the twin's difference "
            f"{_span(row.difference_low, row.difference_high)})"
            for row in comparison.itertuples(index=False)]


# ------------------------------------------------------------------ the cleanup race over time


def race_series(metrics: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The runs' metric series (``simulator.sweeps.read_metrics``) as the
    cleanup race over time: the aggregate rows only (every counter at once),
    with the virtual time in ``hours`` and each run's point columns from the
    session table. Series of points the table lacks are left out."""
    missing = [column for column in ("point", SEED, "time_us", *RACE_METRICS)
               if column not in metrics]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in these metric series; "
                       "are they a session-counter store's, sampled (metrics.sample_every)?")
    _require(table, ("point", *POINT))
    aggregate = metrics[metrics["counter"] == "*"] if "counter" in metrics else metrics
    points = table[["point", *POINT]].drop_duplicates("point")
    series = aggregate.merge(points, on="point", how="inner")
    series = series.assign(**{HOURS: series["time_us"] / MICROSECONDS_PER_HOUR})
    return series.sort_values([STORE, CLEANUP_AFTER, SEED, HOURS], ignore_index=True)


def race_bands(series: pd.DataFrame, metric: str, low: float = 0.1,
               high: float = 0.9) -> pd.DataFrame:
    """One series' spread over seeds at every sample: per store and cleanup
    delay, the ``median``, ``low`` and ``high`` quantiles over seeds and
    ``runs``, against ``hours``."""
    return seed_bands(series, HOURS, metric, by=[STORE, CLEANUP_AFTER], low=low, high=high)


def race_findings(series: pd.DataFrame) -> pd.DataFrame:
    """Per store and cleanup delay: the resurrected counters at the last
    sample (``resurrected_median`` and ``resurrected_worst`` over seeds, and
    ``hours``, when that sample was) and the most counters without a TTL
    live at any sample (``without_ttl_peak_median`` and ``..._worst``)."""
    _require(series, (STORE, CLEANUP_AFTER, SEED, HOURS, *RACE_METRICS))
    _require_rows(series)
    rows = []
    for (store, cleanup), runs in series.groupby([STORE, CLEANUP_AFTER], sort=True):
        last = runs.sort_values(HOURS).groupby(SEED).tail(1)
        peaks = runs.groupby(SEED)[WITHOUT_TTL_NOW].max()
        rows.append({STORE: store, CLEANUP_AFTER: cleanup, HOURS: float(last[HOURS].max()),
                     "resurrected_median": float(last[RESURRECTED].median()),
                     "resurrected_worst": float(last[RESURRECTED].max()),
                     "without_ttl_peak_median": float(peaks.median()),
                     "without_ttl_peak_worst": float(peaks.max()), "seeds": len(last)})
    return pd.DataFrame(rows)


def race_lines(findings: pd.DataFrame) -> list[str]:
    """The findings, one line per store and cleanup delay: ``"av_state.redis,
    cleanup 0s after the end: 4 counters resurrected by hour 62 (worst seed
    6); at most 0 live without a TTL (worst seed 0)"``."""
    return [f"{getattr(row, STORE)}, cleanup {getattr(row, CLEANUP_AFTER)} after the end: "
            f"{row.resurrected_median:g} counters resurrected by hour {getattr(row, HOURS):g} "
            f"(worst seed {row.resurrected_worst:g}); at most {row.without_ttl_peak_median:g} "
            f"live without a TTL (worst seed {row.without_ttl_peak_worst:g})"
            for row in findings.itertuples(index=False)]


# ------------------------------------------------------------------ text


def describe_sweep(sweep: Sweep) -> str:
    """What a session sweep ran (Markdown): the fleet, the sessions, the run
    length, and the value of each point column, or the values it took."""
    scenarios = [sweep.scenario_at(point) for point in sweep.points]
    first = scenarios[0]
    sessions = first.workload.sessions
    assert sessions is not None
    counters = ", ".join(f"{name} (limit {counter.limit:,})"
                         for name, counter in sessions.counters.items())
    hours = (first.duration_us + first.drain_us) / MICROSECONDS_PER_HOUR
    lines = [f"**Sweep {sweep.name!r}**: {first.fleet.replicas} replicas; "
             f"{_arrivals(first)}, a call every `{sessions.call_every}` (working "
             f"`{sessions.call_duration}`) spending on {counters}; {hours:g} h of virtual time "
             f"per run; seeds {', '.join(map(str, sweep.seeds))}."]
    table = pd.DataFrame([point_of(scenario) for scenario in scenarios])
    for column in POINT:
        values = list(dict.fromkeys(table[column]))
        spelled = ", ".join(f"`{_spelled(value)}`" for value in values)
        lines.append(f"- {column.replace('_', ' ')}: {spelled}"
                     + (" throughout." if len(values) == 1 else "."))
    return "\n".join(lines)


def _arrivals(scenario: Scenario) -> str:
    """How many sessions a run opens, in words."""
    arrivals = scenario.workload.arrivals
    hours = scenario.duration_us / MICROSECONDS_PER_HOUR
    # Bursts are Poisson only inside their windows: no plain expected count.
    if isinstance(arrivals, Poisson) and not isinstance(arrivals, Bursts):
        rate = arrivals.rate_per_second * (scenario.fleet.replicas if arrivals.per_replica else 1)
        return f"about {rate * hours * 3600:.0f} sessions opening over the first {hours:g} h"
    return f"sessions opening `{arrivals_as_written(arrivals)}` over the first {hours:g} h"


def _spelled(value: Any) -> str:
    return _percent(value) if isinstance(value, float) else str(value)


def _percent(share: float) -> str:
    return f"{100 * share:g}%"


def _span(low: float, high: float) -> str:
    return f"{low:+g}" if low == high else f"{low:+g} to {high:+g}"


def _metric_order(metrics: Sequence[str]):
    """A sort key putting ``metric`` in the order given, other columns as they are."""
    order = {metric: position for position, metric in enumerate(metrics)}

    def key(column: pd.Series) -> pd.Series:
        return column.map(order) if column.name == "metric" else column
    return key


# ------------------------------------------------------------------ checks


def _require(table: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in this table; a session "
                       f"table has {', '.join((*POINT, SEED))} and the family's metrics")


def _require_rows(table: pd.DataFrame) -> None:
    if table.empty:
        raise ValueError("no runs in this table")
