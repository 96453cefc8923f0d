"""Distributions written as people write them: ``"lognormal(40ms, 0.5)"``.

A distribution is a frozen value with ``sample(rng)``; it never owns
randomness, the caller passes the seeded stream. Durations sample integer
microseconds; amounts sample integer units (micro-dollars, cost units).

Spellings (location parameters carry a unit for durations, shape parameters
never do):

===========================  ================================================
``"5ms"`` or ``5000``         always that value
``"constant(5ms)"``           the same
``"uniform(a, b)"``           uniform on [a, b]
``"normal(mean, sd)"``        Gaussian (may go negative: clock offsets)
``"lognormal(median, sigma)"``  median * exp(sigma * N(0, 1)); heavy right tail
``"exponential(mean)"``       memoryless, mean ``mean``
``"pareto(scale, shape)"``    Pareto type I: never below ``scale``; infinite
                              mean when ``shape <= 1``
===========================  ================================================
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, PlainSerializer

from stores.quantities import DURATION_HINT, parse_duration_us

Unit = Literal["duration", "amount"]

# For each family: its parameters, and whether each is a location (carries the
# unit) or a shape (a plain number).
FAMILIES: dict[str, tuple[tuple[str, bool], ...]] = {
    "constant": (("value", True),),
    "uniform": (("low", True), ("high", True)),
    "normal": (("mean", True), ("sd", True)),
    "lognormal": (("median", True), ("sigma", False)),
    "exponential": (("mean", True),),
    "pareto": (("scale", True), ("shape", False)),
}
EXAMPLES = "'lognormal(40ms, 0.5)', 'pareto(2s, 1.5)', 'uniform(0, 6000)' or a plain value"
_CALL = re.compile(r"^\s*(?P<family>[a-z_]+)\s*\((?P<args>.*)\)\s*$")


@dataclass(frozen=True, slots=True)
class Distribution:
    family: str
    params: tuple[float, ...]
    unit: Unit
    text: str

    def sample(self, rng: random.Random) -> int:
        """One draw, rounded to an integer of the distribution's unit."""
        p = self.params
        family = self.family
        if family == "constant":
            value = p[0]
        elif family == "uniform":
            value = rng.uniform(p[0], p[1])
        elif family == "normal":
            value = rng.gauss(p[0], p[1])
        elif family == "lognormal":
            value = p[0] * math.exp(p[1] * rng.gauss(0.0, 1.0))
        elif family == "exponential":
            value = rng.expovariate(1.0 / p[0]) if p[0] > 0 else 0.0
        else:  # pareto
            value = p[0] * rng.paretovariate(p[1])
        return round(value)

    @property
    def mean(self) -> float:
        """The analytic mean (``inf`` for a Pareto with shape <= 1)."""
        p = self.params
        return {
            "constant": lambda: p[0],
            "uniform": lambda: (p[0] + p[1]) / 2,
            "normal": lambda: p[0],
            "lognormal": lambda: p[0] * math.exp(p[1] ** 2 / 2),
            "exponential": lambda: p[0],
            "pareto": lambda: p[0] * p[1] / (p[1] - 1) if p[1] > 1 else math.inf,
        }[self.family]()

    def __str__(self) -> str:
        return self.text


def _location(text: str, unit: Unit) -> float:
    if unit == "amount":
        return _number(text)
    text = text.strip()
    try:
        bare = float(text.replace("_", ""))
    except ValueError:
        negative = text.startswith("-")
        magnitude = parse_duration_us(text.lstrip("-"))
        return float(-magnitude if negative else magnitude)
    if bare != 0:
        raise ValueError(f"expected {DURATION_HINT}, got {text!r} (write the unit)")
    return 0.0


def _number(text: str) -> float:
    try:
        return float(text.strip().replace("_", ""))
    except ValueError:
        raise ValueError(f"expected a number, got {text.strip()!r}") from None


def parse_distribution(value: Any, unit: Unit) -> Distribution:
    """Parse a distribution of durations (microseconds) or amounts."""
    if isinstance(value, Distribution):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a distribution such as {EXAMPLES}, got {value!r}")
    text = str(value)
    call = _CALL.match(text)
    if call is None:
        if isinstance(value, int) and unit == "amount":
            # Kept an integer: an amount may be past what a float holds exactly.
            return Distribution("constant", (value,), unit, text)
        return Distribution("constant", (_location(text, unit),), unit, text)
    family = call["family"]
    if family not in FAMILIES:
        raise ValueError(
            f"unknown distribution {family!r} in {text!r}; known: {', '.join(FAMILIES)}"
        )
    spec = FAMILIES[family]
    args = [a for a in call["args"].split(",")] if call["args"].strip() else []
    if len(args) != len(spec):
        names = ", ".join(name for name, _ in spec)
        raise ValueError(f"{family} takes ({names}), got {len(args)} argument(s) in {text!r}")
    params = tuple(
        _location(arg, unit) if is_location else _number(arg)
        for arg, (_, is_location) in zip(args, spec, strict=True)
    )
    _check(family, params, text)
    return Distribution(family, params, unit, text)


def _check(family: str, params: tuple[float, ...], text: str) -> None:
    if family == "uniform" and params[1] < params[0]:
        raise ValueError(f"uniform needs low <= high, got {text!r}")
    if family in ("normal", "lognormal") and params[1] < 0:
        raise ValueError(f"{family} needs a spread of zero or more, got {text!r}")
    if family == "pareto" and (params[0] <= 0 or params[1] <= 0):
        raise ValueError(f"pareto needs a positive scale and shape, got {text!r}")
    if family in ("lognormal", "exponential") and params[0] < 0:
        raise ValueError(f"{family} needs a non-negative first parameter, got {text!r}")


def _serialize(distribution: Distribution) -> str:
    return distribution.text


DurationDistribution = Annotated[
    Distribution,
    BeforeValidator(lambda value: parse_distribution(value, "duration")),
    PlainSerializer(_serialize, return_type=str),
]
"""A pydantic field holding a distribution of durations, in microseconds."""

AmountDistribution = Annotated[
    Distribution,
    BeforeValidator(lambda value: parse_distribution(value, "amount")),
    PlainSerializer(_serialize, return_type=str),
]
"""A pydantic field holding a distribution of integer amounts."""
