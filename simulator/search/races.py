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

from simulator.families import invariants_for
from simulator.run.compose import RunResult, run_scenario
from simulator.scenario.conditions import (
    Condition,
    Expectation,
    Verdict,
    check_metrics,
    judge,
    parse_condition,
)
from simulator.scenario.model import ScenarioError, parse_scenario, read_toml, set_dotted
from simulator.search.story import describe_row, focus, tell, trace_rows
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
    against_fixed: bool = False
    """Whether this was the report's fixed store rather than its variant."""

    @property
    def headline(self) -> str:
        """``REPRODUCED: ...`` / ``NOT REPRODUCED: ...`` for the variant;
        ``HOLDS on the fixed store: ...`` / ``BROKEN on the fixed store too: ...``."""
        if self.against_fixed:
            said = ("BROKEN on the fixed store too" if self.reproduced
                    else "HOLDS on the fixed store")
            return f"{said}: {self.verdict}"
        said = "REPRODUCED" if self.reproduced else "NOT REPRODUCED"
        instead = "" if self.reproduced else " instead"
        return f"{said}: {self.verdict.observed}{instead} {self.verdict.rule}"


def replay(report: RaceReport, against_fixed: bool = False, backend: str | None = None,
           sample_every: str | None = None) -> Replay:
    """Run the report (or its fixed store) and judge the invariant. With
    ``sample_every``, keep per-key samples for a timeline (sampling never
    changes the trace)."""
    if against_fixed and not report.fixed:
        raise ScenarioError(
            f"{report.path}: nothing to compare against: the report has no [fixed] table "
            f"naming the fixed store (add one, e.g. [fixed] store = \"KIND\")")
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
    return Replay(verdict.broken, verdict.value, result, divergence, verdict, against_fixed)


TIMELINE_SAMPLES = 1000
"""Samples a timeline needs over a run, at most (and never finer than 20 ms)."""


def timeline_sampling(report: RaceReport) -> str:
    """How often to sample a replay that is drawn or told: every 20 ms, or a
    thousandth of the run when that is longer (a run of days stays quick)."""
    scenario = parse_scenario(report.scenario_for(report.variant), source=str(report.path))
    every_us = max(20_000, (scenario.duration_us + scenario.drain_us) // TIMELINE_SAMPLES)
    return f"{every_us}us"


def first_divergence(report: RaceReport, result: RunResult) -> str:
    """Where the new trace parts from the recorded one, in words."""
    if not report.recorded_trace.exists():
        return "no recorded trace beside the report to compare with"
    recorded = pq.read_table(report.recorded_trace).to_pylist()
    current = trace_rows(result.trace)
    for index, (old, new) in enumerate(zip(recorded, current, strict=False)):
        if old != new:
            return (f"event #{index}: recorded {describe_row(old)}; "
                    f"now {describe_row(new)}")
    shorter = "recorded" if len(recorded) < len(current) else "new"
    return (f"the first {min(len(recorded), len(current))} events agree; the {shorter} trace "
            f"ends there ({len(recorded)} recorded, {len(current)} now)")


def involved_events(result: RunResult, report: RaceReport, *, start_us: int | None = None,
                    before: int = 5, limit: int = 60) -> list[str]:
    """The events that matter, as a story (``simulator.search.story``): those of the
    involved replicas, the server's and the faults, from a few events before
    the first fault, lost call or damage (or from ``start_us``), at most
    ``limit`` of them (0: all), with ``... (N earlier)`` / ``... (N more)``."""
    found = focus(result, report.schedule)
    return tell(found.rows, list(found.replicas), found.anchor, start_us=start_us,
                before=before, limit=limit).lines()
