"""Empirical distributions: ``"empirical(PATH.csv)"``, a bootstrap from observed values.

Costs and durations are distributions (see ``simulator.scenario.distributions``) or
samples read from a CSV file; ``DurationSampler`` and ``AmountSampler`` accept
either. The path is absolute, or relative to the current directory or, failing
that, to the repository root.
"""

from __future__ import annotations

import csv
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator

from simulator import LAB_ROOT
from simulator.scenario.distributions import (
    FAMILIES,
    UNITS,
    Distribution,
    Unit,
    checked_probability,
    distribution_domain,
    parse_distribution,
)
from stores.domains import Domain, spell_number

_EMPIRICAL = re.compile(r"^\s*empirical\(\s*(?P<path>[^)]*?)\s*\)\s*$")
_CALL = re.compile(r"^\s*(?P<family>[a-z_]+)\s*\(")
# The CSV columns each kind of value may come from, and their size in the
# sampled unit (microseconds for durations).
COLUMNS: dict[str, dict[str, int]] = {
    "duration": {"duration_us": 1, "duration_ms": 1_000, "duration_s": 1_000_000},
    "amount": {"microdollars": 1},
}


@dataclass(frozen=True, slots=True)
class Empirical:
    """Observed values, resampled: each draw picks one row uniformly (a bootstrap).
    Same interface as ``Distribution`` (``sample``, ``mean``, ``survival``,
    ``quantile``)."""

    values: tuple[int, ...]
    unit: Unit
    text: str

    def sample(self, rng: random.Random) -> int:
        return self.values[rng.randrange(len(self.values))]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    def survival(self, x: float) -> float:
        """The survival function ``P(X > x)``: the share of the values above
        ``x`` (each draw picks a row uniformly), ``x`` in the sample's unit."""
        import numpy as np  # here, not at the top: reading a scenario loads no numpy

        return float((np.asarray(self.values) > x).mean())

    def quantile(self, probability: float) -> float:
        """The ``probability`` quantile, in the sample's unit: the smallest
        value with at least ``probability`` of the values at or below it (the
        inverted-CDF quantile). Raises ``ValueError`` for a probability
        outside 0..1."""
        import numpy as np

        checked_probability(probability)
        return float(np.quantile(np.asarray(self.values), probability, method="inverted_cdf"))

    def __str__(self) -> str:
        return self.text


def find_data_file(text: str) -> Path:
    """The file at ``text``: absolute, or relative to the current directory or,
    failing that, to the repository root."""
    given = Path(text)
    if given.is_absolute():
        candidates = [given]
    else:  # dict.fromkeys: one candidate when run from the repository root
        candidates = list(dict.fromkeys([Path.cwd() / given, LAB_ROOT / given]))
    for path in candidates:
        if path.is_file():
            return path
    looked = " and ".join(str(path) for path in candidates)
    raise ValueError(f"expected a CSV file, got {text!r}: no such file (looked for {looked})")


def load_empirical(path_text: str, unit: Unit, text: str) -> Empirical:
    """Read the column for ``unit`` from the CSV at ``path_text``."""
    path = find_data_file(path_text)
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file, skipinitialspace=True)
        header = reader.fieldnames or []
        found = [name for name in header if name in COLUMNS[unit]]
        if len(found) != 1:
            wanted = " or ".join(COLUMNS[unit])
            raise ValueError(f"expected one column named {wanted} in {path}, got columns {header}")
        column, size = found[0], COLUMNS[unit][found[0]]
        values = [_cell(row[column], size, UNITS[unit].bound, f"{path}:{line} ({column})")
                  for line, row in enumerate(reader, start=2)]
    if not values:
        raise ValueError(f"expected at least one value under {column} in {path}, got none")
    return Empirical(tuple(values), unit, text)


def _cell(cell: str | None, size: int, bound: int, where: str) -> int:
    try:
        value = float(cell or "")
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value * size <= bound):
        raise ValueError(f"expected a number from 0 to {spell_number(bound // size)} at {where}, "
                         f"got {cell!r}")
    return round(value * size)


def _sampler(unit: Unit) -> Callable[[Any], Distribution | Empirical]:
    def parse(value: Any) -> Distribution | Empirical:
        if isinstance(value, Empirical):
            return value
        text = value if isinstance(value, str) else ""
        if match := _EMPIRICAL.match(text):
            return load_empirical(match["path"], unit, text.strip())
        call = _CALL.match(text)
        if call and call["family"] not in FAMILIES:
            known = ", ".join([*FAMILIES, "empirical"])
            raise ValueError(f"unknown distribution {call['family']!r} in {text!r}; known: {known}")
        return parse_distribution(value, unit)

    return parse


def _sampler_domain(unit: Unit) -> Domain:
    return Domain(f"{distribution_domain(unit).kind}; or empirical(FILE.csv)")


DurationSampler = Annotated[
    Distribution | Empirical, PlainValidator(_sampler("duration")),
    PlainSerializer(str, return_type=str), _sampler_domain("duration"),
]
"""A distribution of durations (microseconds) or ``"empirical(PATH.csv)"``."""

AmountSampler = Annotated[
    Distribution | Empirical, PlainValidator(_sampler("amount")),
    PlainSerializer(str, return_type=str), _sampler_domain("amount"),
]
"""A distribution of amounts or ``"empirical(PATH.csv)"``."""
