"""Verdicts: whether each invariant held in a run, in one line each.

``run`` prints these first, before the grouped summary: one line per
invariant of the run's family and scope (the budget family's subject and
namespace caps apart), held or broken, the measured figure, and the largest
part of it the oracle filed under a single cause (for the store's own,
``store_logic``, the fault that exposed it: ``simulator.plugin.contracts``)::

    HELD   conservation_violations = 0
    BROKEN cap_overshoot_microdollars_total = 12,305 (largest contributor: store_logic 12,000)
    BROKEN conservation_drift_microdollars_total = -12,305 (largest contributor:
           store_logic -12,305, exposed by reply_lost on release_v1)   [one line]

A run that could not exercise the store (no replica booted, nothing
answered, the store raised: ``simulator.run.exercise``) judges nothing: its
first line says why, and an invariant at 0 reads INCONCLUSIVE, not HELD::

    INCONCLUSIVE no replica booted its store: ValueError: no such table
    INCONCLUSIVE conservation_violations = 0

An invariant holds at its sound value, 0, whichever way its family counts
worse (``simulator.scenario.conditions.Invariant``). After the summary come the
scenario's ``[expect]`` entries, each with its threshold and what was
measured. ``simulator.present.junit`` writes the same judgements for a CI system.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import exposed_by_key
from simulator.present.report import figure
from simulator.run.summary import INCONCLUSIVE
from simulator.scenario.conditions import Expectation, ExpectationOutcome, Invariant

SOUND = 0
"""Every invariant's sound value: no overshoot, no drift, no leaked hold."""


@dataclass(frozen=True, slots=True)
class InvariantVerdict:
    """One invariant judged on one run."""

    invariant: Invariant
    value: float
    contributor: tuple[str, float] | None
    """The cause with the largest part of ``value``, and that part (None when
    the invariant held or the summary files it under no cause)."""
    exposed_by: str | None = None
    """When that cause is the store's own: what exposed it (``reply_lost on
    settle_v1``, ``no fault``), if the summary says."""
    inconclusive: str | None = None
    """Why the run could not judge the store, when it could not."""

    @property
    def held(self) -> bool:
        """At its sound value (in an inconclusive run, that proves nothing)."""
        return self.value == SOUND

    @property
    def label(self) -> str:
        if not self.held:
            return "BROKEN"
        return "INCONCLUSIVE" if self.inconclusive else "HELD"

    @property
    def metric(self) -> str:
        return self.invariant.metric

    @property
    def measured(self) -> str:
        """``metric = 12,305 (largest contributor: store_logic 12,000)``."""
        text = f"{self.metric} = {figure(self.value)}"
        if self.contributor is not None:
            cause, part = self.contributor
            exposed = f", exposed by {self.exposed_by}" if self.exposed_by else ""
            text += f" (largest contributor: {cause} {figure(part)}{exposed})"
        return text

    def __str__(self) -> str:
        return f"{self.label:<6} {self.measured}"


def invariant_verdicts(summary: Mapping[str, Any],
                       invariants: Iterable[Invariant]) -> tuple[InvariantVerdict, ...]:
    """A verdict on each invariant the summary measures, in the family's
    order; one it does not (the namespace scope of a run without namespace
    caps) is left out."""
    verdicts = []
    for invariant in invariants:
        value = summary.get(invariant.metric)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        contributor = _largest_contributor(invariant, summary) if value != SOUND else None
        exposed_by = (summary.get(exposed_by_key(invariant.metric))
                      if contributor is not None and contributor[0] == STORE_LOGIC else None)
        verdicts.append(InvariantVerdict(invariant, value, contributor, exposed_by,
                                         summary.get(INCONCLUSIVE)))
    return tuple(verdicts)


FAIL_ON = ("store", "broken", "never")
"""What fails a run (``run --fail-on``, exit status 5): a verdict that blames
the store (part of a broken invariant filed under ``store_logic``, the
default), any broken invariant (faults' damage too), or nothing."""
VERDICT_FAILED = 5


def failing_verdicts(verdicts: Iterable[InvariantVerdict], summary: Mapping[str, Any],
                     fail_on: str) -> list[InvariantVerdict]:
    """The verdicts that fail the run under ``fail_on`` (``FAIL_ON``)."""
    if fail_on == "never":
        return []
    broken = [verdict for verdict in verdicts if not verdict.held]
    if fail_on == "broken":
        return broken
    return [verdict for verdict in broken
            if verdict.invariant.causes(summary).get(STORE_LOGIC)]


def inconclusive_line(summary: Mapping[str, Any]) -> str | None:
    """``INCONCLUSIVE <why>`` for a run that could not judge the store, else None."""
    reason = summary.get(INCONCLUSIVE)
    return f"INCONCLUSIVE {reason}" if reason else None


def _largest_contributor(invariant: Invariant,
                         summary: Mapping[str, Any]) -> tuple[str, float] | None:
    # By the invariant's own sense of worse: drift's largest part is the one
    # furthest from zero, of either sign. The first of equals, in the
    # summary's order, so the line is the same for the same run.
    parts = [(cause, part) for cause, part in invariant.causes(summary).items() if part]
    if not parts:
        return None
    return max(parts, key=lambda item: invariant.badness(item[1]))


def expectation_line(outcome: ExpectationOutcome) -> str:
    """``expect cap_overshoot_microdollars_total < 1000: measured 12,305 — FAILED``."""
    return f"expect {outcome.label}: measured {measured(outcome)} — " + (
        "held" if outcome.held else "FAILED")


def measured(outcome: ExpectationOutcome) -> str:
    """What the run showed for an expectation: ``12,305`` for a single
    threshold, ``a = -4, b = 0`` for a condition, or which metric the summary lacks."""
    if outcome.missing:
        return f"nothing: the summary has no metric {', '.join(map(repr, outcome.missing))}"
    if isinstance(outcome.condition, Expectation):
        return figure(outcome.values[outcome.condition.metric])
    return ", ".join(f"{metric} = {figure(value)}" for metric, value in outcome.values.items())
