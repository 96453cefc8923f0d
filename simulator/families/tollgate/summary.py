"""How the ledger family's summary reads: its groups of metrics in the console table."""

from __future__ import annotations

from typing import Any

from simulator.plugin.family import SummaryLayout
from stores.registry import StoreKind


def run_facts(kind: StoreKind) -> dict[str, Any]:
    # One ledger for the whole fleet, run by the lab's service node.
    return {"ledger": "service"}


SUMMARY = SummaryLayout(
    run_facts=run_facts,
    sections=(
        ("spends", ("spends_admitted", "spends_refused", "*spends_refused_by_",
                    "false_refusals", "*false_refusals_by_", "spends_past_margin",
                    "*spends_past_margin_by_",
                    "units_consumed", "leases_granted", "consolidations", "leases_released",
                    "leases_reclaimed", "usage_events_replayed", "transactions_executed")),
        ("conservation", ("conservation_violations", "*conservation_violations_by_",
                          "conservation_residual_units", "conservation_residual_max_units")),
        ("billing", ("billing_loss_units", "*billing_loss_units_by_", "double_billed_units",
                     "*double_billed_units_by_", "double_billed_leases", "overspend_units",
                     "*overspend_units_by_")),
        ("settlement", ("settlement_loss_units", "settlement_loss_true_units",
                        "settlement_loss_excess_units", "*settlement_loss_excess_units_by_",
                        "releases_refused_in_grace", "units_forfeited_in_grace",
                        "*units_forfeited_in_grace_by_", "fencing_violations",
                        "*fencing_violations_by_", "units_stranded", "*units_stranded_by_",
                        "stranded_unit_seconds", "regrants_below_credit",
                        "regrant_shortfall_units", "*regrant_shortfall_units_by_",
                        "regrants_below_demand", "demand_shortfall_units",
                        "*demand_shortfall_units_by_", "reclaims_overdue",
                        "*reclaims_overdue_by_",
                        "convergence_us")),
        ("budget periods", ("periods_rolled", "allowance_deposited_units",
                            "allowance_expired_units", "rollovers_repeated",
                            "allowance_deposited_twice_units", "periods_missed",
                            "*periods_missed_by_",
                            "*allowance_deposited_twice_units_by_")),
    ),
)
