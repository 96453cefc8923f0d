"""Race reports: a broken invariant, written down so anyone can replay it.

A report (``data/races/*.toml``) names a scenario, the changes that make its
store the broken one (``[variant]``) and the fixed one (``[fixed]``), the
modules its stores come from when a plugin registered them (``plugins``), the
seed, an explicit fault schedule, the invariant it breaks and the fingerprint of
the trace it produced. ``replay`` runs it again and says REPRODUCED or NOT
REPRODUCED; when the trace differs from the recorded one (``NAME.trace.parquet``
beside the report) it names the first event where they part, so a reviewer
knows whether the store or the lab changed. The report itself is one model,
``simulator.search.race_report.RaceReport`` (``load``, ``dump``); see
``data/races/README.md`` for a complete example.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from simulator.families import invariants_for
from simulator.run.compose import RunResult, run_scenario
from simulator.scenario.conditions import Verdict, check_metrics, judge
from simulator.scenario.model import ScenarioError, parse_scenario
from simulator.scenario.stand_in import stand_in
from simulator.search.race_report import RaceReport
from simulator.search.story import describe_row, focus, tell, trace_rows


def load_report(path: str | Path) -> RaceReport:
    """Read a race report (``RaceReport.load``); a bad one is a ``ScenarioError`` naming
    the field."""
    return RaceReport.load(path)


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
            {**changes, **stand_in(report.reference)}), source=str(report.path)),
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
