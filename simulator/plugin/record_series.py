"""What every family's record panel shares: the per-key samples of the
involved keys summed per instant, the panel's title, and the value a family
hands the drawing code (``RecordSeries``: its lines against the truth, and the
gap between them on a scale of its own).

Only arithmetic and words are here. A family says what its columns mean
(``TimelineLanes.series``); ``simulator.present.timeline`` (the PNG) and
``simulator.present.html_report`` (the interactive page) draw the same series, so a
family never imports a plotting library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str]
Row = dict[str, Any]

SHOWN_KEYS = 3
"""Keys named in a record panel's title; the rest are counted ("+N more")."""

TRUTH, RECORD, GAP, RESIDUAL = "#d62728", "#1f77b4", "#9467bd", "#8c564b"
"""The colours of the truth, the store's record, and the gaps: hex, which
matplotlib and a browser read alike."""


@dataclass(frozen=True)
class RecordLine:
    """One line of a record panel: a label and a value per sample time."""

    label: str
    values: tuple[int, ...]
    color: str
    dotted: bool = False


@dataclass(frozen=True)
class RecordSeries:
    """The store's record of some keys against the truth over time.

    ``lines`` share one scale (the record, the truth, what the store counts);
    ``gaps`` — the record minus the truth, or an equation's residual — get a
    scale of their own, so a drift of a few thousand on a total of hundreds of
    thousands still shows."""

    title: str
    unit: str
    times_us: tuple[int, ...]
    lines: tuple[RecordLine, ...]
    gaps: tuple[RecordLine, ...]
    step: bool = True
    """Drawn as steps (a count that jumps) rather than straight segments."""
    cap_label: str = "cap"
    """What the family's cap line (``TimelineLanes.cap``) is called."""


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


def difference(minuend: list[int], subtrahend: list[int]) -> tuple[int, ...]:
    """``minuend - subtrahend``, sample by sample: the gap a panel draws apart."""
    return tuple(a - b for a, b in zip(minuend, subtrahend, strict=True))


def involved_title(keys: set[Key], noun: str = "keys") -> str:
    """``the keys involved: ns-0/subject-1, ... (+N more)``."""
    shown = ", ".join(f"{ns}/{subject}" for ns, subject in sorted(keys)[:SHOWN_KEYS])
    more = f" (+{len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else ""
    return f"the {noun} involved: {shown}{more}"
