"""How a ledger run's timeline reads: each spend from its arrival to its
admission or refusal, and the involved accounts' usage as the ledger billed
it against what their holders consumed; the difference and the residual of
the conservation equation on a scale of their own.

Only the series are here; ``simulator.present.timeline`` and ``simulator.present.html_report``
draw them, so this module imports no plotting library.
"""

from __future__ import annotations

from typing import Any

from simulator.plugin.family import TimelineLanes
from simulator.plugin.record_series import (
    GAP,
    RECORD,
    RESIDUAL,
    TRUTH,
    RecordLine,
    RecordSeries,
    difference,
    involved_title,
    summed,
)

Key = tuple[str, str]


def straying_accounts(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The accounts whose record strayed furthest from the truth: billed
    against consumed, plus the equation's residual."""
    worst: dict[Key, int] = {}
    for row in samples:
        if row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            gap = abs(row["units_billed"] - row["units_consumed"]) + abs(row["residual_units"])
            worst[key] = max(worst.get(key, 0), gap)
    return sorted(worst, key=lambda key: (-worst[key], key))[:limit]


def billing_series(samples: list[dict[str, Any]], keys: set[Key]) -> RecordSeries:
    """Billed against consumed for ``keys``, summed per instant, and the residual."""
    times, sums = summed(samples, keys, {"billed": lambda row: row["units_billed"],
                                         "consumed": lambda row: row["units_consumed"],
                                         "residual": lambda row: row["residual_units"]})
    return RecordSeries(
        title=involved_title(keys, "accounts"), unit="units", times_us=tuple(times),
        lines=(RecordLine("consumed by holders (truth)", tuple(sums["consumed"]), TRUTH),
               RecordLine("billed (ledger)", tuple(sums["billed"]), RECORD)),
        gaps=(RecordLine("billed - consumed", difference(sums["billed"], sums["consumed"]),
                         GAP),
              RecordLine("conservation residual", tuple(sums["residual"]), RESIDUAL,
                         dotted=True)))


def no_cap(settings: Any) -> int | None:
    # An account's funding moves with deposits and expiry: no one line to draw.
    return None


VIOLATIONS = ("conservation_violations", "residual_units")
"""Aggregate sample columns that are zero until the first damage (billed and
consumed part routinely: usage is billed in batches)."""

LANES = TimelineLanes(served="spend_admitted", refused="spend_refused",
                      served_label="spend (arrival to admission)",
                      strayed_keys=straying_accounts, series=billing_series, cap=no_cap,
                      violation_columns=VIOLATIONS)
