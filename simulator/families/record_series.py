"""What every family's ``replay --plot`` record panel shares: the per-key
samples of the involved keys summed per instant, and the panel's title.

Only arithmetic and words are here; the drawing stays with each family
(``TimelineLanes.draw_record``), which knows what its columns mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Key = tuple[str, str]
Row = dict[str, Any]

SHOWN_KEYS = 3
"""Keys named in a record panel's title; the rest are counted ("+N more")."""


def summed(samples: list[Row], keys: set[Key], columns: dict[str, Callable[[Row], int]],
           where: Callable[[Row], bool] = lambda row: True,
           ) -> tuple[list[int], dict[str, list[int]]]:
    """The sample times (µs, ascending) and, for each named column, the sum of
    ``column(row)`` over the rows of ``keys`` (and ``where``) at each time."""
    series: dict[int, dict[str, int]] = {}
    for row in samples:
        if (row["namespace"], row["subject"]) in keys and where(row):
            point = series.setdefault(row["time_us"], dict.fromkeys(columns, 0))
            for name, column in columns.items():
                point[name] += column(row)
    times = sorted(series)
    return times, {name: [series[time][name] for time in times] for name in columns}


def involved_title(keys: set[Key], noun: str = "keys") -> str:
    """``the keys involved: ns-0/subject-1, ... (+N more)``."""
    shown = ", ".join(f"{ns}/{subject}" for ns, subject in sorted(keys)[:SHOWN_KEYS])
    more = f" (+{len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else ""
    return f"the {noun} involved: {shown}{more}"
