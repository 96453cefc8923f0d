"""Checking a scenario without running it: the metrics it can report,
whether its ``[expect]`` entries name them, and whether the work a run would
take fits the scenario's limits (``simulator.run.estimate``,
``simulator.run.limits``).

``python -m simulator check`` prints what this finds; ``run`` refuses a
scenario with a problem before it starts, and ``hunt`` a breaking condition
that names no metric of the scenario's family, so a misspelt metric is an
input error (exit 2) and never a run that "holds" or "never broke it".

The metric names come from the family, not from a run: its oracle's summary
on an empty oracle (every metric it reports, at zero), the family's run
facts, and the counts and totals every run adds (``simulator.run.compose``). A few
metrics appear only as they happen (a ledger's refusals, one metric per
refusal kind the store answers): the family's summary groups name them by a
prefix (``*spends_refused_by_``) whose total the empty oracle reports
(``spends_refused``) but no part of, and any name under it is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.families import family_of
from simulator.plugin.family import Family
from simulator.run.compose import resolve_backend
from simulator.run.estimate import WorkEstimate, estimate_work
from simulator.run.limits import count, format_bytes, refusals, run_limits
from simulator.run.summary import (
    BACKEND_TOTALS,
    COUNTED_EVENTS,
    DETERMINISM,
    RUN_FIELDS,
    RUN_TOTALS,
    TEXT_FIELDS,
)
from simulator.scenario.conditions import Condition, parse_expectation, unknown_metrics
from simulator.scenario.domains import field_path
from simulator.scenario.model import Scenario, ScenarioError


class UnknownMetric(ValueError):
    """A condition names a metric the scenario's family never reports."""


@dataclass(frozen=True, slots=True)
class KnownMetrics:
    """The metric names a scenario's runs can report."""

    names: tuple[str, ...]
    """Every name a run's summary has for a number, sorted (the names of
    things, the store's say, are left out: no threshold applies to them)."""
    open_prefixes: tuple[str, ...]
    """Prefixes of metrics that appear only as they happen."""

    def __contains__(self, metric: object) -> bool:
        return isinstance(metric, str) and (
            metric in self.names or metric.startswith(self.open_prefixes))


def known_metrics(scenario: Scenario, backend: str | None = None) -> KnownMetrics:
    """The metrics a run of ``scenario`` (on ``backend``, else its own) reports."""
    kind = scenario.kind
    try:
        family = family_of(kind)
    except ValueError as error:
        raise ScenarioError(f"store: {error}") from None
    oracle_names = tuple(family.oracle(scenario, kind, scenario.settings).summary(
        scenario.duration_us + scenario.drain_us, None))
    spec = resolve_backend(scenario, backend)
    server = "service" if spec.family != "redis" and kind.service is not None else spec.family
    facts = [name for name, value in family.summary.run_facts(kind).items()
             if not isinstance(value, str)]
    names = {*RUN_FIELDS, *facts, *oracle_names,
             *(f"{event}_count" for event in COUNTED_EVENTS + family.counted_events),
             *RUN_TOTALS, *(name for name, _ in family.migration_totals),
             *BACKEND_TOTALS.get(server, ()), *DETERMINISM} - set(TEXT_FIELDS)
    return KnownMetrics(tuple(sorted(names)), _open_prefixes(family, oracle_names))


def _open_prefixes(family: Family, oracle_names: tuple[str, ...]) -> tuple[str, ...]:
    # A per-cause group (``spends_refused_by_``) whose total the empty oracle
    # reports but none of whose parts is one whose parts are named as they
    # happen. A group it reports parts of is closed, so a misspelt cause is
    # still caught; so is one without its total (a scope the run lacks).
    prefixes = (pattern[1:] for _, patterns in family.summary.sections for pattern in patterns
                if pattern.startswith("*") and pattern.endswith("_by_"))
    return tuple(prefix for prefix in dict.fromkeys(prefixes)
                 if prefix.removesuffix("_by_") in oracle_names
                 and not any(name.startswith(prefix) for name in oracle_names))


def refuse_unknown(condition: Condition, known: KnownMetrics) -> None:
    """Refuse a condition naming a metric no run of the scenario reports."""
    unknown = [metric for metric in condition.metrics if metric not in known]
    if unknown:
        raise UnknownMetric(unknown_metrics(unknown, known.names))


@dataclass(frozen=True)
class Examined:
    """What preflight found of a scenario: its problems, and the work a run of
    it would take (None when it could not be judged), which the run then
    takes as it is rather than estimating it again."""

    problems: list[str]
    estimate: WorkEstimate | None


def examine(scenario: Scenario, backend: str | None = None) -> Examined:
    """Everything found without running ``scenario``: a backend its store
    cannot run on, a family nobody registered, an ``[expect]`` entry naming an
    unknown metric, work past the scenario's limits; no problems when it is
    ready to run."""
    try:
        known = known_metrics(scenario, backend)
    except ScenarioError as error:
        return Examined([str(error)], None)
    found = []
    for name, text in scenario.expect.items():
        try:
            refuse_unknown(parse_expectation(name, text), known)
        except UnknownMetric as error:
            found.append(f"{field_path(('expect', name))}: {error}")
    estimate = work(scenario, backend)
    return Examined(found + refusals(estimate, run_limits(scenario.limits)), estimate)


def problems(scenario: Scenario, backend: str | None = None) -> list[str]:
    """One line per problem ``examine`` finds; empty when it is ready to run."""
    return examine(scenario, backend).problems


def over_limits(scenario: Scenario, backend: str | None = None) -> list[str]:
    """A line naming the limits a run of ``scenario`` would pass; empty when it fits."""
    return refusals(work(scenario, backend), run_limits(scenario.limits))


def work(scenario: Scenario, backend: str | None = None) -> WorkEstimate:
    """The work a run of ``scenario`` (on ``backend``, else its own) would take."""
    return estimate_work(scenario, resolve_backend(scenario, backend))


def work_line(scenario: Scenario, backend: str | None = None,
              estimate: WorkEstimate | None = None) -> str:
    """The estimate against the limits, in one line, as ``check`` prints it."""
    limits = run_limits(scenario.limits)
    estimate = work(scenario, backend) if estimate is None else estimate
    return (f"work: {estimate.describe()} (limits: "
            f"{count(limits.max_events)} events, {format_bytes(limits.max_memory)}, "
            f"{count(limits.max_keys)} keys)")
