"""How the session-counter family's summary reads: its groups of metrics in the console table."""

from __future__ import annotations

from typing import Any

from simulator.plugin.family import SummaryLayout
from stores.registry import StoreKind


def run_facts(kind: StoreKind) -> dict[str, Any]:
    # Where a session's budget is enforced: across the fleet on the server,
    # or in the one replica that serves it (the in-memory twin).
    return {"limit_enforced_per": "replica" if kind.per_replica else "fleet"}


SUMMARY = SummaryLayout(
    run_facts=run_facts,
    sections=(
        ("sessions", ("sessions_opened", "sessions_closed", "sessions_aborted_by_crash",
                      "sessions_live_at_end", "calls_planned", "calls_started",
                      "calls_committed", "calls_refused", "calls_failed", "calls_rejected",
                      "spend_attempts", "spend_attempts_committed", "spend_attempts_refused",
                      "spend_attempts_failed", "spend_attempts_rejected",
                      "spend_attempts_retried", "tallies_sent", "tallies_added",
                      "tallies_refused", "tallies_failed", "refunds_sent", "refunds_whole",
                      "refunds_minting", "refund_replays_blocked", "cleanups_begun",
                      "cleanups_ended")),
        ("budgets", ("budgets_total", "budget_overshoot_units", "budget_overshoot_max_ratio",
                     "budgets_over_limit", "*budget_overshoot_units_by_",
                     "budget_minted_units", "*budget_minted_units_by_",
                     "double_debits", "double_debit_units", "*double_debits_by_",
                     "false_refusals", "*false_refusals_by_",
                     "false_refusals_from_double_debits", "commits_uncharged",
                     "*commits_uncharged_by_")),
        ("counters", ("counters_total", "counter_resets", "*counter_resets_by_",
                      "counters_resurrected", "*counters_resurrected_by_",
                      "counters_resurrected_without_ttl", "counters_without_ttl",
                      "*counters_without_ttl_by_", "counters_without_ttl_at_end",
                      "partial_batches", "*partial_batches_by_", "partial_spends",
                      "partial_refunds", "counters_present_at_end",
                      "counters_kept_past_ttl", "counter_hours_kept_past_ttl",
                      "refund_markers_without_ttl", "remaining_misreported",
                      "ttls_wrong")),
    ),
)
