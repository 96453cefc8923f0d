"""The session-counter family's invariants: the metrics its stores promise to keep down.

``hunt --reference KIND`` compares a candidate store with a reference on
each of these under the same scenario, seed and schedule: the candidate is
broken where it does strictly worse.
"""

from __future__ import annotations

from simulator.scenario.conditions import NOISY, Invariant

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("budget_overshoot_units"),
    Invariant("budget_minted_units"),
    Invariant("double_debits"),
    Invariant("false_refusals", noise=NOISY),
    Invariant("counters_resurrected"),
    Invariant("counters_without_ttl"),
    Invariant("partial_batches"),
    Invariant("counter_resets"),
    Invariant("commits_uncharged"),
    Invariant("refund_markers_without_ttl", store_only=True),
    Invariant("remaining_misreported", store_only=True),
    Invariant("ttls_wrong", store_only=True),
)
"""A refund marker needs no parts by cause: nothing the lab does writes one
without its 5-minute expiry (``contract``); nor does a commit's told
remaining budget: nothing the lab does rewrites a reply's figures."""
