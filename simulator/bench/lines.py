"""One line of ``python -m simulator bench``: figures measured side by side in
one run, ending with the ratio that says how the lab compares."""

from __future__ import annotations

import math
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
        return f"{self.name}: {self.figures} -> {self.ratio_name} = {shown(self.ratio)}{aim}"


def shown(ratio: float) -> str:
    """``ratio`` with two decimals, or as many more as two significant digits
    need: a ratio far below 0.01 (a starved machine's) reads as itself, not 0.00."""
    if not math.isfinite(ratio) or ratio <= 0 or ratio >= 0.01:
        return f"{ratio:.2f}"
    return f"{ratio:.{1 - math.floor(math.log10(ratio))}f}"
