"""The budget family's invariants: the metrics its stores promise to keep
down, and which way is worse.

``hunt --reference KIND`` compares a candidate store with a reference on
each of these under the same scenario, seed and schedule: the candidate is
broken where it does strictly worse. A metric a summary lacks (the
``namespace_`` ones, when no namespace cap is judged) is left out of the
comparison.
"""

from __future__ import annotations

from simulator.expectations import Invariant

_PER_SCOPE = (
    Invariant("cap_overshoot_microdollars_total"),
    # Drift's sign says which way the books are wrong; a candidate that turns
    # a small undercount into a larger overcount is worse too, and the two
    # one-sided totals catch a change of side that the net drift hides.
    Invariant("conservation_drift_microdollars_total", worse="further_from_zero"),
    Invariant("conservation_undercount_microdollars_total"),
    Invariant("conservation_overcount_microdollars_total"),
    Invariant("leaked_hold_microdollar_seconds"),
    Invariant("wrongful_admissions"),
)
"""Measured for subjects, and for namespaces under a ``namespace_`` prefix."""

INVARIANTS: tuple[Invariant, ...] = (
    *_PER_SCOPE,
    Invariant("false_denials"),
    *(Invariant(f"namespace_{invariant.metric}", invariant.worse) for invariant in _PER_SCOPE),
)
