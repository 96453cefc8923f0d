"""Distributions written as people write them: ``"lognormal(40ms, 0.5)"``.

A distribution is a frozen value with ``sample(rng)``; it never owns
randomness, the caller passes the seeded stream. Durations sample integer
microseconds; amounts sample integer units (micro-dollars, cost units). Its
tail is analytic: ``survival(x)`` is ``P(X > x)`` and ``quantile(p)`` the
smallest ``x`` with ``P(X <= x) >= p``, both in the distribution's unit.

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

Every parameter is checked when the scenario is read, not when it is first
sampled (a fault that never fires still has its distribution checked): each
is finite, a location lies within its unit's bound (``UNITS``), a shape
within its range (``SHAPES``). A draw past the unit's bound is held at it, so
no draw overflows what the lab and the stores hold.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, PlainSerializer

from stores.domains import MAX_AMOUNT, REDIS_INTEGER_MAX, Domain, spell_number
from stores.quantities import (
    DURATION_HINT,
    MAX_DURATION_US,
    format_duration_us,
    parse_duration_us,
)

Unit = Literal["duration", "amount", "counter", "ppm"]

MAX_DRIFT_PPM = 1_000_000
"""A clock drift from a stopped clock (-1,000,000 ppm) to one running twice as fast."""


@dataclass(frozen=True, slots=True)
class UnitBound:
    """How far a distribution of one unit reaches: every location parameter
    and every draw lies within ``-bound .. bound``."""

    bound: int
    what: str
    """The values, in the plural: ``"durations"``."""
    one: str
    """One of them: ``"a duration"``."""
    spell: Callable[[Any], str]

    def range_text(self) -> str:
        return f"{self.spell(-self.bound)} to {self.spell(self.bound)}"

    def refuse(self, given: Any) -> ValueError:
        return ValueError(f"expected {self.one} from {self.range_text()}, got {given!r}")


UNITS: dict[Unit, UnitBound] = {
    "duration": UnitBound(MAX_DURATION_US, "durations", "a duration", lambda us: (
        f"-{format_duration_us(-us)}" if us < 0 else format_duration_us(us))),
    "amount": UnitBound(MAX_AMOUNT, "amounts (micro-dollars, cost units)",
                        "an amount (micro-dollars, cost units)", spell_number),
    "counter": UnitBound(REDIS_INTEGER_MAX, "counter amounts (Redis integers)",
                         "a counter amount (a Redis integer)", spell_number),
    "ppm": UnitBound(MAX_DRIFT_PPM, "parts per million", "a number of parts per million",
                     spell_number),
}
INTEGER_UNITS = ("amount", "counter", "ppm")
"""Units whose whole-number constants are kept whole: an amount may be past
what a float holds exactly."""

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
SHAPES: dict[str, tuple[float, float]] = {"sigma": (0.0, 20.0), "shape": (0.1, 1000.0)}
"""The range of each shape parameter. A lognormal's sigma past 20 would
overflow its mean (``exp(sigma^2 / 2)``); a Pareto shape under 0.1 overflows
a double on a draw; past the other ends nothing changes that matters."""
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
        # Held within the unit's bound: a heavy tail's rare draw past it
        # would overflow the trace's columns or a store's integers.
        bound = _BOUNDS[self.unit]
        if value >= bound:
            return bound
        if value <= -bound:
            return -bound
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

    def survival(self, x: float) -> float:
        """The survival function ``P(X > x)``: the share of draws above ``x``,
        ``x`` in the distribution's unit (microseconds for durations).

        Analytic, for the family's continuous law (before a draw is rounded
        or held at the unit's bound). A law with no spread (a constant, a
        uniform of equal ends, a normal of sd 0, a lognormal of sigma or
        median 0) is a step: 1 below its value, 0 at and above it; a
        lognormal's is 1 at and below 0 whatever its parameters."""
        p = self.params
        family = self.family
        if family == "constant":
            return 1.0 if p[0] > x else 0.0
        if family == "uniform":
            if p[1] == p[0]:
                return 1.0 if p[0] > x else 0.0
            return float(min(1.0, max(0.0, (p[1] - x) / (p[1] - p[0]))))
        if family == "normal":
            if p[1] == 0:
                return 1.0 if p[0] > x else 0.0
            return 1.0 - NormalDist(p[0], p[1]).cdf(x)
        if family == "lognormal":
            if x <= 0:
                return 1.0
            if p[1] == 0 or p[0] == 0:
                return 1.0 if p[0] > x else 0.0
            return 1.0 - NormalDist().cdf(math.log(x / p[0]) / p[1])
        if family == "exponential":
            if x < 0:
                return 1.0
            return math.exp(-x / p[0]) if p[0] > 0 else 0.0
        if family == "pareto":
            return 1.0 if x < p[0] else (p[0] / x) ** p[1]
        raise ValueError(f"no exceedance for a {family!r} distribution")

    def quantile(self, probability: float) -> float:
        """The ``probability`` quantile, in the distribution's unit: the
        smallest ``x`` with ``P(X <= x) >= probability`` (the inverse of
        ``survival``: ``survival(quantile(p)) == 1 - p`` on a continuous law).

        Analytic. At 0 and 1 an unbounded end is ``-inf`` or ``inf`` (a
        lognormal's lower end is 0); a law with no spread has its value for
        every probability. Raises ``ValueError`` for a probability outside
        0..1."""
        checked_probability(probability)
        p = self.params
        family = self.family
        if family == "constant":
            value = p[0]
        elif family == "uniform":
            value = p[0] + probability * (p[1] - p[0])
        elif family in ("normal", "lognormal") and probability in (0.0, 1.0):
            value = {0.0: -math.inf if family == "normal" else 0.0, 1.0: math.inf}[probability]
        elif family == "normal":
            value = p[0] + p[1] * NormalDist().inv_cdf(probability)
        elif family == "lognormal":
            value = p[0] * math.exp(p[1] * NormalDist().inv_cdf(probability))
        elif family == "exponential":
            value = -p[0] * math.log1p(-probability) if probability < 1 else math.inf
        elif family == "pareto":
            value = p[0] * (1 - probability) ** (-1 / p[1]) if probability < 1 else math.inf
        else:
            raise ValueError(f"no quantile for a {family!r} distribution")
        return value

    def __str__(self) -> str:
        return self.text


_BOUNDS = {unit: scale.bound for unit, scale in UNITS.items()}


def checked_probability(probability: float) -> float:
    """``probability`` itself when it lies in 0..1 (a quantile's argument);
    raises ``ValueError`` otherwise."""
    if not 0 <= probability <= 1:
        raise ValueError(f"expected a probability 0..1, got {probability}")
    return probability


def _location(text: str, unit: Unit) -> float:
    """A parameter that carries the unit: a duration is written with its unit
    (and at most ten years, ``parse_duration_us``), the others as numbers."""
    if unit != "duration":
        value = _number(text)
        if abs(value) > _BOUNDS[unit]:
            raise UNITS[unit].refuse(text.strip())
        return value
    text = text.strip()
    try:
        bare = float(text.replace("_", ""))
    except ValueError:
        negative = text.startswith("-")
        magnitude = parse_duration_us(text.lstrip("-"))
        return float(-magnitude if negative else magnitude)
    if not math.isfinite(bare):
        raise ValueError(f"expected a finite duration, got {text!r}")
    if bare != 0:
        raise ValueError(f"expected {DURATION_HINT}, got {text!r} (write the unit)")
    return 0.0


def _number(text: str) -> float:
    try:
        value = float(text.strip().replace("_", ""))
    except ValueError:
        raise ValueError(f"expected a number, got {text.strip()!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text.strip()!r}")
    return value


def _shape(text: str, name: str) -> float:
    value = _number(text)
    low, high = SHAPES[name]
    if not low <= value <= high:
        raise ValueError(f"expected a {name} from {low:g} to {high:g}, got {text.strip()!r}")
    return value


def parse_distribution(value: Any, unit: Unit) -> Distribution:
    """Parse a distribution of durations (microseconds) or amounts."""
    if isinstance(value, Distribution):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a distribution such as {EXAMPLES}, got {value!r}")
    text = str(value)
    call = _CALL.match(text)
    if call is None:
        if isinstance(value, int) and unit in INTEGER_UNITS:
            # Kept an integer: an amount may be past what a float holds exactly.
            if abs(value) > _BOUNDS[unit]:
                raise UNITS[unit].refuse(value)
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
    try:
        params = tuple(
            _location(arg, unit) if is_location else _shape(arg, name)
            for arg, (name, is_location) in zip(args, spec, strict=True)
        )
    except ValueError as error:
        raise ValueError(f"{error} in {text!r}") from None
    _check(family, params, text)
    return Distribution(family, params, unit, text)


def _check(family: str, params: tuple[float, ...], text: str) -> None:
    if family == "uniform" and params[1] < params[0]:
        raise ValueError(f"uniform needs low <= high, got {text!r}")
    if family == "normal" and params[1] < 0:
        raise ValueError(f"normal needs a spread of zero or more, got {text!r}")
    if family == "pareto" and params[0] <= 0:
        raise ValueError(f"pareto needs a positive scale, got {text!r}")
    if family in ("lognormal", "exponential") and params[0] < 0:
        raise ValueError(f"{family} needs a non-negative first parameter, got {text!r}")


def reference() -> list[str]:
    """How distributions are written and what their parameters may be, for
    the fields reference: from the same tables that validation reads."""
    lines = ["A distribution is a plain value (always that value) or one of:"]
    for family, spec in FAMILIES.items():
        names = ", ".join(name for name, _ in spec)
        lines.append(f"  {family}({names})")
    lines.append("Location parameters carry the field's unit (a duration is written with "
                 "its unit) and lie within:")
    lines += [f"  {scale.what}: {scale.range_text()}" for scale in UNITS.values()]
    lines.append("Shape parameters are plain numbers: "
                 + "; ".join(f"{name} from {low:g} to {high:g}"
                             for name, (low, high) in SHAPES.items()) + ".")
    lines.append("Every parameter is finite; uniform needs low <= high; normal's sd, "
                 "lognormal's median and exponential's mean are 0 or more; pareto's scale "
                 "is more than 0. A draw past the unit's bound is held at it.")
    return lines


def _serialize(distribution: Distribution) -> str:
    return distribution.text


def distribution_domain(unit: Unit) -> Domain:
    """The fields reference's words for a distribution of ``unit``."""
    return Domain(f"a distribution of {UNITS[unit].what}, {UNITS[unit].range_text()}")


def _distribution_of(unit: Unit) -> Any:
    return Annotated[
        Distribution,
        BeforeValidator(lambda value: parse_distribution(value, unit)),
        PlainSerializer(_serialize, return_type=str),
        distribution_domain(unit),
    ]


DurationDistribution = _distribution_of("duration")
"""A pydantic field holding a distribution of durations, in microseconds."""

AmountDistribution = _distribution_of("amount")
"""A pydantic field holding a distribution of integer amounts (micro-dollars, units)."""

CounterDistribution = _distribution_of("counter")
"""A distribution of amounts a store keeps as Redis integers (session counters)."""

PpmDistribution = _distribution_of("ppm")
"""A distribution of parts per million (clock drift)."""
