"""Tuning the reservation TTL: what a sweep over ``store_settings.reservation_ttl``
says a capacity planner should choose (notebook ``02_tuning_the_reservation_ttl``).
Compute only; the figures are in ``simulator.analysis.ttl_figures``.

A reservation TTL is wrong in two directions. Too short, and the store
reclaims the hold of a request that is still running (a *premature expiry*):
its money stops counting against the cap, so the cap can be overshot. Too
long, and the hold of a request whose replica crashed keeps blocking budget
until the TTL passes (a *leaked hold*), so requests the truth had room for are
denied. This module turns a TTL sweep's results into:

* per-run cost shares on comparable scales (``with_cost_shares``): overshoot
  and expired money as a percentage of the caps, denials as a percentage of
  the requests that arrived;
* the TTL range to choose (``recommend_ttl_range``, defined there), or the
  plain statement that the sweep found none;
* where those TTLs sit in the request-duration distribution
  (``duration_quantile``, ``duration_exceedance``, in seconds: the
  distribution's own ``quantile`` and ``survival``, analytic for the lab's
  distribution families, exact for an empirical sample);
* the notebook's computed conclusions (``describe_setup``,
  ``describe_trends``, ``describe_recommendation``) and the runs to follow
  over time (``example_ttls``, ``aggregate_series``).

Everything here is deterministic: no randomness, only the runs' results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.analysis import lab_path
from simulator.scenario.arrivals import arrivals_as_written
from simulator.scenario.distributions import Distribution
from simulator.scenario.empirical import Empirical
from simulator.scenario.model import Scenario, ScenarioError
from simulator.sweeps import Sweep, load_sweep
from stores.quantities import parse_duration_us

TTL_PARAMETER = "store_settings.reservation_ttl"
"""The scenario field the sweep varies."""

TTL_SECONDS = f"{TTL_PARAMETER}_seconds"
"""The results column holding each run's TTL in seconds (written by the sweep)."""

OVERSHOOT_COLUMN = "overshoot_by_premature_expiry_percent_of_cap"
"""Cap overshoot caused by premature expiry, summed over subjects, as % of their summed caps."""

LEAK_COLUMN = "denials_caused_by_leaked_holds_percent_of_arrived"
"""Denials the store's record would not have made without the leaked holds it counted,
as % of the requests that arrived."""

DEFAULT_QUANTILES = (0.5, 0.9, 0.99, 0.999)
"""The request-duration quantiles the figures mark."""

MICROSECONDS_PER_SECOND = 1_000_000

RequestDurations = Distribution | Empirical
"""A scenario's ``workload.duration``: a distribution or an empirical sample (microseconds)."""


# ------------------------------------------------------------------ the sweep


def load_ttl_sweep(sweep_file: str | Path, seeds: int | list[int] | None = None,
                   ttl_range: dict[str, Any] | list[str] | None = None,
                   request_duration: str | None = None, crash_rate: str | None = None,
                   set_fields: Mapping[str, Any] | None = None) -> Sweep:
    """The TTL sweep a notebook's parameters describe: the sweep file, with
    ``seeds``, the TTLs (``ttl_range``: a range ``{low, high, steps, scale}``
    or a list of durations), the request-duration distribution
    (``workload.duration``), the replica crash rate (``faults.crash.rate``) and
    any other scenario fields (``set_fields``, dotted paths) replaced when given.
    A relative ``sweep_file`` is inside the lab's checkout."""
    path = Path(sweep_file)
    if not path.is_absolute():
        path = lab_path(str(path))
    overrides = dict(set_fields or {})
    if request_duration is not None:
        overrides["workload.duration"] = request_duration
    if crash_rate is not None:
        overrides["faults.crash.rate"] = crash_rate
    vary = {TTL_PARAMETER: ttl_range} if ttl_range is not None else None
    return load_sweep(path, seeds=seeds, set_fields=overrides or None, vary=vary)


def ttl_sweep_scenario(sweep: Sweep) -> Scenario:
    """The scenario every point of a TTL sweep shares but for its TTL.

    Raises ``ScenarioError`` when the sweep varies anything besides
    ``store_settings.reservation_ttl``: the recommendation compares runs that
    differ only in their TTL."""
    others = [name for name in sweep.parameters if name != TTL_PARAMETER]
    if TTL_PARAMETER not in sweep.parameters or others:
        raise ScenarioError(
            f"sweep {sweep.name!r}: a TTL sweep varies {TTL_PARAMETER} and nothing else; "
            f"it varies {', '.join(sweep.parameters) or 'nothing'}")
    return sweep.scenario_at(sweep.points[0])


def subject_cap_of(scenario: Scenario) -> int:
    """The scenario's per-subject spend cap in micro-dollars (a budget store's setting)."""
    cap = getattr(scenario.settings, "subject_cap_microdollars", None)
    if cap is None:
        raise ScenarioError(f"scenario {scenario.name!r}: the store {scenario.store!r} has no "
                            "subject_cap_microdollars; the TTL notebook needs a budget store")
    return int(cap)


def with_cost_shares(frame: pd.DataFrame, subject_cap_microdollars: int) -> pd.DataFrame:
    """The sweep's rows with the costs of each TTL on comparable scales added.

    The caps are ``keys_total`` (subjects that saw traffic) times the subject
    cap, or the row's own ``store_settings.subject_cap_microdollars`` when the
    results carry one. Columns added:

    * ``cap_total_microdollars``;
    * ``premature_expiries_percent_of_admitted``: holds reclaimed while their
      request still ran, per 100 admitted requests;
    * ``premature_expiry_money_percent_of_cap``: the money those holds held;
    * ``overshoot_by_premature_expiry_percent_of_cap`` (``OVERSHOOT_COLUMN``):
      ``cap_overshoot_by_hold_expired_while_running_microdollars``;
    * ``leaked_hold_dollar_seconds``: leaked hold money × time, in $·s;
    * ``leaked_hold_peak_percent_of_cap``: the most money leaked at once on one
      subject, as % of its cap;
    * ``false_denials_percent_of_arrived`` and
      ``denials_caused_by_leaked_holds_percent_of_arrived`` (``LEAK_COLUMN``).
    """
    needed = ["keys_total", "requests_admitted", "requests_arrived", "premature_expiries",
              "premature_expiry_microdollars",
              "cap_overshoot_by_hold_expired_while_running_microdollars",
              "leaked_hold_microdollar_seconds", "leaked_hold_peak_share_of_cap",
              "false_denials", "denials_caused_by_leaked_holds"]
    missing = [name for name in needed if name not in frame.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in these results")
    shares = frame.copy()
    cap = shares.get("store_settings.subject_cap_microdollars", subject_cap_microdollars)
    shares["cap_total_microdollars"] = shares["keys_total"] * cap
    caps = shares["cap_total_microdollars"].where(shares["cap_total_microdollars"] > 0)
    admitted = shares["requests_admitted"].where(shares["requests_admitted"] > 0)
    arrived = shares["requests_arrived"].where(shares["requests_arrived"] > 0)
    shares["premature_expiries_percent_of_admitted"] = (
        100 * shares["premature_expiries"] / admitted)
    shares["premature_expiry_money_percent_of_cap"] = (
        100 * shares["premature_expiry_microdollars"] / caps)
    shares[OVERSHOOT_COLUMN] = (
        100 * shares["cap_overshoot_by_hold_expired_while_running_microdollars"] / caps)
    shares["leaked_hold_dollar_seconds"] = (
        shares["leaked_hold_microdollar_seconds"] / MICROSECONDS_PER_SECOND)
    shares["leaked_hold_peak_percent_of_cap"] = 100 * shares["leaked_hold_peak_share_of_cap"]
    shares["false_denials_percent_of_arrived"] = 100 * shares["false_denials"] / arrived
    shares[LEAK_COLUMN] = 100 * shares["denials_caused_by_leaked_holds"] / arrived
    return shares


# ------------------------------------------------------------------ the recommendation


@dataclass(frozen=True)
class TtlTolerances:
    """How much worse than the best tested TTL each cost may be, in percentage points.

    ``seed_quantile`` picks the statistic over seeds that is compared: 0.5
    judges a TTL by its median seed, 0.9 by a bad one (more cautious)."""

    overshoot_percent_of_cap: float = 1.0
    leak_denials_percent_of_arrived: float = 1.0
    seed_quantile: float = 0.5

    def __post_init__(self) -> None:
        if self.overshoot_percent_of_cap < 0 or self.leak_denials_percent_of_arrived < 0:
            raise ValueError("tolerances are percentages of zero or more")
        if not 0 <= self.seed_quantile <= 1:
            raise ValueError(f"seed_quantile: expected 0..1, got {self.seed_quantile}")


@dataclass(frozen=True)
class TtlRecommendation:
    """The outcome of ``recommend_ttl_range``.

    ``per_ttl`` has one row per tested TTL (ascending): ``ttl_seconds``, the
    seed statistic of each cost (``overshoot``, ``leak_denials``, in the units
    of ``OVERSHOOT_COLUMN`` and ``LEAK_COLUMN``), ``runs``, and whether each
    cost is within its limit (``overshoot_ok``, ``leak_ok``, ``acceptable``).
    ``low_seconds``/``high_seconds`` bound the recommended range (both None
    when no tested TTL meets both limits)."""

    per_ttl: pd.DataFrame
    overshoot_limit: float
    leak_limit: float
    tolerances: TtlTolerances
    low_seconds: float | None
    high_seconds: float | None

    @property
    def found(self) -> bool:
        return self.low_seconds is not None

    @property
    def shortest_ttl_within_overshoot_limit(self) -> float | None:
        """The shortest tested TTL whose premature-expiry overshoot is within its limit."""
        ok = self.per_ttl.loc[self.per_ttl["overshoot_ok"], "ttl_seconds"]
        return float(ok.min()) if len(ok) else None

    @property
    def longest_ttl_within_leak_limit(self) -> float | None:
        """The longest tested TTL whose leaked-hold denials are within their limit."""
        ok = self.per_ttl.loc[self.per_ttl["leak_ok"], "ttl_seconds"]
        return float(ok.max()) if len(ok) else None

    @property
    def acceptable_is_contiguous(self) -> bool:
        """False when some acceptable TTLs lie outside the range (seed noise, usually)."""
        acceptable = self.per_ttl.loc[self.per_ttl["acceptable"], "ttl_seconds"]
        if not self.found:
            return acceptable.empty
        assert self.low_seconds is not None and self.high_seconds is not None
        return bool(acceptable.between(self.low_seconds, self.high_seconds).all())


def recommend_ttl_range(shares: pd.DataFrame,
                        tolerances: TtlTolerances = TtlTolerances()) -> TtlRecommendation:
    """The range of tested TTLs a planner should choose from.

    Definition. For each tested TTL ``T``, take over its seeds the
    ``tolerances.seed_quantile`` quantile (default: the median) of

    * ``O(T)``: cap overshoot caused by premature expiry, % of the caps
      (``OVERSHOOT_COLUMN``), which falls as ``T`` grows, and
    * ``L(T)``: denials caused by leaked holds, % of arrived requests
      (``LEAK_COLUMN``), which rises as ``T`` grows.

    ``T`` is *acceptable* when ``O(T) <= min O + overshoot tolerance`` and
    ``L(T) <= min L + leak tolerance`` (minima over the tested TTLs). The
    recommended range runs from the lowest to the highest TTL of the longest
    run of consecutive acceptable TTLs (the shorter one on a tie). When no TTL
    is acceptable, there is no range: the overshoot limit is met only above
    the TTLs the leak limit allows, and the bounds are None.

    ``shares`` is ``with_cost_shares`` output (one row per run)."""
    for column in (TTL_SECONDS, OVERSHOOT_COLUMN, LEAK_COLUMN):
        if column not in shares.columns:
            raise KeyError(f"no column {column!r}; pass the output of with_cost_shares")
    if shares.empty:
        raise ValueError("no runs to recommend a TTL from")
    grouped = shares.groupby(TTL_SECONDS, sort=True)
    q = tolerances.seed_quantile
    per_ttl = pd.DataFrame({
        "overshoot": grouped[OVERSHOOT_COLUMN].quantile(q),
        "leak_denials": grouped[LEAK_COLUMN].quantile(q),
        "runs": grouped[OVERSHOOT_COLUMN].size(),
    }).rename_axis("ttl_seconds").reset_index()
    # A run without caps or arrivals has no share (NaN): it cannot vouch for its TTL.
    overshoot_limit = float(per_ttl["overshoot"].min()) + tolerances.overshoot_percent_of_cap
    leak_limit = float(per_ttl["leak_denials"].min()) + tolerances.leak_denials_percent_of_arrived
    per_ttl["overshoot_ok"] = per_ttl["overshoot"] <= overshoot_limit
    per_ttl["leak_ok"] = per_ttl["leak_denials"] <= leak_limit
    per_ttl["acceptable"] = per_ttl["overshoot_ok"] & per_ttl["leak_ok"]
    low, high = _longest_run(per_ttl["ttl_seconds"].tolist(), per_ttl["acceptable"].tolist())
    return TtlRecommendation(per_ttl, overshoot_limit, leak_limit, tolerances, low, high)


def _longest_run(ttls: Sequence[float], acceptable: Sequence[bool]
                 ) -> tuple[float | None, float | None]:
    best: tuple[int, int] | None = None
    start: int | None = None
    for index, ok in enumerate([*acceptable, False]):
        if ok and start is None:
            start = index
        elif not ok and start is not None:
            if best is None or index - start > best[1] - best[0]:
                best = (start, index)
            start = None
    if best is None:
        return None, None
    return float(ttls[best[0]]), float(ttls[best[1] - 1])


# ------------------------------------------------------------------ request durations


def duration_exceedance(durations: RequestDurations, seconds: float) -> float:
    """The share of requests that run longer than ``seconds``: ``P(D > seconds)``,
    the durations' survival function (``Distribution.survival``: analytic for
    the lab's distribution families; ``Empirical.survival``: for an empirical
    sample, the share of its values above, each draw picking a row uniformly)."""
    return durations.survival(seconds * MICROSECONDS_PER_SECOND)


def duration_quantile(durations: RequestDurations, probability: float) -> float:
    """The ``probability`` quantile of request durations, in seconds: the
    smallest ``d`` with ``P(D <= d) >= probability`` (``Distribution.quantile``:
    analytic for the lab's families; ``Empirical.quantile``: for an empirical
    sample, its inverted-CDF quantile)."""
    return durations.quantile(probability) / MICROSECONDS_PER_SECOND


def duration_quantiles(durations: RequestDurations,
                       probabilities: Sequence[float] = DEFAULT_QUANTILES) -> dict[str, float]:
    """Named quantiles in seconds, e.g. ``{"p50": 1.59, "p99.9": 100.0}``."""
    return {percentile_label(p): duration_quantile(durations, p) for p in probabilities}


def percentile_label(probability: float) -> str:
    """``0.999`` → ``"p99.9"``, ``0.5`` → ``"p50"``."""
    return f"p{100 * probability:.6g}"


# ------------------------------------------------------------------ text


def format_seconds(seconds: float) -> str:
    """A duration as a planner reads it: ``"500 ms"``, ``"3.9 s"``, ``"2 min"``."""
    if math.isinf(seconds):
        return "∞"
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min"


def tail_position(durations: RequestDurations, seconds: float) -> str:
    """Where a TTL sits in the duration tail, in words: ``"13% of requests run
    longer (it is the p87 of request duration)"``; the share to two significant
    digits, the percentile to match."""
    outliving_percent = 100 * duration_exceedance(durations, seconds)
    if outliving_percent == 0:
        return "no request runs longer (it is above every request duration)"
    if outliving_percent == 100:
        return "every request runs longer (it is below every request duration)"
    shown = float(f"{outliving_percent:.2g}")
    if shown >= 100:  # rounds up to 100 without being 100
        return "nearly every request runs longer (it is below the p1 of request duration)"
    decimals = max(0, 1 - math.floor(math.log10(shown)))
    return (f"{shown:.{decimals}f}% of requests run longer "
            f"(it is the p{100 - shown:.{decimals}f} of request duration)")


def describe_recommendation(recommendation: TtlRecommendation,
                            durations: RequestDurations) -> str:
    """The notebook's conclusion, as Markdown computed from the recommendation."""
    tol = recommendation.tolerances
    per_ttl = recommendation.per_ttl
    statistic = "median" if tol.seed_quantile == 0.5 else f"{tol.seed_quantile:g} quantile"
    lines = [
        f"Judged on the {statistic} over seeds of each tested TTL, the limits are: "
        f"premature-expiry overshoot ≤ **{recommendation.overshoot_limit:.3g}% of the caps** "
        f"(its best, {per_ttl['overshoot'].min():.3g}%, plus "
        f"{tol.overshoot_percent_of_cap:g} points) and denials caused by leaked holds ≤ "
        f"**{recommendation.leak_limit:.3g}% of arrived requests** (its best, "
        f"{per_ttl['leak_denials'].min():.3g}%, plus "
        f"{tol.leak_denials_percent_of_arrived:g} points).",
        "",
    ]
    if recommendation.found:
        assert recommendation.low_seconds is not None and recommendation.high_seconds is not None
        low, high = recommendation.low_seconds, recommendation.high_seconds
        span = (format_seconds(low) if low == high
                else f"{format_seconds(low)} to {format_seconds(high)}")
        lines += [
            f"**Recommended reservation TTL: {span}** (shaded on the figures).",
            "",
            f"- At {format_seconds(low)}, {tail_position(durations, low)}.",
        ]
        if high != low:
            lines.append(f"- At {format_seconds(high)}, {tail_position(durations, high)}.")
        lines += [_neighbour(per_ttl, low, "below"), _neighbour(per_ttl, high, "above")]
        if not recommendation.acceptable_is_contiguous:
            outside = per_ttl.loc[per_ttl["acceptable"] & ~per_ttl["ttl_seconds"].between(
                low, high), "ttl_seconds"]
            lines.append(f"- Some TTLs outside the range also met both limits "
                         f"({', '.join(format_seconds(t) for t in outside)}), with failing "
                         "TTLs in between: the seeds disagree; run more seeds before trusting "
                         "the edges.")
    else:
        lines.append("**No tested TTL meets both limits**, so the sweep supports no TTL range.")
        for name, column in (("the overshoot limit", "overshoot_ok"),
                             ("the leak-denial limit", "leak_ok")):
            within = per_ttl.loc[per_ttl[column], "ttl_seconds"]
            listed = ", ".join(format_seconds(t) for t in within) or "none"
            lines.append(f"- TTLs within {name}: {listed}.")
        lines.append("\nWith this duration tail and crash rate, choose which cost to accept "
                     "(widen a tolerance), make crashes rarer, shorten the tail (a request "
                     "timeout), or widen the swept TTLs if a limit is met by none.")
    return "\n".join(lines)


def _neighbour(per_ttl: pd.DataFrame, edge: float, side: str) -> str:
    """What the tested TTL just outside the range's edge failed, in words."""
    outside = per_ttl[per_ttl["ttl_seconds"] < edge] if side == "below" else per_ttl[
        per_ttl["ttl_seconds"] > edge]
    if outside.empty:
        return (f"- No TTL {side} {format_seconds(edge)} was tested: the range may extend "
                "further; widen the sweep to see where it ends.")
    row = outside.iloc[-1] if side == "below" else outside.iloc[0]
    failed = []
    if not row["overshoot_ok"]:
        failed.append(f"overshoots by {row['overshoot']:.3g}% of the caps")
    if not row["leak_ok"]:
        failed.append(f"denies {row['leak_denials']:.3g}% of requests on leaked holds")
    return f"- The next tested TTL {side}, {format_seconds(row['ttl_seconds'])}, " + (
        " and ".join(failed) + "." if failed else "meets both limits too (see below).")


def describe_setup(scenario: Scenario, sweep: Sweep) -> str:
    """What the sweep ran, in a planner's words (Markdown): the store, the load,
    the caps, the duration tail with its quantiles, the crash rate, the run
    length, the TTLs and seeds."""
    durations = scenario.workload.duration
    quantiles = ", ".join(f"{name} {format_seconds(seconds)}"
                          for name, seconds in duration_quantiles(durations).items())
    crash = scenario.faults.crash
    crashes = ("no crashes" if crash is None else
               f"{crash.rate * 3600:.3g} crashes per replica per hour "
               f"(about {crash.rate * scenario.fleet.replicas * scenario.duration_us / 1e6:.3g}"
               " in the run)")
    keys = scenario.workload.keys
    run_seconds = (scenario.duration_us + scenario.drain_us) / MICROSECONDS_PER_SECOND
    ttls = sorted({point.parameters[TTL_PARAMETER] for point in sweep.points},
                  key=lambda text: parse_duration_us(text) if isinstance(text, str) else text)
    return "\n".join([
        f"**Scenario {scenario.name!r}** on `{scenario.store}`: {scenario.fleet.replicas} "
        f"replicas, arrivals `{arrivals_as_written(scenario.workload.arrivals)}` over "
        f"{keys.subjects} subjects, each capped at "
        f"${subject_cap_of(scenario) / MICROSECONDS_PER_SECOND:.6g}.",
        f"- Request durations `{durations}`: {quantiles}.",
        f"- Replica crashes: {crashes}.",
        f"- Each run: {format_seconds(scenario.duration_us / MICROSECONDS_PER_SECOND)} of "
        f"arrivals and {format_seconds(scenario.drain_us / MICROSECONDS_PER_SECOND)} of drain "
        f"({format_seconds(run_seconds)} of virtual time).",
        f"- TTLs tried: {', '.join(map(str, ttls))}; seeds {', '.join(map(str, sweep.seeds))}.",
    ])


def describe_trends(shares: pd.DataFrame) -> str:
    """How the two costs moved from the shortest to the longest tested TTL (medians)."""
    medians = shares.groupby(TTL_SECONDS, sort=True)[[OVERSHOOT_COLUMN, LEAK_COLUMN]].median()
    first, last = medians.iloc[0], medians.iloc[-1]
    shortest, longest = format_seconds(medians.index[0]), format_seconds(medians.index[-1])
    return (f"From the shortest tested TTL ({shortest}) to the longest ({longest}), the median "
            f"overshoot caused by premature expiry went from {first[OVERSHOOT_COLUMN]:.3g}% to "
            f"{last[OVERSHOOT_COLUMN]:.3g}% of the caps, and the median share of requests "
            f"denied because of leaked holds from {first[LEAK_COLUMN]:.3g}% to "
            f"{last[LEAK_COLUMN]:.3g}%.")


# ------------------------------------------------------------------ over one run


def example_ttls(recommendation: TtlRecommendation) -> dict[str, float]:
    """Three tested TTLs to look at over time: the shortest, the middle of the
    recommended range (or of the tested TTLs when there is none), the longest."""
    ttls = recommendation.per_ttl["ttl_seconds"].tolist()
    if recommendation.found:
        inside = [t for t in ttls
                  if recommendation.low_seconds <= t <= recommendation.high_seconds]
        middle, where = inside[len(inside) // 2], "recommended"
    else:
        middle, where = ttls[len(ttls) // 2], "middle"
    examples = {f"shortest ({format_seconds(ttls[0])})": ttls[0],
                f"{where} ({format_seconds(middle)})": middle,
                f"longest ({format_seconds(ttls[-1])})": ttls[-1]}
    # A sweep of one or two TTLs names the same TTL twice: keep each once.
    seen: dict[float, str] = {}
    for label, ttl in examples.items():
        seen.setdefault(ttl, label)
    return {label: ttl for ttl, label in seen.items()}


def aggregate_series(metrics: pd.DataFrame, shares: pd.DataFrame,
                     examples: Mapping[str, float], seed: int | None = None) -> pd.DataFrame:
    """The aggregate metric rows (``namespace == "*"``, subject scope) of one seed
    (default: the lowest) at each example TTL, with ``example`` (its label),
    ``time_s`` and the money the store was not counting right, as % of the caps:
    ``leaked_percent_of_cap`` (leaked holds it still counted) and
    ``expired_while_running_percent_of_cap`` (running requests it no longer counted)."""
    seed = int(shares["seed"].min()) if seed is None else seed
    frames = []
    for label, ttl in examples.items():
        rows = shares[(shares[TTL_SECONDS] == ttl) & (shares["seed"] == seed)]
        if rows.empty:
            continue
        point, cap_total = rows["point"].iloc[0], rows["cap_total_microdollars"].iloc[0]
        series = metrics[(metrics["point"] == point) & (metrics["seed"] == seed)
                         & (metrics["namespace"] == "*") & (metrics["scope"] == "subject")]
        series = series.sort_values("time_us").assign(
            example=label, time_s=series["time_us"] / MICROSECONDS_PER_SECOND)
        series["leaked_percent_of_cap"] = (
            100 * series["leaked_holds_live_microdollars"] / cap_total)
        series["expired_while_running_percent_of_cap"] = (
            100 * series["shortfall_hold_expired_while_running_microdollars"] / cap_total)
        frames.append(series)
    if not frames:
        raise ValueError(f"no metric series for seed {seed} at the example TTLs")
    return pd.concat(frames, ignore_index=True)
