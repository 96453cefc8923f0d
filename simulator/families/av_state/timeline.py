"""How a session-counter run's timeline reads: sessions from their opening
to their close, and the involved sessions' counters as the store records
them against what their callers were told, the difference on its own scale.

Only the series are here; ``simulator.present.timeline`` and ``simulator.present.html_report``
draw them, so this module imports no plotting library.
"""

from __future__ import annotations

from typing import Any

from simulator.plugin.family import TimelineLanes
from simulator.plugin.record_series import (
    GAP,
    RECORD,
    TRUTH,
    RecordLine,
    RecordSeries,
    difference,
    involved_title,
    summed,
)

Key = tuple[str, str]


def straying_keys(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The sessions' keys (namespace, subject) whose counters strayed furthest
    from the truth over the whole series: what to show when no fault names a replica."""
    worst: dict[Key, int] = {}
    for row in samples:
        if row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            gap = abs(row["counter_record_units"] - row["counter_truth_units"])
            worst[key] = max(worst.get(key, 0), gap + row["counter_overshoot_units"])
    return sorted(worst, key=lambda key: (-worst[key], key))[:limit]


def counter_series(samples: list[dict[str, Any]], keys: set[Key]) -> RecordSeries:
    """The counters of the involved sessions: the store's record against the
    truth (committed minus refunded), summed per instant."""
    times, sums = summed(samples, keys, {"record": lambda row: row["counter_record_units"],
                                         "truth": lambda row: row["counter_truth_units"]})
    return RecordSeries(
        title=involved_title(keys, "sessions"), unit="units", times_us=tuple(times),
        cap_label="limit",
        lines=(RecordLine("told committed, minus refunds (truth)", tuple(sums["truth"]), TRUTH),
               RecordLine("counters (store)", tuple(sums["record"]), RECORD)),
        gaps=(RecordLine("counters - truth", difference(sums["record"], sums["truth"]), GAP),))


def no_cap(settings: Any) -> int | None:
    # Limits come with each call, not with the store's settings.
    return None


VIOLATIONS = ("counter_overshoot_units", "counters_without_ttl_now", "budget_minted_units",
              "double_debits", "false_refusals", "counters_resurrected", "counter_resets",
              "partial_batches")
"""Aggregate sample columns that are zero until the first damage."""

LANES = TimelineLanes(served="session_closed", refused="spend_refused",
                      served_label="session (opened to closed)",
                      strayed_keys=straying_keys, series=counter_series, cap=no_cap,
                      violation_columns=VIOLATIONS)
