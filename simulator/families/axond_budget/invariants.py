"""The budget family's invariants: the metrics its stores promise to keep
down, and which way is worse.

``hunt --reference KIND`` compares a candidate store with a reference on
each of these under the same scenario, seed and schedule: the candidate is
broken where it does strictly worse. A metric a summary lacks (the
``namespace_`` ones, when no namespace cap is judged) is left out of the
comparison. ``run`` prints a verdict on each, the subject and the namespace
scope apart, naming the largest part filed by cause.
"""

from __future__ import annotations

from simulator.scenario.conditions import NOISY, Invariant

_PER_SCOPE = (
    # Their parts by cause carry the unit after the cause (tests/blame.py).
    Invariant("cap_overshoot_microdollars_total",
              by_cause="cap_overshoot_by_{cause}_microdollars"),
    # Drift's sign says which way the books are wrong; a candidate that turns
    # a small undercount into a larger overcount is worse too, and the two
    # one-sided totals catch a change of side that the net drift hides.
    Invariant("conservation_drift_microdollars_total", worse="further_from_zero",
              by_cause="conservation_drift_by_{cause}_microdollars"),
    Invariant("conservation_undercount_microdollars_total",
              by_cause="conservation_undercount_by_{cause}_microdollars"),
    Invariant("conservation_overcount_microdollars_total",
              by_cause="conservation_overcount_by_{cause}_microdollars"),
    Invariant("leaked_hold_microdollar_seconds", noise=NOISY),
    Invariant("wrongful_admissions"),
)
"""Measured for subjects, and for namespaces under a ``namespace_`` prefix."""

INVARIANTS: tuple[Invariant, ...] = (
    *_PER_SCOPE,
    Invariant("hold_keys_without_ttl", store_only=True),
    Invariant("false_denials", noise=NOISY),
    *(invariant.in_scope("namespace_") for invariant in _PER_SCOPE),
)
