"""``python -m simulator diff RUN_A RUN_B``: two runs' summaries, metric by metric.

Each run is its results directory or its ``summary.json``. Only the metrics
that differ are shown, in the summary's groups (``simulator.present.report``), each
with its value in A, in B and the change B − A; a metric one run lacks shows
``absent`` there. Two runs of the same scenario and seed agree on everything
but ``backend``; two settings of a scenario differ where the setting matters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.present.report import figure, grouped

SUMMARY = "summary.json"


class _Absent:
    """A metric the run's summary lacks (unlike ``None``: there, without a value)."""

    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


@dataclass(frozen=True, slots=True)
class Difference:
    """One metric whose value differs between run A and run B (``ABSENT``: not in it)."""

    metric: str
    a: Any
    b: Any

    @property
    def change(self) -> str:
        """B − A, signed, when both are numbers; else empty."""
        if _is_number(self.a) and _is_number(self.b):
            # Rounded as the summary rounds its figures: 0.3 - 0.1 reads 0.2.
            return f"{round(self.b - self.a, 6):+,}"
        return ""


def read_summary(path: Path) -> dict[str, Any]:
    """A run's summary, from its results directory or its ``summary.json``;
    a path that is neither is one ``ValueError`` line naming it."""
    file = path / SUMMARY if path.is_dir() else path
    if path.is_dir() and not file.exists():
        raise ValueError(f"{path}: a directory without {SUMMARY}; give a run's results "
                         f"directory (data/results/NAME-seedN) or its {SUMMARY}")
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file or directory") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{file}: not a run's {SUMMARY} ({error})") from None
    if not isinstance(summary, dict) or "store" not in summary:
        raise ValueError(f"{file}: not a run's {SUMMARY} (no \"store\" in it)")
    return summary


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, list[Difference]]]:
    """The metrics that differ, by group, in the summary's order (B's groups)."""
    both = {**a, **b}
    found = []
    for title, metrics in grouped(both, zeros=True):
        changed = [Difference(metric, a.get(metric, ABSENT), b.get(metric, ABSENT))
                   for metric in metrics
                   if metric not in a or metric not in b or a[metric] != b[metric]]
        if changed:
            found.append((title, changed))
    return found


def diff_table(a_name: str, b_name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """What ``diff`` prints: which run is A and which B, then the metrics that differ."""
    lines = [f"A: {a_name} ({_describe(a)})", f"B: {b_name} ({_describe(b)})"]
    metrics = len({**a, **b})
    groups = [(title, [(difference.metric, figure(difference.a), figure(difference.b),
                        difference.change) for difference in changed])
              for title, changed in differences(a, b)]
    rows = [row for _, group_rows in groups for row in group_rows]
    if not rows:
        lines.append(f"the two runs agree on all {metrics} metrics")
        return "\n".join(lines)
    heading = ("", "A", "B", "B − A")
    widths = [max(len(row[column]) for row in [heading, *rows]) for column in range(4)]

    def line(cells: tuple[str, str, str, str]) -> str:
        name, *values = cells
        return "   " + f"{name:<{widths[0]}}" + "".join(
            f"  {value:>{width}}" for value, width in zip(values, widths[1:], strict=True))

    lines.append(line(heading))
    for title, group_rows in groups:
        lines += [f"-- {title}", *map(line, group_rows)]
    lines.append(f"{len(rows)} of {metrics} metrics differ")
    return "\n".join(lines)


def _describe(summary: Mapping[str, Any]) -> str:
    return ", ".join(str(summary[key]) for key in ("scenario", "store", "backend")
                     if key in summary) + (f", seed {summary['seed']}" if "seed" in summary else "")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
