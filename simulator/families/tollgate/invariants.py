"""The ledger family's invariants: the metrics its ledgers and holders promise to keep down.

``hunt --reference KIND`` compares a candidate with a reference on each of
these under the same scenario, seed and schedule: the candidate is broken
where it does strictly worse.
"""

from __future__ import annotations

from simulator.scenario.conditions import Invariant

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("conservation_violations"),
    Invariant("conservation_residual_max_units"),
    Invariant("billing_loss_units_by_store_logic"),
    Invariant("double_billed_units"),
    Invariant("overspend_units"),
    Invariant("settlement_loss_excess_units", worse="further_from_zero"),
    Invariant("units_forfeited_in_grace"),
    Invariant("fencing_violations"),
    Invariant("units_stranded_by_store_logic"),
    Invariant("regrant_shortfall_units"),
)
