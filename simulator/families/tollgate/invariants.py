"""The ledger family's invariants: the metrics its ledgers and holders promise to keep down.

``hunt --reference KIND`` compares a candidate with a reference on each of
these under the same scenario, seed and schedule: the candidate is broken
where it does strictly worse. Billing loss and stranded units are filed by
the fault contract (``contract``): their parts by cause add up to their
totals. The rest is damage no clause excuses (``causes.STORE_ONLY``):
``store_only``, all of it the store's.
"""

from __future__ import annotations

from simulator.scenario.conditions import Invariant

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("conservation_violations", store_only=True),
    Invariant("conservation_residual_max_units", store_only=True),
    Invariant("billing_loss_units"),
    Invariant("double_billed_units", store_only=True),
    Invariant("overspend_units", store_only=True),
    Invariant("settlement_loss_excess_units", worse="further_from_zero", store_only=True),
    Invariant("units_forfeited_in_grace", store_only=True),
    Invariant("fencing_violations", store_only=True),
    Invariant("units_stranded"),
    Invariant("regrant_shortfall_units", store_only=True),
    Invariant("demand_shortfall_units", store_only=True),
    Invariant("allowance_deposited_twice_units", store_only=True),
    Invariant("false_refusals", store_only=True),
    Invariant("spends_past_margin", store_only=True),
    Invariant("periods_missed", store_only=True),
    Invariant("reclaims_overdue", store_only=True),
)
