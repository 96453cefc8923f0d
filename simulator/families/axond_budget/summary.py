"""How the budget family's summary reads: its groups of metrics in the console table.

A v2 store judges two scopes, subjects and namespaces; the oracle files the
namespace scope's metrics under the same names with a ``namespace_`` prefix,
and each scope's groups are shown (a run without namespace caps has none).
"""

from __future__ import annotations

from typing import Any

from simulator.plugin.family import SummaryLayout
from stores.registry import StoreKind


def run_facts(kind: StoreKind) -> dict[str, Any]:
    # Where the cap is enforced: a per-replica store lets a fleet of N
    # replicas spend up to N caps, by design.
    return {"cap_enforced_per": "replica" if kind.per_replica else "fleet"}


_PER_SCOPE = (
    ("cap", ("cap_overshoot_max_ratio", "cap_overshoot_microdollars_total", "keys_over_cap",
             "keys_total", "wrongful_admissions", "*cap_overshoot_by_",
             "*wrongful_admissions_by_")),
    ("books", ("true_spend_microdollars_total", "recorded_spend_microdollars_total",
               "conservation_drift_microdollars_total",
               "conservation_undercount_microdollars_total",
               "conservation_overcount_microdollars_total", "*conservation_drift_by_",
               "*conservation_undercount_by_", "*conservation_overcount_by_",
               "duplicate_settlements_executed", "spend_lost_to_data_loss_microdollars",
               "spend_lost_to_eviction_microdollars",
               "spend_lost_to_crashed_replica_ledger_microdollars")),
    ("holds", ("holds_leaked", "leaked_hold_microdollar_seconds",
               "*leaked_hold_microdollar_seconds_by_", "holds_removed_by_store",
               "holds_removed_by_store_microdollars", "leaked_hold_peak_share_of_cap",
               "holds_still_leaked_at_end", "premature_expiries", "premature_expiry_microdollars",
               "holds_lost_to_data_loss", "holds_lost_to_eviction", "holds_lost_to_replica_crash",
               "convergence_after_faults_us", "holds_outstanding_microdollars_at_end",
               "hold_keys_without_ttl")),
    ("denials", ("false_denials", "denials_caused_by_leaked_holds", "fail_closed_denials",
                 "false_denials_exceeded", "false_denials_store_unavailable",
                 "*false_denials_by_")),
)
"""The groups measured per scope: for subjects as named, for namespaces prefixed."""


def _in_scope(pattern: str, prefix: str) -> str:
    """``pattern`` for the scope whose metrics carry ``prefix``."""
    return f"*{prefix}{pattern[1:]}" if pattern.startswith("*") else prefix + pattern


SUMMARY = SummaryLayout(
    run_facts=run_facts,
    sections=(
        ("requests", ("requests_arrived", "requests_admitted", "requests_admitted_unenforced",
                      "requests_denied", "requests_denied_exceeded",
                      "requests_denied_store_unavailable", "requests_completed",
                      "requests_settled", "requests_aborted_by_crash",
                      "requests_in_flight_peak", "requests_in_flight_at_end")),
        *_PER_SCOPE,
        *((f"{title}, namespace scope", tuple(_in_scope(pattern, "namespace_")
                                              for pattern in patterns))
          for title, patterns in _PER_SCOPE),
    ),
)
