"""``run --reference KIND``: the run beside the family's reference store
under the same scenario, seed and faults, and whether the two views of
blame agree.

The oracle's view is mechanistic: it files each part of the damage under a
cause as it happens, ``store_logic`` for what no fault contract excuses. The
counterfactual view removes the store bug instead: the reference store (the
fixed one) runs the same schedule, and what the candidate suffers beyond it
is what its bug added. They agree on an invariant when the part filed
``store_logic`` is that excess, within ``TOLERANCE`` (of the larger of the
two, and never less than ``SLACK`` units): the two views differ where the
bug changed what the faults could do (a leaked hold that denied requests the
reference would have served counts, in the mechanistic view, under the fault
that leaked it), which ``docs/metrics.md`` explains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simulator.plugin.attribution import STORE_LOGIC
from simulator.present.report import figure
from simulator.scenario.conditions import Invariant

TOLERANCE = 0.05
"""How far the store-logic part may stray from the excess over the reference,
as a share of the larger of the two."""
SLACK = 1
"""...and never less than this many of the invariant's units (rounding)."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """One invariant of the run beside the reference's."""

    invariant: Invariant
    candidate: float
    reference: float
    store_logic: float
    """The candidate's part filed ``store_logic``, by the invariant's sense of worse."""

    @property
    def excess(self) -> float:
        """How much worse the candidate did than the reference (0 when no worse)."""
        invariant = self.invariant
        baseline = max(0, invariant.badness(self.reference))
        excess = max(0, invariant.badness(self.candidate) - baseline)
        return round(excess, 3) if isinstance(excess, float) else excess

    @property
    def agrees(self) -> bool:
        bound = max(SLACK, TOLERANCE * max(self.excess, self.store_logic))
        return abs(self.store_logic - self.excess) <= bound

    def __str__(self) -> str:
        said = "agrees" if self.agrees else "DIFFERS"
        return (f"{said:<7} {self.invariant.metric} = {figure(self.candidate)} here, "
                f"{figure(self.reference)} on the reference: worse by {figure(self.excess)}, "
                f"filed {STORE_LOGIC} {figure(self.store_logic)}")


def compare(candidate: Mapping[str, Any], reference: Mapping[str, Any],
            invariants: Iterable[Invariant]) -> tuple[Comparison, ...]:
    """Each invariant both summaries measure, where either did any damage."""
    found = []
    for invariant in invariants:
        mine, theirs = candidate.get(invariant.metric), reference.get(invariant.metric)
        if not isinstance(mine, int | float) or not isinstance(theirs, int | float):
            continue
        store = invariant.badness(invariant.causes(candidate).get(STORE_LOGIC, 0))
        comparison = Comparison(invariant, mine, theirs, store)
        if mine or theirs or store:
            found.append(comparison)
    return tuple(found)


def comparison_lines(kind: str, comparisons: tuple[Comparison, ...]) -> list[str]:
    """What ``run --reference`` prints beside the verdicts."""
    head = (f"against the reference {kind} (same scenario, seed and faults): removing the "
            f"store's bug should remove what is filed {STORE_LOGIC}, within "
            f"{TOLERANCE:.0%}")
    if not comparisons:
        return [head, "  no invariant was damaged in either run"]
    return [head, *(f"  {comparison}" for comparison in comparisons)]
