"""The session-counter oracle's verdict: its summary and its samples, read off its books.

Nothing here changes the books: the summary closes, on paper, what is still
open at the end of the run (budgets, counters held past their TTL) and
reads every metric of ``docs/metrics.md``'s "Session counters" section.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simulator.families.av_state.books import Ledger
from simulator.families.av_state.causes import (
    DOUBLE_DEBIT_CAUSES,
    FALSE_REFUSAL_CAUSES,
    MINTED_CAUSES,
    OVERSHOOT_CAUSES,
    PARTIAL_CAUSES,
    RESET_CAUSES,
    RESURRECTION_CAUSES,
    TTL_CAUSES,
    UNCHARGED_CAUSES,
)
from simulator.families.av_state.invariants import INVARIANTS
from simulator.plugin.attribution import STORE_LOGIC, apportion

COUNTS = ("sessions_opened", "sessions_closed", "sessions_aborted_by_crash", "calls_planned",
          "calls_started", "spend_attempts", "spend_attempts_retried",
          "spend_attempts_committed", "spend_attempts_refused", "spend_attempts_failed",
          "spend_attempts_rejected", "tallies_sent", "tallies_added", "tallies_refused",
          "tallies_failed", "refunds_sent", "refunds_whole", "refund_replays_blocked",
          "cleanups_begun", "cleanups_ended")
"""What the sessions did, as counted when it happened."""

BY_CAUSE = (
    ("budget_minted_units", MINTED_CAUSES),
    ("double_debits", DOUBLE_DEBIT_CAUSES),
    ("false_refusals", FALSE_REFUSAL_CAUSES),
    ("counters_resurrected", RESURRECTION_CAUSES),
    ("counters_without_ttl", TTL_CAUSES),
    ("partial_batches", PARTIAL_CAUSES),
    ("counter_resets", RESET_CAUSES),
    ("commits_uncharged", UNCHARGED_CAUSES),
)
"""Damage counted as it happened, with the causes each may be filed under."""

EXTRA = ("double_debit_units", "false_refusals_from_double_debits", "refunds_minting",
         "counters_resurrected_without_ttl", "partial_spends", "partial_refunds",
         "counters_kept_past_ttl", "refund_markers_without_ttl", "remaining_misreported",
         "ttls_wrong")


def summary(oracle: Any, end_us: int) -> dict[str, Any]:
    """Every metric of the family at ``end_us``."""
    counts: Counter = oracle.counts
    metrics: dict[str, Any] = {name: counts.get(name, 0) for name in COUNTS}
    calls = [intent for session in oracle.sessions.values() for intent in session.calls.values()]
    finals = Counter(intent.told for intent in calls)
    for answer in ("committed", "refused", "failed", "rejected"):
        metrics[f"calls_{answer}"] = finals.get(answer, 0)
    metrics["sessions_live_at_end"] = sum(1 for session in oracle.sessions.values()
                                          if not session.over)
    metrics["counters_total"] = len(oracle.ledgers)
    _overshoot(oracle, metrics)
    for metric, causes in BY_CAUSE:
        metrics[metric] = counts.get(metric, 0)
        for cause in causes:
            metrics[f"{metric}_by_{cause}"] = counts.get(f"{metric}_by_{cause}", 0)
    for name in EXTRA:
        metrics[name] = counts.get(name, 0)
    present = [ledger for ledger in oracle.ledgers.values() if ledger.value is not None]
    metrics["counters_present_at_end"] = len(present)
    metrics["counters_without_ttl_at_end"] = sum(
        1 for ledger in present if ledger.no_ttl or oracle.per_replica)
    idle = [end_us - ledger.touched_us for ledger in present]
    past = [time - oracle.counter_ttl_us for time in idle if time >= oracle.counter_ttl_us]
    metrics["counters_kept_past_ttl"] += len(past)
    metrics["counter_hours_kept_past_ttl"] = round(
        (oracle.kept_past_ttl_us + sum(past)) / 3.6e9, 6)
    metrics.update(_exposed(oracle, metrics))
    return metrics


def _exposed(oracle: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    """What exposed each invariant's store-logic part, and where the store's
    damage began (``simulator.plugin.contracts.Exposures.summary``)."""
    store_logic = {invariant.metric: invariant.causes(metrics).get(STORE_LOGIC, 0)
                   for invariant in INVARIANTS}
    return oracle.exposures.summary(store_logic, store_logic)


def _overshoot(oracle: Any, metrics: dict[str, Any]) -> None:
    """Each budget's truth past its limit, shared over the causes of the
    commits that took it there."""
    total = 0
    worst = 0.0
    over_limit = 0
    by_cause: Counter = Counter(dict.fromkeys(OVERSHOOT_CAUSES, 0))
    for epoch in oracle.epochs:
        if epoch.limit is None or epoch.truth <= epoch.limit:
            continue
        over = epoch.truth - epoch.limit
        total += over
        over_limit += 1
        worst = max(worst, over / epoch.limit if epoch.limit else float(over))
        shares = apportion(over, epoch.wrongful)
        by_cause.update(shares)
        _expose_overshoot(oracle, epoch, shares.get(STORE_LOGIC, 0))
    metrics["budget_overshoot_units"] = total
    metrics["budget_overshoot_max_ratio"] = round(worst, 9)
    metrics["budgets_over_limit"] = over_limit
    metrics["budgets_total"] = sum(1 for epoch in oracle.epochs if epoch.limit is not None)
    for cause in OVERSHOOT_CAUSES:
        metrics[f"budget_overshoot_units_by_{cause}"] = by_cause[cause]


def _expose_overshoot(oracle: Any, epoch: Any, amount: float) -> None:
    """File a budget's store-logic overshoot with what exposed it, once (the
    summary may be read more than once)."""
    exposed = oracle.overshoot_exposures.pop(id(epoch), None)
    if amount and exposed is not None:
        oracle.exposures.add("budget_overshoot_units", amount, *exposed)


def sample(oracle: Any, now_us: int, per_key: bool) -> list[dict[str, Any]]:
    """The counters now: one aggregate row (from the oracle's running totals)
    and, with ``per_key``, one per counter the store holds or a budget still counts."""
    totals = oracle.totals
    rows = []
    if per_key:
        for ledger in oracle.ledgers.values():
            if ledger.value is not None or ledger.epoch.truth:
                namespace, subject = ledger.where
                rows.append({"time_us": now_us, "namespace": namespace, "subject": subject,
                             "counter": ledger.key, "limit": ledger.epoch.limit or 0,
                             **_ledger_state(ledger)})
    counts = oracle.counts
    aggregate = {
        "time_us": now_us, "namespace": "*", "subject": "*", "counter": "*",
        "counter_record_units": totals.record, "counter_truth_units": totals.truth,
        "counter_overshoot_units": totals.overshoot, "limit": 0,
        "sessions_live": totals.live_sessions, "counters_present": totals.present,
        "counters_without_ttl_now": totals.without_ttl,
    }
    for name in ("budget_minted_units", "double_debits", "false_refusals",
                 "counters_resurrected", "counter_resets", "partial_batches"):
        aggregate[name] = counts.get(name, 0)
    return [aggregate, *rows]


def _ledger_state(ledger: Ledger) -> dict[str, int]:
    limit = ledger.epoch.limit
    truth = ledger.epoch.truth
    """One counter's row of the metrics series (the aggregate row sums them)."""
    return {"counter_record_units": ledger.value or 0,
            "counter_truth_units": truth,
            "counter_overshoot_units": 0 if limit is None else max(0, truth - limit)}
