"""Race reports: a broken invariant, written down so anyone can replay it.

A report (``data/races/*.toml``) names a scenario, the changes that make its
store the broken one (``[variant]``) and the fixed one (``[fixed]``), the
modules its stores come from when a plugin registered them (``plugins``), the
seed, an explicit fault schedule, the invariant it breaks and the fingerprint of
the trace it produced. ``replay`` runs it again and says REPRODUCED or NOT
REPRODUCED; when the trace differs from the recorded one (``NAME.trace.parquet``
beside the report) it names the first event where they part, so a reviewer
knows whether the store or the lab changed. See ``data/races/README.md`` for
a complete example.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from simulator.expectations import (
    Condition,
    Expectation,
    Verdict,
    check_metrics,
    judge,
    parse_condition,
)
from simulator.families import invariants_for
from simulator.run import RunResult, run_scenario
from simulator.scenario import ScenarioError, parse_scenario, read_toml, set_dotted
from simulator.trace import SCHEMA
from stores import registry


@dataclass(frozen=True)
class RaceReport:
    path: Path
    title: str
    story: str
    scenario: dict[str, Any]
    variant: dict[str, Any]
    fixed: dict[str, Any]
    seed: int
    schedule: list[dict[str, Any]]
    invariant: Condition | None
    """``[invariant]``'s breaking condition (None: judged by ``reference`` alone)."""
    fingerprint: str | None
    extra: dict[str, Any] = field(default_factory=dict)
    reference: str | None = None
    """``[invariant] reference``: a store kind the run must do no worse than."""
    plugins: tuple[str, ...] = ()
    """Modules registering the report's store kinds from outside the lab;
    imported when the report is loaded."""

    @property
    def recorded_trace(self) -> Path:
        return self.path.with_suffix(".trace.parquet")

    def scenario_for(self, changes: dict[str, Any]) -> dict[str, Any]:
        """The scenario with ``changes`` (dotted paths) and the report's schedule."""
        data = copy.deepcopy(self.scenario)
        for dotted, value in changes.items():
            set_dotted(data, dotted, value)
        data.setdefault("faults", {})["schedule"] = copy.deepcopy(self.schedule)
        return data


def load_report(path: str | Path) -> RaceReport:
    """Read a race report; a bad one is a ``ScenarioError`` naming the field."""
    path = Path(path)
    data = read_toml(path, "race report")
    missing = [name for name in ("title", "scenario", "variant", "invariant", "seed")
               if name not in data]
    if missing:
        raise ScenarioError(f"{path}: missing {', '.join(missing)}")
    plugins = data.get("plugins", [])
    if not (isinstance(plugins, list) and all(isinstance(name, str) for name in plugins)):
        raise ScenarioError(f"{path}: plugins: expected a list of module names, got {plugins!r}")
    try:
        registry.load_plugins(plugins)
    except registry.PluginError as error:
        raise ScenarioError(f"{path}: plugins: the report's stores need it: {error}") from None
    scenario = data["scenario"]
    if isinstance(scenario, str):
        scenario = read_toml((path.parent / scenario).resolve(),
                             f"scenario file (named by the race report {path})")
    invariant = data["invariant"]
    if not isinstance(invariant, dict) or not {"broken_when", "reference"} & invariant.keys():
        raise ScenarioError(
            f"{path}: invariant: expected {{ metric = NAME, broken_when = '< 0' }}, "
            f"{{ broken_when = 'CONDITION' }} and/or {{ reference = KIND }}")
    try:
        expectation = (None if "broken_when" not in invariant
                       else Expectation.parse(invariant["metric"], invariant["broken_when"])
                       if "metric" in invariant else parse_condition(invariant["broken_when"]))
    except ValueError as error:
        raise ScenarioError(f"{path}: invariant.broken_when: {error}") from None
    return RaceReport(path=path, title=data["title"], story=data.get("story", ""),
                      scenario=scenario, variant=data["variant"], fixed=data.get("fixed", {}),
                      seed=int(data["seed"]), schedule=data.get("schedule", []),
                      invariant=expectation, fingerprint=data.get("fingerprint"),
                      reference=invariant.get("reference"), plugins=tuple(plugins))


@dataclass(frozen=True)
class Replay:
    """What a replay found."""

    reproduced: bool
    value: Any
    result: RunResult
    divergence: str | None
    verdict: Verdict | None = None
    """How the run was judged (its ``observed`` and ``rule`` say it in words)."""


def replay(report: RaceReport, against_fixed: bool = False, backend: str | None = None,
           sample_every: str | None = None) -> Replay:
    """Run the report (or its fixed store) and judge the invariant. With
    ``sample_every``, keep per-key samples for a timeline (sampling never
    changes the trace)."""
    changes = dict(report.fixed if against_fixed else report.variant)
    if sample_every is not None:
        changes.update({"metrics.sample_every": sample_every, "metrics.per_key": True})
    scenario = parse_scenario(report.scenario_for(changes), source=str(report.path))
    result = run_scenario(scenario, seed=report.seed, backend=backend)
    if report.invariant is not None:  # a misspelt metric is an error, not NOT REPRODUCED
        check_metrics(report.invariant, result.summary)
    reference = None
    if report.reference is not None:  # the same scenario, seed and schedule on the reference
        reference = run_scenario(parse_scenario(report.scenario_for(
            {**changes, "store": report.reference}), source=str(report.path)),
            seed=report.seed, backend=backend).summary
    verdict = judge(result.summary, report.invariant, report.reference, reference,
                    invariants_for(scenario.kind) if reference is not None else ())
    divergence = None
    if not against_fixed and report.fingerprint is not None:
        if result.summary["trace_fingerprint"] != report.fingerprint:
            divergence = first_divergence(report, result)
    return Replay(verdict.broken, verdict.value, result, divergence, verdict)


def describe_row(row: dict[str, Any]) -> str:
    replica = "server" if row["replica"] < 0 else f"replica {row['replica']}"
    request = f" request {row['request']}" if row["request"] >= 0 else ""
    detail = f" {row['detail']}" if row["detail"] else ""
    outcome = f" -> {row['outcome']}" if row["outcome"] else ""
    return (f"t={row['time_us'] / 1e6:.6f}s {replica}{request}: {row['kind']}{detail}"
            f"{outcome}")


def first_divergence(report: RaceReport, result: RunResult) -> str:
    """Where the new trace parts from the recorded one, in words."""
    if not report.recorded_trace.exists():
        return "no recorded trace beside the report to compare with"
    recorded = pq.read_table(report.recorded_trace).to_pylist()
    names = [column.name for column in SCHEMA]
    current = [dict(zip(names, row, strict=True))
               for row in zip(*(result.trace.columns[name] for name in names), strict=True)]
    for index, (old, new) in enumerate(zip(recorded, current, strict=False)):
        if old != new:
            return (f"event #{index}: recorded {describe_row(old)}; "
                    f"now {describe_row(new)}")
    shorter = "recorded" if len(recorded) < len(current) else "new"
    return (f"the first {min(len(recorded), len(current))} events agree; the {shorter} trace "
            f"ends there ({len(recorded)} recorded, {len(current)} now)")


ROUTINE = frozenset({"call_executed", "request_arrived", "replica_started",
                     "replica_restarted", "work_completed"})
"""Events too common to tell a story with."""


def involved_events(result: RunResult, report: RaceReport, limit: int = 60) -> list[str]:
    """The events that matter: those of the replicas the schedule hit, the
    server's, and the fault events, in order, as a story."""
    replicas = {fault.get("replica") for fault in report.schedule if "replica" in fault}
    for fault in report.schedule:
        replicas.update(fault.get("replicas", []))
    names = [column.name for column in SCHEMA]
    story = []
    for row in zip(*(result.trace.columns[name] for name in names), strict=True):
        event = dict(zip(names, row, strict=True))
        interesting = (event["kind"].startswith(("fault_", "migration", "server_"))
                       or (event["replica"] in replicas and event["kind"] not in ROUTINE))
        if interesting:
            story.append(describe_row(event))
    if len(story) > limit:
        story = story[:limit] + [f"... ({len(story) - limit} more)"]
    return story
