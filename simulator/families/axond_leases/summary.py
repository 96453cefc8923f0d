"""How the lease family's summary reads: its groups of metrics in the console table."""

from __future__ import annotations

from typing import Any

from simulator.plugin.family import SummaryLayout
from stores.registry import StoreKind


def run_facts(kind: StoreKind) -> dict[str, Any]:
    # Every lease store enforces its limit across the fleet, on the server.
    return {"limit_enforced_per": "fleet"}


SUMMARY = SummaryLayout(
    run_facts=run_facts,
    sections=(
        ("requests", ("requests_arrived", "requests_admitted", "requests_admitted_unenforced",
                      "requests_denied", "requests_denied_exceeded",
                      "requests_denied_store_unavailable", "requests_cancelled",
                      "denial_share", "requests_completed", "requests_aborted_by_crash",
                      "requests_in_flight_peak", "requests_in_flight_at_end")),
        ("concurrency", ("concurrency_excess_lease_seconds", "concurrency_excess_peak",
                         "*concurrency_excess_lease_seconds_by_", "leases_expired_while_held",
                         "keys_total")),
        ("leases", ("leases_written", "leases_leaked", "leaked_lease_seconds",
                    "*leaked_lease_seconds_by_", "leaked_leases_peak",
                    "leases_still_leaked_at_end", "leases_lost_to_data_loss",
                    "leases_lost_to_evicted", "lease_keys_without_ttl",
                    "convergence_after_faults_us")),
        ("replies", ("misaligned_replies", "misaligned_results_accepted")),
        ("denials", ("false_denials", "*false_denials_by_", "fail_closed_denials")),
    ),
)
