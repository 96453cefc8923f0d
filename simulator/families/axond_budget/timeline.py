"""How a budget run's timeline reads: requests from reserve to settle, and
the keys' recorded spend against the true spend and the cap, with the drift
(recorded minus true) on a scale of its own.

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


def drifting_keys(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The keys whose record strays furthest from the truth at the last sample:
    what to show when no fault names a replica (a broken migration, say)."""
    last: dict[Key, int] = {}
    for row in samples:
        if row.get("scope", "subject") == "subject" and row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            last[key] = row["recorded_spend_microdollars"] - row["true_spend_microdollars"]
    return sorted(last, key=lambda key: (-abs(last[key]), key))[:limit]


def spend_series(samples: list[dict[str, Any]], keys: set[Key]) -> RecordSeries:
    """The store's record (settled spend, and that plus live holds) against the
    true spend, summed over the involved keys, from the per-key samples."""
    times, sums = summed(
        samples, keys,
        {"truth": lambda row: row["true_spend_microdollars"],
         "recorded": lambda row: row["recorded_spend_microdollars"],
         "counted": lambda row: (row["recorded_spend_microdollars"]
                                 + row["holds_live_microdollars"])},
        where=lambda row: row.get("scope", "subject") == "subject")
    return RecordSeries(
        title=involved_title(keys), unit="micro-dollars", times_us=tuple(times), step=False,
        lines=(RecordLine("true spend", tuple(sums["truth"]), TRUTH),
               RecordLine("recorded spend (store)", tuple(sums["recorded"]), RECORD),
               RecordLine("recorded + live holds (what the store counts)",
                          tuple(sums["counted"]), RECORD, dotted=True)),
        gaps=(RecordLine("drift: recorded - true", difference(sums["recorded"], sums["truth"]),
                         GAP),))


def subject_cap(settings: Any) -> int | None:
    return getattr(settings, "subject_cap_microdollars", None)


VIOLATIONS = ("keys_over_cap", "wrongful_admissions", "premature_expiries", "holds_leaked",
              "drift_settlement_lost_microdollars", "drift_duplicate_execution_microdollars",
              "drift_server_data_loss_microdollars", "drift_eviction_microdollars",
              "drift_store_logic_microdollars")
"""Aggregate sample columns that are zero until the first damage (drift in
flight is not: every settlement on its way is some)."""

LANES = TimelineLanes(served="request_settled", refused="request_denied",
                      served_label="served (reserve to settle)", strayed_keys=drifting_keys,
                      series=spend_series, cap=subject_cap, violation_columns=VIOLATIONS)
