"""One line of ``python -m simulator bench``: figures measured side by side in
one run, ending with the ratio that says how the lab compares."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchLine:
    """``name: figures -> ratio_name = ratio`` (``target`` is what the lab aims at)."""

    name: str
    figures: str
    ratio_name: str
    ratio: float
    target: str = ""

    def __str__(self) -> str:
        aim = f" (target {self.target})" if self.target else ""
        return f"{self.name}: {self.figures} -> {self.ratio_name} = {self.ratio:.2f}{aim}"
