"""The domains of numeric fields: strict, finite and bounded, stated once.

A scenario or a store's settings names a number of some *kind* — a count, an
amount, a probability — and each kind has one annotated type here, used by
every field of that kind. Each type refuses what is not a number of it (a
boolean is not a number, nor is ``"500"``: TOML writes numbers without
quotes), refuses NaN and infinities, and carries its bounds; a field narrows
them with ``Field(ge=..., le=...)``. The bounds and a ``Domain`` marker are
read back by the fields reference (``simulator.scenario.reference``), so the
documentation states exactly what validation enforces.

It lives under ``stores`` because store settings are validated with it and
stores may not import the simulator.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, Strict

MAX_AMOUNT = 2**53
"""The largest amount (micro-dollars, cost units) a workload or a budget holds:
every integer up to it is exact in a double, which the Redis stores' Lua
scripts compute in, and it fits the trace's 64-bit columns."""

REDIS_INTEGER_MAX = 2**63 - 1
"""The largest integer a Redis counter holds (signed 64-bit): the bound of
amounts and limits that stores keep as Redis integers, not as doubles."""

MAX_SEED = 2**63 - 1
"""Seeds are written into results as signed 64-bit integers."""


@dataclass(frozen=True, slots=True)
class Domain:
    """What a field's values may be, for the fields reference: ``kind`` names
    the values ("an integer", "a duration"), ``low``/``high`` are the bounds
    the type itself sets (a field may narrow them), ``spell`` writes a bound
    as people write the value."""

    kind: str
    low: float | None = None
    high: float | None = None
    spell: Callable[[Any], str] | None = None


def spell_number(value: Any) -> str:
    """``100,000``; ``2^53`` and ``2^63 - 1`` for the bounds people know by name."""
    if isinstance(value, int) and value < 0:
        return f"-{spell_number(-value)}".replace("-2^63 - 1", "-(2^63 - 1)")
    if isinstance(value, int) and value >= 2**32:
        for power in range(32, 65):
            if value == 2**power:
                return f"2^{power}"
            if value == 2**power - 1:
                return f"2^{power} - 1"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


class NotANumber(ValueError):
    """A value given where a number belongs that is none: ``reason`` says
    what it is instead (the scenario's errors add the field's domain)."""

    def __init__(self, value: Any, reason: str) -> None:
        super().__init__(f"expected a finite number, got {value!r} ({reason})")
        self.reason = reason


def strict_number(value: Any) -> Any:
    """Let through numbers only, and finite ones: a boolean and text are
    refused (pydantic would read ``true`` as 1 and ``"500"`` as 500), and so
    are NaN and the infinities. Integers of other libraries (a notebook's
    numpy values) become Python integers."""
    if isinstance(value, bool):
        raise NotANumber(value, "a boolean")
    if isinstance(value, str):
        raise NotANumber(value, "text; write a number without quotes")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and not math.isfinite(value):
        raise NotANumber(value, "not finite")
    return value


Integer = Annotated[int, BeforeValidator(strict_number), Domain("an integer", spell=spell_number)]
"""A whole number; each field states its own bounds (``Field(ge=..., le=...)``)."""

Real = Annotated[float, BeforeValidator(strict_number), Domain("a number", spell=spell_number)]
"""A finite number; each field states its own bounds."""

Amount = Annotated[Integer, Field(ge=0, le=MAX_AMOUNT)]
"""An amount (micro-dollars, cost units): a whole number from 0 to 2^53."""

Probability = Annotated[Real, Field(ge=0.0, le=1.0)]
"""A chance or a share: a number from 0 to 1."""

Seed = Annotated[Integer, Field(ge=0, le=MAX_SEED)]
"""A run seed: a whole number from 0 to 2^63 - 1."""

Flag = Annotated[bool, Strict(), Domain("true or false")]
"""A boolean, written ``true`` or ``false`` (not 1, not ``"yes"``)."""
