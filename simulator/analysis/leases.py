"""Sizing concurrency leases: what the lease sweeps say a capacity planner
should choose for ``max_in_flight`` and the lease TTL (notebook
``06_sizing_concurrency_leases``). Compute only; the figures are in
``simulator.analysis.lease_figures``.

A concurrency limiter is sized in two directions at once:

* **the limit** — too few slots, and requests are refused although the
  backend could serve them. With Poisson arrivals and no faults the share
  refused is the Erlang-B blocking probability ``B(c, A)`` of ``c`` slots
  under ``A`` Erlangs of offered load (arrival rate × mean holding time),
  whatever the shape of the holding time (``erlang_b``);
* **the lease TTL** — too short, and the store reclaims the lease of a
  request that is still running, admits another in its place, and more
  requests run at once than the limit allows (concurrency excess); too long,
  and the lease of a crashed or stalled caller keeps its slot until the TTL
  passes (leaked lease-seconds), which refuses requests that had room.

The planner's table has one row per run: the point ``(offered_erlangs,
max_in_flight, lease_ttl_s)``, its ``seed`` and the three costs
(``denial_share``, ``leaked_lease_seconds``,
``concurrency_excess_lease_seconds``). From it this module computes seed
bands per point (``point_bands``), the simulated denial share against
Erlang-B with its standard error (``erlang_b_comparison``) and the
recommended (limit, TTL) region (``recommend_region``, whose docstring is the
rule). Everything is deterministic: no randomness, only the runs' results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.analysis import lab_path
from simulator.analysis.spread import seed_bands
from simulator.analysis.ttl import format_seconds
from simulator.scenario.arrivals import Bursts, Poisson, arrivals_as_written
from simulator.scenario.model import Scenario, ScenarioError
from simulator.sweeps import Sweep, load_sweep
from stores.quantities import parse_duration_us

MICROSECONDS_PER_SECOND = 1_000_000

LIMIT = "max_in_flight"
"""Column: the limiter's ``max_in_flight`` (slots)."""

OFFERED = "offered_erlangs"
"""Column: offered load in Erlangs (arrival rate × mean request duration)."""

TTL = "lease_ttl_s"
"""Column: the lease TTL in seconds."""

SEED = "seed"

DENIAL_SHARE = "denial_share"
"""Column: requests refused as a share of requests that arrived (0..1)."""

LEAKED = "leaked_lease_seconds"
"""Column: lease-seconds held by no live caller (crashed, abandoned, release lost)."""

EXCESS = "concurrency_excess_lease_seconds"
"""Column: lease-seconds of true concurrency above ``max_in_flight``."""

ARRIVED = "requests_arrived"
"""Optional column: requests that arrived in the run (for a one-seed standard error)."""

POINT = (OFFERED, LIMIT, TTL)
"""The columns that identify a point of the planner's table."""

COSTS = (DENIAL_SHARE, LEAKED, EXCESS)
"""The costs the recommendation weighs, each with a target."""

PLANNER_COLUMNS = (*POINT, SEED, *COSTS)
"""The columns every planner's table has."""

COST_NAMES = {DENIAL_SHARE: "denials", LEAKED: "leaks", EXCESS: "excess"}
"""Per cost, its short name in text and figures."""


# ------------------------------------------------------------------ Erlang-B


def erlang_b(servers: int, offered_erlangs: float) -> float:
    """The Erlang-B blocking probability ``B(c, A)``: the share of Poisson
    arrivals refused by ``c`` servers (slots) without a queue under ``A``
    Erlangs of offered load.

    Computed by the recursion ``B(0) = 1``, ``B(k) = A B(k-1) / (k + A B(k-1))``,
    which never forms ``A^c`` or ``c!`` and so stays exact for thousands of slots."""
    if isinstance(servers, bool) or not isinstance(servers, int | np.integer) or servers < 0:
        raise ValueError(f"servers: expected a whole number of slots >= 0, got {servers!r}")
    if not math.isfinite(offered_erlangs) or offered_erlangs < 0:
        raise ValueError(f"offered_erlangs: expected a finite load >= 0, got {offered_erlangs!r}")
    blocking = 1.0
    for k in range(1, int(servers) + 1):
        carried = offered_erlangs * blocking
        blocking = carried / (k + carried)
    return blocking


def erlang_b_servers(offered_erlangs: float, target_blocking: float) -> int:
    """The fewest slots ``c`` whose Erlang-B blocking ``B(c, A)`` is at most
    ``target_blocking``: the limit a fault-free fleet would need."""
    if not 0 < target_blocking <= 1:
        raise ValueError(f"target_blocking: expected a share in (0, 1], got {target_blocking!r}")
    erlang_b(0, offered_erlangs)  # validates the load
    servers, blocking = 0, 1.0
    # B(c, A) falls strictly with c once c > 0, towards 0: the loop ends.
    while blocking > target_blocking:
        servers += 1
        carried = offered_erlangs * blocking
        blocking = carried / (servers + carried)
    return servers


# ------------------------------------------------------------------ standard errors


def binomial_standard_error(share: float, arrived: int) -> float:
    """The standard error of a denial share measured over ``arrived`` requests,
    as if each were refused independently with probability ``share``:
    ``sqrt(p (1 - p) / n)``.

    Within one run denials come in clusters (the slots stay full for a while
    once they fill), so this understates the run's true uncertainty; prefer
    ``seed_standard_error`` when there are several seeds."""
    if not 0 <= share <= 1:
        raise ValueError(f"share: expected 0..1, got {share!r}")
    if arrived <= 0:
        raise ValueError(f"arrived: expected at least one request, got {arrived!r}")
    return math.sqrt(share * (1 - share) / arrived)


def seed_standard_error(shares: Sequence[float]) -> float:
    """The standard error of the mean of one point's denial shares over seeds:
    the sample standard deviation over ``sqrt(seeds)``. Seeds are independent
    runs, so this counts the clustering of denials inside a run honestly."""
    values = np.asarray(shares, dtype=float)
    if len(values) < 2:
        raise ValueError(f"a standard error over seeds needs two seeds or more, got {len(values)}")
    return float(values.std(ddof=1) / math.sqrt(len(values)))


def erlang_b_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Per point ``(offered_erlangs, max_in_flight, lease_ttl_s)``: the simulated
    denial share (``simulated``: mean over seeds), its ``standard_error``, the
    Erlang-B share (``erlang_b``), the difference in standard errors
    (``z``, NaN when the error is 0) and ``runs``.

    The standard error is taken over seeds when a point has two or more;
    with one seed it is binomial over the run's ``requests_arrived`` (a lower
    bound, see ``binomial_standard_error``), or NaN without that column.
    ``standard_error_method`` says which."""
    _require(table, (*POINT, DENIAL_SHARE))
    _require_rows(table)
    rows = []
    for (offered, limit, ttl), runs in table.groupby(list(POINT), sort=True):
        shares = runs[DENIAL_SHARE].astype(float)
        simulated = float(shares.mean())
        if len(runs) >= 2:
            error, method = seed_standard_error(shares.tolist()), "seeds"
        elif ARRIVED in runs.columns and runs[ARRIVED].iloc[0] > 0:
            error = binomial_standard_error(simulated, int(runs[ARRIVED].iloc[0]))
            method = "binomial"
        else:
            error, method = math.nan, "none"
        expected = erlang_b(int(limit), float(offered))
        z = (simulated - expected) / error if error > 0 else math.nan
        rows.append({OFFERED: offered, LIMIT: limit, TTL: ttl, "simulated": simulated,
                     "standard_error": error, "standard_error_method": method,
                     "erlang_b": expected, "z": z, "runs": len(runs)})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ offered load


def offered_erlangs_of(scenario: Scenario) -> float:
    """The offered load of a scenario in Erlangs: its fleet-wide Poisson arrival
    rate (per second) times its mean request duration (seconds), the ``A`` of
    Erlang-B. Other arrival processes have no Erlang-B to compare with: a
    ``ScenarioError`` naming ``workload.arrivals``."""
    arrivals = scenario.workload.arrivals
    # Bursts are Poisson only inside their windows: not the process Erlang-B assumes.
    if not isinstance(arrivals, Poisson) or isinstance(arrivals, Bursts):
        raise ScenarioError(f"workload.arrivals: the offered load needs Poisson arrivals "
                            f"(e.g. 'poisson(300/s)'), got {arrivals_as_written(arrivals)!r}")
    rate = arrivals.rate_per_second * (scenario.fleet.replicas if arrivals.per_replica else 1)
    mean_seconds = scenario.workload.duration.mean / MICROSECONDS_PER_SECOND
    if not math.isfinite(mean_seconds):
        raise ScenarioError(f"workload.duration: {scenario.workload.duration} has no finite "
                            "mean, so the offered load is unbounded")
    return rate * mean_seconds


# ------------------------------------------------------------------ a sweep's results

LIMIT_PARAMETER = "store_settings.max_in_flight"
TTL_PARAMETER = "store_settings.lease_ttl"
ARRIVALS_PARAMETER = "workload.arrivals"


def load_lease_sweep(sweep_file: str | Path, seeds: int | list[int] | None = None,
                     limits: list[int] | None = None, arrivals: list[str] | None = None,
                     lease_ttls: list[str] | None = None,
                     set_fields: Mapping[str, Any] | None = None) -> Sweep:
    """A lease sweep as a notebook's parameters adjust it: the sweep file, with
    ``seeds``, the limits (``store_settings.max_in_flight``), the offered loads
    as arrival processes (``workload.arrivals``, e.g. ``["poisson(36/s)"]``)
    and the lease TTLs (``store_settings.lease_ttl``) varied instead of the
    file's when given, and other scenario fields (``set_fields``, dotted paths)
    set at every point. A relative ``sweep_file`` is inside the lab's checkout."""
    path = Path(sweep_file)
    if not path.is_absolute():
        path = lab_path(str(path))
    vary: dict[str, Any] = {}
    for parameter, values in ((LIMIT_PARAMETER, limits), (ARRIVALS_PARAMETER, arrivals),
                              (TTL_PARAMETER, lease_ttls)):
        if values is not None:
            vary[parameter] = list(values)
    return load_sweep(path, seeds=seeds, set_fields=dict(set_fields or {}) or None,
                      vary=vary or None)


def planner_table(results: pd.DataFrame, sweep: Sweep) -> pd.DataFrame:
    """A lease sweep's results (``simulator.sweeps.read_results``) as a planner's
    table: every run of the sweep's points, with ``offered_erlangs``,
    ``max_in_flight`` and ``lease_ttl_s`` read from the scenario at its point
    (whether the sweep varied them or not) beside every summary metric.
    Runs of points the sweep no longer has (a narrower re-run in the same
    folder) are left out."""
    missing = [column for column in ("point", SEED, *COSTS) if column not in results.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in these results; "
                       "are they a lease store's?")
    points = pd.DataFrame([{"point": point.point_id, **_sizing_of(sweep.scenario_at(point))}
                           for point in sweep.points])
    # The point's own values replace any column of the same name in the results.
    kept = results.drop(columns=[column for column in POINT if column in results.columns])
    table = points.merge(kept, on="point", how="inner")
    return table.sort_values([*POINT, SEED], ignore_index=True)


def run_seconds_of(sweep: Sweep) -> float:
    """How long each run of the sweep lasts in virtual time (arrivals and drain),
    in seconds: what turns a target in slots into one in lease-seconds.
    A sweep whose points last differently is refused (``ScenarioError``)."""
    lengths = {(scenario.duration_us + scenario.drain_us) / MICROSECONDS_PER_SECOND
               for scenario in (sweep.scenario_at(point) for point in sweep.points)}
    if len(lengths) != 1:
        raise ScenarioError(f"sweep {sweep.name!r}: its points last "
                            f"{', '.join(f'{s:g} s' for s in sorted(lengths))}; targets per run "
                            "need runs of one length (vary neither duration nor drain)")
    return lengths.pop()


def _sizing_of(scenario: Scenario) -> dict[str, float]:
    """A scenario's offered load, limit and lease TTL (seconds)."""
    settings = scenario.settings.model_dump(by_alias=True)
    for name in ("max_in_flight", "lease_ttl"):
        if name not in settings:
            raise ScenarioError(f"store_settings.{name}: the store {scenario.store!r} has no "
                                "such setting; lease sizing needs a concurrency-lease store")
    # Dumped as written ("5s"), whatever unit the store's model keeps it in.
    ttl_us = parse_duration_us(settings["lease_ttl"])
    return {OFFERED: offered_erlangs_of(scenario), LIMIT: int(settings["max_in_flight"]),
            TTL: ttl_us / MICROSECONDS_PER_SECOND}


# ------------------------------------------------------------------ seed bands


def point_bands(table: pd.DataFrame, cost: str, x: str = TTL,
                low: float = 0.1, high: float = 0.9) -> pd.DataFrame:
    """One cost's spread over seeds at every point: per value of ``x`` within
    each combination of the other two point columns, the ``median`` over
    seeds, the ``low``/``high`` quantiles (10th and 90th percentile by
    default), the ``worst`` seed (the largest value) and ``runs``."""
    if x not in POINT:
        raise ValueError(f"x: expected one of {', '.join(POINT)}, got {x!r}")
    _require(table, (*POINT, cost))
    by = [column for column in POINT if column != x]
    bands = seed_bands(table, x, cost, by=by, low=low, high=high)
    worst = table.groupby([*by, x], sort=True)[cost].max().rename("worst").reset_index()
    return bands.merge(worst, on=[*by, x])


# ------------------------------------------------------------------ the recommendation


@dataclass(frozen=True)
class RegionTargets:
    """What a planner accepts from a (limit, TTL) pair, in every seed:

    * ``denial_share`` — at most this share of arrived requests refused (0..1);
    * ``leaked_lease_seconds`` — at most this many lease-seconds leaked per run;
    * ``concurrency_excess_lease_seconds`` — at most this many lease-seconds
      above the limit per run (0: the limit is never exceeded).

    Lease-seconds are per run, so they scale with the run's length and load:
    set them for the scenario the sweep runs."""

    denial_share: float
    leaked_lease_seconds: float
    concurrency_excess_lease_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.denial_share <= 1:
            raise ValueError(f"denial_share: expected a share 0..1, got {self.denial_share!r}")
        for name in ("leaked_lease_seconds", "concurrency_excess_lease_seconds"):
            value = getattr(self, name)
            if math.isnan(value) or value < 0:
                raise ValueError(f"{name}: expected lease-seconds >= 0, got {value!r}")

    @classmethod
    def in_average_slots(cls, denial_share: float, leaked_slots: float, excess_slots: float,
                         run_seconds: float) -> RegionTargets:
        """Targets whose lease-seconds are written as slots held on average over a
        run of ``run_seconds`` (arrivals and drain): one slot leaked on average
        over an 80 s run is 80 leaked lease-seconds."""
        if not run_seconds > 0:
            raise ValueError(f"run_seconds: expected a run longer than 0 s, got {run_seconds!r}")
        return cls(denial_share=denial_share, leaked_lease_seconds=leaked_slots * run_seconds,
                   concurrency_excess_lease_seconds=excess_slots * run_seconds)

    def of(self, cost: str) -> float:
        """The target of a cost column (``DENIAL_SHARE``, ``LEAKED`` or ``EXCESS``)."""
        return {DENIAL_SHARE: self.denial_share, LEAKED: self.leaked_lease_seconds,
                EXCESS: self.concurrency_excess_lease_seconds}[cost]


OK_COLUMN = {DENIAL_SHARE: "denial_ok", LEAKED: "leak_ok", EXCESS: "excess_ok"}
"""Per cost, the column of ``RegionRecommendation.per_point`` saying it met its target."""


@dataclass(frozen=True)
class RegionRecommendation:
    """The outcome of ``recommend_region``.

    ``per_point`` has one row per tested point (sorted by load, limit, TTL):
    the point columns, ``runs``, each cost's ``worst_<cost>`` and
    ``median_<cost>`` over seeds, whether each worst seed met its target
    (``denial_ok``, ``leak_ok``, ``excess_ok``) and ``acceptable`` (all three).
    ``pairs`` has one row per tested (limit, TTL) pair: ``loads_tested``,
    ``loads_acceptable`` and ``recommended``. ``offered_erlangs`` are the
    loads in the table."""

    per_point: pd.DataFrame
    pairs: pd.DataFrame
    targets: RegionTargets
    offered_erlangs: tuple[float, ...]

    @property
    def found(self) -> bool:
        return bool(self.pairs["recommended"].any())

    @property
    def region(self) -> list[tuple[int, float]]:
        """The recommended ``(max_in_flight, lease_ttl_s)`` pairs, sorted."""
        chosen = self.pairs[self.pairs["recommended"]]
        return [(int(limit), float(ttl)) for limit, ttl in zip(chosen[LIMIT], chosen[TTL],
                                                                strict=True)]

    @property
    def smallest_limit(self) -> int | None:
        """The fewest slots with which some tested TTL is recommended."""
        region = self.region
        return min(limit for limit, _ in region) if region else None

    def smallest_limit_by_ttl(self) -> dict[float, int]:
        """Per tested TTL with a recommended limit, the fewest slots recommended."""
        found: dict[float, int] = {}
        for limit, ttl in self.region:
            found[ttl] = min(limit, found.get(ttl, limit))
        return dict(sorted(found.items()))

    def ttl_range_at(self, limit: int) -> tuple[float, float] | None:
        """The shortest and longest recommended TTL at ``limit`` slots (None: none).
        The TTLs between them were all tested and recommended unless
        ``ttls_are_contiguous_at(limit)`` says otherwise."""
        ttls = [ttl for chosen, ttl in self.region if chosen == limit]
        return (min(ttls), max(ttls)) if ttls else None

    def ttls_are_contiguous_at(self, limit: int) -> bool:
        """False when a TTL tested at ``limit`` between two recommended ones is not
        recommended (seed noise, usually: run more seeds)."""
        span = self.ttl_range_at(limit)
        if span is None:
            return True
        at_limit = self.pairs[(self.pairs[LIMIT] == limit)
                              & self.pairs[TTL].between(span[0], span[1])]
        return bool(at_limit["recommended"].all())

    def failing(self, cost: str) -> pd.DataFrame:
        """The tested points whose worst seed missed ``cost``'s target."""
        return self.per_point[~self.per_point[OK_COLUMN[cost]]]


def recommend_region(table: pd.DataFrame, targets: RegionTargets) -> RegionRecommendation:
    """The (``max_in_flight``, lease TTL) pairs a planner should choose from.

    The rule. For each tested point ``(A, c, T)`` — offered load, limit,
    TTL — take the **worst seed** (the largest value over the point's runs) of
    each cost. The point is *acceptable* when

    * its worst denial share is ``<= targets.denial_share``, and
    * its worst leaked lease-seconds are ``<= targets.leaked_lease_seconds``, and
    * its worst concurrency excess is ``<= targets.concurrency_excess_lease_seconds``.

    A run whose cost is missing (NaN) cannot vouch for its point: the point is
    not acceptable. The pair ``(c, T)`` is **recommended** when it was tested
    at every offered load in the table and is acceptable at each: a planner
    sweeps the loads the limit must serve, and a pair that fails at one of
    them is not a safe choice. The recommended region is the set of those
    pairs; it may be empty, and then nothing is invented.

    ``table`` is a planner's table (``PLANNER_COLUMNS``, one row per run)."""
    _require(table, PLANNER_COLUMNS)
    _require_rows(table)
    grouped = table.groupby(list(POINT), sort=True)
    per_point = grouped.size().rename("runs").to_frame()
    for cost in COSTS:
        # max() skips NaN; a point with any NaN run is failed explicitly below.
        per_point[f"worst_{cost}"] = grouped[cost].max()
        per_point[f"median_{cost}"] = grouped[cost].median()
        complete = grouped[cost].apply(lambda values: bool(values.notna().all()))
        per_point[OK_COLUMN[cost]] = complete & (per_point[f"worst_{cost}"] <= targets.of(cost))
    per_point["acceptable"] = per_point[list(OK_COLUMN.values())].all(axis=1)
    per_point = per_point.reset_index()
    loads = tuple(float(load) for load in sorted(per_point[OFFERED].unique()))
    by_pair = per_point.groupby([LIMIT, TTL], sort=True)
    pairs = pd.DataFrame({
        "loads_tested": by_pair[OFFERED].nunique(),
        "loads_acceptable": by_pair.apply(
            lambda rows: int(rows.loc[rows["acceptable"], OFFERED].nunique()),
            include_groups=False),
    }).reset_index()
    pairs["recommended"] = ((pairs["loads_tested"] == len(loads))
                            & (pairs["loads_acceptable"] == len(loads)))
    return RegionRecommendation(per_point, pairs, targets, loads)


# ------------------------------------------------------------------ text


def format_pair(limit: int, ttl_seconds: float) -> str:
    """A (limit, TTL) pair as a planner reads it: ``"20 slots, TTL 5 s"``."""
    return f"{int(limit)} slots, TTL {format_seconds(ttl_seconds)}"


def region_line(recommendation: RegionRecommendation) -> str:
    """The region on one line, for a log or a test: ``"recommended region:
    20 slots, TTL 5 s; 24 slots, TTL 5 s"`` or ``"recommended region: none"``."""
    pairs = "; ".join(format_pair(limit, ttl) for limit, ttl in recommendation.region)
    return f"recommended region: {pairs or 'none'}"


def describe_region(recommendation: RegionRecommendation) -> str:
    """The notebook's conclusion, as Markdown computed from the recommendation:
    the targets, the region (or that there is none, and which target rules out
    what), and how many slots Erlang-B alone would have asked for."""
    targets = recommendation.targets
    loads = ", ".join(f"{load:.3g}" for load in recommendation.offered_erlangs)
    lines = [
        f"Targets, met by the worst seed of every point at every tested offered load "
        f"({loads} Erlangs): denial share ≤ **{targets.denial_share:g}**, leaked lease-seconds "
        f"≤ **{targets.leaked_lease_seconds:g}** and concurrency excess ≤ "
        f"**{targets.concurrency_excess_lease_seconds:g}** lease-seconds per run.",
        "",
    ]
    if recommendation.found:
        smallest = recommendation.smallest_limit
        assert smallest is not None
        span = recommendation.ttl_range_at(smallest)
        assert span is not None
        ttls = (format_seconds(span[0]) if span[0] == span[1]
                else f"{format_seconds(span[0])} to {format_seconds(span[1])}")
        lines += [
            f"**Recommended (max_in_flight, lease TTL): {len(recommendation.region)} tested "
            f"pair(s); the fewest slots is {smallest}, with a lease TTL of {ttls}.**",
            "",
            "- The fewest slots recommended at each TTL: " + "; ".join(
                f"{format_seconds(ttl)} → {limit}"
                for ttl, limit in recommendation.smallest_limit_by_ttl().items()) + ".",
        ]
        if not recommendation.ttls_are_contiguous_at(smallest):
            lines.append(f"- At {smallest} slots a TTL between those recommended misses a "
                         "target: the seeds disagree; run more seeds before trusting the edges.")
        heaviest = max(recommendation.offered_erlangs)
        fault_free = erlang_b_servers(heaviest, targets.denial_share) if (
            targets.denial_share > 0) else None
        if fault_free is not None:
            lines.append(f"- Erlang-B alone (no faults) would need {fault_free} slots for a "
                         f"denial share ≤ {targets.denial_share:g} at {heaviest:.3g} Erlangs; "
                         f"the recommendation needs {smallest}.")
    else:
        lines.append("**No tested (max_in_flight, lease TTL) pair meets every target**, so "
                     "the sweep supports no region.")
        for cost in COSTS:
            met = recommendation.per_point.groupby([LIMIT, TTL])[OK_COLUMN[cost]].all()
            within = "; ".join(format_pair(limit, ttl) for (limit, ttl), ok in met.items() if ok)
            lines.append(f"- Pairs within the {COST_NAMES[cost]} target: {within or 'none'}.")
        lines.append("\nRaise the limit if the denial target rules everything out, shorten "
                     "the TTL for the leak target, lengthen it for the excess target, or "
                     "widen the sweep where one target is met by none.")
    return "\n".join(lines)


def describe_erlang_fit(comparison: pd.DataFrame, within: float = 3.0) -> str:
    """How the simulated denial shares sit against Erlang-B (Markdown): how many
    points lie within ``within`` standard errors, and the largest departure."""
    judged = comparison[comparison["z"].notna()]
    unjudged = len(comparison) - len(judged)
    if judged.empty:
        return (f"None of the {len(comparison)} points has a standard error (one seed and no "
                "count of arrivals): run two seeds or more to compare with Erlang-B.")
    close = int((judged["z"].abs() <= within).sum())
    worst = judged.loc[judged["z"].abs().idxmax()]
    text = (f"{close} of {len(judged)} points lie within {within:g} standard errors of "
            f"Erlang-B; the largest departure is {worst['z']:+.2g} standard errors "
            f"({int(worst[LIMIT])} slots at {worst[OFFERED]:.3g} Erlangs: simulated "
            f"{worst['simulated']:.3g}, Erlang-B {worst['erlang_b']:.3g}).")
    if unjudged:
        text += f" {unjudged} point(s) without a standard error are not judged."
    return text


FLEET_WIDE_FAULTS = frozenset({"partition", "server_restart", "failover", "latency_spike"})
"""Faults whose rate is the fleet's, not each replica's."""


def describe_sweep(sweep: Sweep) -> str:
    """What a lease sweep ran, in a planner's words (Markdown): the store and
    fleet, the request durations, the faults, the run length, and the offered
    loads, limits and lease TTLs tried with their seeds (faults as at the
    sweep's first point)."""
    scenarios = [sweep.scenario_at(point) for point in sweep.points]
    first = scenarios[0]
    sizing = pd.DataFrame([_sizing_of(scenario) for scenario in scenarios])
    rates = {name: fault["rate"] for name, fault in first.faults.model_dump(
        exclude_none=True).items() if isinstance(fault, dict) and fault.get("rate", 0) > 0}
    faults = [f"{name.replace('_', ' ')} {rate * 3600:.3g}/h"
              + ("" if name in FLEET_WIDE_FAULTS else " per replica")
              for name, rate in rates.items()]
    if first.network.request_loss > 0:
        faults.append(f"{100 * first.network.request_loss:.3g}% of requests lost")
    if first.network.reply_loss > 0:
        faults.append(f"{100 * first.network.reply_loss:.3g}% of replies lost")
    run_seconds = (first.duration_us + first.drain_us) / MICROSECONDS_PER_SECOND

    def listed(column: str, spell) -> str:
        return ", ".join(spell(value) for value in sorted(sizing[column].unique()))

    return "\n".join([
        f"**Sweep {sweep.name!r}** on `{first.store}`: {first.fleet.replicas} replicas, "
        f"request durations `{first.workload.duration}`.",
        f"- Faults: {'; '.join(faults) or 'none'}.",
        f"- Each run: {format_seconds(first.duration_us / MICROSECONDS_PER_SECOND)} of "
        f"arrivals and {format_seconds(first.drain_us / MICROSECONDS_PER_SECOND)} of drain "
        f"({format_seconds(run_seconds)} of virtual time).",
        f"- Offered loads: {listed(OFFERED, lambda load: f'{load:.3g}')} Erlangs; limits: "
        f"{listed(LIMIT, lambda limit: str(int(limit)))} slots; lease TTLs: "
        f"{listed(TTL, format_seconds)}; seeds {', '.join(map(str, sweep.seeds))}.",
    ])


# ------------------------------------------------------------------ checks


def _require(table: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in this table; "
                       f"a planner's table has {', '.join(PLANNER_COLUMNS)}")


def _require_rows(table: pd.DataFrame) -> None:
    if table.empty:
        raise ValueError("no runs in this table")
