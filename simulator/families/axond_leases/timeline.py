"""How a lease run's timeline reads: requests from arrival to the end of
their work, and the callers holding against the leases the store counts,
with ``max_in_flight`` as the cap line and the difference on its own scale.

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
    """The keys where the store's count strayed furthest from the callers
    holding, over the whole series: what to show when no fault names a replica."""
    worst: dict[Key, int] = {}
    for row in samples:
        if row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            gap = row["leases_leaked"] + row["callers_uncounted"] + row["concurrency_excess"]
            worst[key] = max(worst.get(key, 0), gap)
    return sorted(worst, key=lambda key: (-worst[key], key))[:limit]


def lease_series(samples: list[dict[str, Any]], keys: set[Key]) -> RecordSeries:
    """Callers holding (the truth) against the leases the store counts, and
    the leaked ones, summed over the involved keys, from the per-key samples."""
    times, sums = summed(samples, keys, {"holding": lambda row: row["callers_holding"],
                                         "counted": lambda row: row["leases_counted"],
                                         "leaked": lambda row: row["leases_leaked"]})
    return RecordSeries(
        title=involved_title(keys), unit="leases", times_us=tuple(times),
        cap_label="max_in_flight",
        lines=(RecordLine("callers holding (truth)", tuple(sums["holding"]), TRUTH),
               RecordLine("leases counted (store)", tuple(sums["counted"]), RECORD),
               RecordLine("leases leaked", tuple(sums["leaked"]), RECORD, dotted=True)),
        gaps=(RecordLine("counted - holding", difference(sums["counted"], sums["holding"]),
                         GAP),))


def max_in_flight(settings: Any) -> int | None:
    return getattr(settings, "max_in_flight", None)


VIOLATIONS = ("concurrency_excess", "leases_leaked", "callers_uncounted",
              "misaligned_results_accepted", "false_denials")
"""Aggregate sample columns that are zero until the first damage."""

LANES = TimelineLanes(served="work_completed", refused="request_denied",
                      served_label="served (acquire to the end of its work)",
                      strayed_keys=straying_keys, series=lease_series, cap=max_in_flight,
                      violation_columns=VIOLATIONS)
