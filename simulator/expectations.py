"""``[expect]``: thresholds a scenario declares on its own summary metrics.

Written as ``metric = "<= 0.01"`` (operators ``<``, ``<=``, ``==``, ``!=``,
``>=``, ``>``). A run checks them against its summary; ``run`` exits with
status 3 and names every expectation that failed.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

OPERATORS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
             "<": operator.lt, ">": operator.gt}
_EXPRESSION = re.compile(r"^\s*(<=|>=|==|!=|<|>)\s*(-?[0-9_]+(?:\.[0-9]+)?(?:e-?[0-9]+)?)\s*$")


@dataclass(frozen=True, slots=True)
class Expectation:
    metric: str
    operator: str
    threshold: float

    @classmethod
    def parse(cls, metric: str, text: Any) -> Expectation:
        match = _EXPRESSION.match(str(text))
        if not match:
            raise ValueError(f"expected a comparison such as '<= 0.01' or '== 0', got {text!r}")
        return cls(metric, match.group(1), float(match.group(2).replace("_", "")))

    def holds_for(self, value: Any) -> bool:
        return value is not None and OPERATORS[self.operator](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.metric} {self.operator} {self.threshold:g}"


def failed_expectations(expectations: dict[str, str], summary: dict[str, Any]) -> list[str]:
    """One line per expectation that does not hold (or names no metric)."""
    failures = []
    for metric, text in expectations.items():
        expectation = Expectation.parse(metric, text)
        if metric not in summary:
            failures.append(f"{expectation}: the summary has no metric {metric!r}")
        elif not expectation.holds_for(summary[metric]):
            failures.append(f"{expectation}: got {summary[metric]!r}")
    return failures
