"""The lease family's invariants: the metrics its stores promise to keep down.

``hunt --reference KIND`` compares a candidate store with a reference on
each of these under the same scenario, seed and schedule: the candidate is
broken where it does strictly worse.
"""

from __future__ import annotations

from simulator.scenario.conditions import Invariant

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("concurrency_excess_lease_seconds"),
    Invariant("leaked_lease_seconds"),
    Invariant("false_denials"),
    Invariant("misaligned_results_accepted"),
)
