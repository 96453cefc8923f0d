"""Counterfactual attribution: the same run again with one fault class removed.

The oracle attributes damage mechanistically: each unit of overshoot, drift
or leaked hold is filed under the cause that opened the gap it came through
(the summary's ``*_by_<cause>_*`` metrics). This module asks the other
question: how much of the damage would not have happened without a given
class of faults? It re-runs the scenario with the same seed once per fault
class the scenario injects, that class alone removed, and compares each run's
damage with the baseline's. The two answers differ where causes interact
(``docs/metrics.md``, "Mechanistic and counterfactual attribution").

Removing a class is a scenario override (a rate fault set to none, a
probability to zero, the schedule entries of one type dropped), so every run
goes through the normal ``run_scenario``. The other random streams stay put
because every source of randomness has its own stream, named in
``simulator.engine.streams``: fault times come from per-fault streams, a link draws
its loss coins even at probability zero, clocks and eviction have streams of
their own. What does move is what the removed class caused: a reply that is
no longer lost is no longer retried, so the link's later draws serve
different messages; that is the effect being measured, not a reshuffle.

The damage metrics are the family's invariants (``simulator.families``), each
with its own sense of worse; the module names no family.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from simulator.families import invariants_for
from simulator.run.compose import run_scenario
from simulator.scenario.conditions import Invariant
from simulator.scenario.faults import FAULT_KINDS
from simulator.scenario.model import Fleet, Retries, Scenario

RATE_FAULTS = tuple(name for name, kind in FAULT_KINDS.items() if kind.counterfactual_class)
"""The ``[faults]`` tables drawn from rates, each its own class."""

RESTARTS = tuple(name for name, kind in FAULT_KINDS.items() if kind.persistence_decides)
"""The faults whose data loss the server's persistence model decides."""

KEPT_EVERYTHING = "aof-always"
"""The persistence model that loses nothing on a restart."""


@dataclass(frozen=True)
class FaultClass:
    """One class of faults the lab injects, and the override that removes it."""

    name: str
    removal: str
    """The override, as a person would write it."""
    overrides: tuple[tuple[str, Any], ...]
    """``(dotted field path, value)`` pairs applied to the validated scenario."""

    def remove_from(self, scenario: Scenario) -> Scenario:
        """``scenario`` without this class of faults, everything else the same."""
        for path, value in self.overrides:
            scenario = _replaced(scenario, path.split("."), value)
        return scenario


@dataclass(frozen=True)
class Without:
    """The run without one fault class, against the baseline."""

    fault_class: FaultClass
    summary: Mapping[str, Any]
    change: Mapping[str, float]
    """Per damage metric: its value without the class minus the baseline's."""
    disappeared: Mapping[str, float]
    """Per damage metric: the damage that went away with the class (the
    baseline's badness minus this run's; negative when removing the class made
    things worse)."""


@dataclass(frozen=True)
class Counterfactual:
    """A baseline run and one run per fault class present, that class removed."""

    baseline: Mapping[str, Any]
    damage_metrics: tuple[str, ...]
    """The damage metrics the baseline has (a ``namespace_`` one only when
    namespace caps are judged), in the family's order."""
    runs: tuple[Without, ...]

    def as_dict(self) -> dict[str, Any]:
        """The damage of every run, for ``counterfactual.json``."""
        return {
            "damage_metrics": list(self.damage_metrics),
            "baseline": {metric: self.baseline[metric] for metric in self.damage_metrics},
            "without": {run.fault_class.name: {
                "removal": run.fault_class.removal,
                "damage": {metric: run.summary.get(metric) for metric in self.damage_metrics},
                "change": dict(run.change),
                "disappeared": dict(run.disappeared),
            } for run in self.runs},
        }


def fault_classes(scenario: Scenario) -> tuple[FaultClass, ...]:
    """The fault classes ``scenario`` injects, each removable alone; none for
    a scenario that injects no fault."""
    faults = scenario.faults
    found = []
    for name in RATE_FAULTS:
        if _rate_of(getattr(faults, name)) > 0:
            found.append(FaultClass(name, f"faults.{name} = none", ((f"faults.{name}", None),)))
            found += _rates_per_shard(scenario, name)
    for kind in dict.fromkeys(item.fault for item in faults.schedule):
        kept = [item for item in faults.schedule if item.fault != kind]
        dropped = len(faults.schedule) - len(kept)
        found.append(FaultClass(f"scheduled {kind}",
                                f"faults.schedule without its {kind} entries ({dropped})",
                                (("faults.schedule", kept),)))
        found += _per_shard(faults.schedule, kind)
    network = scenario.network
    for name in ("request_loss", "reply_loss"):
        if getattr(network, name) > 0:
            found.append(FaultClass(name, f"network.{name} = 0", ((f"network.{name}", 0.0),)))
    if network.retries.count > 0:
        found.append(FaultClass("retries", "network.retries = 0",
                                (("network.retries", Retries()),)))
    untouched = Fleet()
    if (not _is_zero(scenario.fleet.clock_offset)
            or not _is_zero(scenario.fleet.clock_drift_ppm)):
        found.append(FaultClass(
            "clock_skew", "fleet.clock_offset = 0ms, fleet.clock_drift_ppm = 0",
            (("fleet.clock_offset", untouched.clock_offset),
             ("fleet.clock_drift_ppm", untouched.clock_drift_ppm))))
    if scenario.server.maxmemory_keys > 0:
        found.append(FaultClass("eviction", "server.maxmemory_keys = 0",
                                (("server.maxmemory_keys", 0),)))
    restarts = (any(_rate_of(getattr(faults, name)) > 0 for name in RESTARTS)
                or any(item.fault in RESTARTS for item in faults.schedule))
    if restarts and scenario.server.persistence != KEPT_EVERYTHING:
        found.append(FaultClass("persistence_loss", f"server.persistence = {KEPT_EVERYTHING}",
                                (("server.persistence", KEPT_EVERYTHING),)))
    killed = [index for index, step in enumerate(scenario.migrations)
              if step.crash_after_commands is not None]
    if killed:
        found.append(FaultClass(
            "migration_crash", "migrations.*.crash_after_commands = none",
            tuple((f"migrations.{index}.crash_after_commands", None) for index in killed)))
    return tuple(found)


def _rates_per_shard(scenario: Scenario, name: str) -> list[FaultClass]:
    """On a cluster, a rate-drawn server fault's faults shard by shard, each
    shard's a class of its own: the same draws, that shard's faults dropped
    (``shards``), so what each shard's restarts or failovers cost shows apart."""
    cluster = scenario.server.cluster
    spec = getattr(scenario.faults, name)
    if cluster is None or cluster.shards < 2 or not FAULT_KINDS[name].hits_server:
        return []
    hit = spec.shards if spec.shards is not None else list(range(cluster.shards))
    if len(hit) < 2:
        return []
    return [FaultClass(f"{name} on shard {shard}",
                       f"faults.{name}.shards = {[other for other in hit if other != shard]}",
                       ((f"faults.{name}.shards", [other for other in hit if other != shard]),))
            for shard in hit]


def _per_shard(schedule: Sequence[Any], kind: str) -> list[FaultClass]:
    """On a cluster, a server fault's entries shard by shard, each shard's a
    class of its own (when they hit more than one): what each shard's
    restarts or failovers cost, apart."""
    shards = sorted({item.shard for item in schedule
                     if item.fault == kind and item.shard is not None})
    if len(shards) < 2:
        return []
    classes = []
    for shard in shards:
        kept = [item for item in schedule if item.fault != kind or item.shard != shard]
        dropped = len(schedule) - len(kept)
        classes.append(FaultClass(
            f"scheduled {kind} on shard {shard}",
            f"faults.schedule without its {kind} entries on shard {shard} ({dropped})",
            (("faults.schedule", kept),)))
    return classes


def counterfactual(scenario: Scenario, seed: int | None = None, backend: str | None = None,
                   *, allow_remote_redis: bool = False,
                   baseline: Mapping[str, Any] | None = None,
                   invariants: Sequence[Invariant] | None = None,
                   progress: Callable[[str], None] | None = None) -> Counterfactual:
    """Run ``scenario`` once per fault class it injects, that class removed,
    with the same seed and backend. ``baseline``: the summary of the run with
    every fault, when already run (else it is run first). ``invariants``: the
    damage metrics (default: the store's family's). ``progress(line)`` is
    called before each run."""
    seed = scenario.seed if seed is None else seed
    planned: list[tuple[str, Scenario, FaultClass | None]] = [
        (f"without {each.name} ({each.removal})", each.remove_from(scenario), each)
        for each in fault_classes(scenario)]
    if baseline is None:
        planned.insert(0, ("the baseline, every fault", scenario, None))
    summaries: list[tuple[FaultClass, dict[str, Any]]] = []
    for number, (label, variant, fault_class) in enumerate(planned, 1):
        if progress is not None:
            progress(f"counterfactual run {number}/{len(planned)}: {label}")
        summary = run_scenario(variant, seed=seed, backend=backend,
                               allow_remote_redis=allow_remote_redis).summary
        if fault_class is None:
            baseline = summary
        else:
            summaries.append((fault_class, summary))
    assert baseline is not None
    judged = tuple(invariant for invariant in (invariants or invariants_for(scenario.kind))
                   if baseline.get(invariant.metric) is not None)
    return Counterfactual(MappingProxyType(dict(baseline)),
                          tuple(invariant.metric for invariant in judged),
                          tuple(_compare(fault_class, baseline, summary, judged)
                                for fault_class, summary in summaries))


def _compare(fault_class: FaultClass, baseline: Mapping[str, Any], summary: dict[str, Any],
             invariants: Iterable[Invariant]) -> Without:
    change, disappeared = {}, {}
    for invariant in invariants:
        before, after = baseline[invariant.metric], summary.get(invariant.metric) or 0
        change[invariant.metric] = _rounded(after - before)
        disappeared[invariant.metric] = _rounded(
            invariant.badness(before) - invariant.badness(after))
    return Without(fault_class, MappingProxyType(summary), MappingProxyType(change),
                   MappingProxyType(disappeared))


# -- rendering -------------------------------------------------------------------

TABLE_WIDTH = 110
"""Columns are wrapped into blocks no wider than this, each block a full table."""


def counterfactual_table(result: Counterfactual) -> str:
    """One row per fault class, one column per damage metric: its value
    without the class and, in brackets, the change against the baseline; then
    the baseline's mechanistic attribution per cause."""
    lines = ["-- counterfactual: the same seed, one fault class removed at a time"]
    if not result.runs:
        lines.append("   the scenario injects no fault: there is no class to remove (its "
                     "damage, if any, comes from the store, the workload or the settings)")
    else:
        shown = [metric for metric in result.damage_metrics
                 if result.baseline[metric] or any(run.change[metric] for run in result.runs)]
        quiet = [metric for metric in result.damage_metrics if metric not in shown]
        rows = [("baseline", [_number(result.baseline[metric]) for metric in shown])]
        rows += [(f"without {run.fault_class.name}",
                  [f"{_number(run.summary.get(metric) or 0)} ({_signed(run.change[metric])})"
                   for metric in shown]) for run in result.runs]
        lines += _blocks(shown, rows)
        if quiet:
            lines.append(textwrap.fill(f"zero in every run: {', '.join(quiet)}", TABLE_WIDTH,
                                       initial_indent="   ", subsequent_indent="     "))
        lines.append("   removed:")
        lines += [f"     {run.fault_class.name}: {run.fault_class.removal}"
                  for run in result.runs]
    lines.append("-- mechanistic attribution in the baseline (the oracle's *_by_<cause>_* "
                 "metrics, those not zero)")
    attributed = mechanistic_attribution(result.baseline, result.damage_metrics)
    if not attributed:
        lines.append("   none: no damage was attributed to any cause")
    for measure, causes in attributed.items():
        width = max(len(cause) for cause in causes)
        lines.append(f"   {measure}_by_")
        lines += [f"     {cause:<{width}}  {_number(value)}" for cause, value in causes.items()]
    return "\n".join(lines)


def mechanistic_attribution(summary: Mapping[str, Any],
                            damage_metrics: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The summary's nonzero ``<measure>_by_<cause>_<unit>`` metrics whose
    measure is one of ``damage_metrics`` (``cap_overshoot`` for
    ``cap_overshoot_microdollars_total``), grouped by measure:
    ``{"cap_overshoot": {"settlement_lost_microdollars": 1200}}``."""
    damage = tuple(damage_metrics)
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in summary.items():
        measure, separator, cause = name.partition("_by_")
        if not separator or not value or isinstance(value, bool) or not isinstance(
                value, int | float):
            continue
        if any(metric == measure or metric.startswith(f"{measure}_") for metric in damage):
            grouped.setdefault(measure, {})[cause] = value
    return grouped


def _blocks(metrics: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    """The table, its metric columns wrapped into blocks that fit ``TABLE_WIDTH``."""
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(metric), *(len(cells[index]) for _, cells in rows))
              for index, metric in enumerate(metrics)]
    lines: list[str] = []
    start = 0
    while start < len(metrics):
        end, used = start, 3 + label_width
        while end < len(metrics) and (end == start or used + 2 + widths[end] <= TABLE_WIDTH):
            used += 2 + widths[end]
            end += 1
        columns = range(start, end)
        lines.append("   " + " " * label_width
                     + "".join(f"  {metrics[i]:>{widths[i]}}" for i in columns))
        lines += ["   " + f"{label:<{label_width}}"
                  + "".join(f"  {cells[i]:>{widths[i]}}" for i in columns)
                  for label, cells in rows]
        start = end
    return lines


# -- helpers -----------------------------------------------------------------------


def _rate_of(spec: Any) -> float:
    return 0.0 if spec is None else spec.rate


def _is_zero(distribution: Any) -> bool:
    return distribution.family == "constant" and distribution.params[0] == 0


def _replaced(node: Any, path: list[str], value: Any) -> Any:
    """``node`` with the field at ``path`` set to ``value``: copies along the
    path, so the frozen scenario it came from is left as it was."""
    if not path:
        return value
    head, *rest = path
    if isinstance(node, list):
        items = list(node)
        items[int(head)] = _replaced(items[int(head)], rest, value)
        return items
    assert isinstance(node, BaseModel), f"no field {head!r} under {node!r}"
    return node.model_copy(update={head: _replaced(getattr(node, head), rest, value)})


def _rounded(value: float) -> float:
    return round(value, 3) if isinstance(value, float) else value


def _number(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,}"
    return "n/a" if value is None else str(value)


def _signed(value: float) -> str:
    return f"{value:+,}" if value else "="
