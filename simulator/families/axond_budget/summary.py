"""How the budget family's summary reads: its groups of metrics in the console table."""

from __future__ import annotations

from typing import Any

from simulator.families import SummaryLayout
from stores.registry import StoreKind


def run_facts(kind: StoreKind) -> dict[str, Any]:
    # Where the cap is enforced: a per-replica store lets a fleet of N
    # replicas spend up to N caps, by design.
    return {"cap_enforced_per": "replica" if kind.per_replica else "fleet"}


SUMMARY = SummaryLayout(
    run_facts=run_facts,
    sections=(
        ("requests", ("requests_arrived", "requests_admitted", "requests_admitted_unenforced",
                      "requests_denied_exceeded", "requests_denied_store_unavailable",
                      "requests_completed", "requests_in_flight_peak",
                      "requests_in_flight_at_end")),
        ("cap", ("cap_overshoot_max_ratio", "cap_overshoot_microdollars_total", "keys_over_cap",
                 "keys_total", "wrongful_admissions", "*cap_overshoot_by_",
                 "*wrongful_admissions_by_")),
        ("books", ("true_spend_microdollars_total", "recorded_spend_microdollars_total",
                   "conservation_drift_microdollars_total",
                   "conservation_undercount_microdollars_total",
                   "conservation_overcount_microdollars_total", "*conservation_drift_by_",
                   "duplicate_settlements_executed")),
        ("holds", ("holds_leaked", "leaked_hold_microdollar_seconds",
                   "*leaked_hold_microdollar_seconds_by_", "holds_removed_by_store",
                   "leaked_hold_peak_share_of_cap", "holds_still_leaked_at_end",
                   "premature_expiries", "premature_expiry_microdollars",
                   "convergence_after_faults_us", "holds_outstanding_microdollars_at_end")),
        ("denials", ("false_denials", "denials_caused_by_leaked_holds", "fail_closed_denials",
                     "false_denials_store_unavailable", "*false_denials_by_")),
    ),
)
