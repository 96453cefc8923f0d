"""Quantities as people write them: ``"30s"``, ``"250ms"``, ``"500/s"``.

Shared by store settings and by scenarios. It lives under ``stores`` because a
store's settings are validated with it and stores may not import the
simulator; the simulator builds its distributions on top of it.

Every parser raises ``ValueError`` with a message that says what was wanted
and what was given, which pydantic turns into a field-path error.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

from stores.domains import Domain

MICROSECONDS_PER = {
    "us": 1,
    "µs": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "min": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
}
PER_SECOND = {"s": 1.0, "ms": 1000.0, "min": 1 / 60, "m": 1 / 60, "h": 1 / 3600, "d": 1 / 86400}

_NUMBER = r"[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_DURATION = re.compile(rf"^\s*(?P<number>-?{_NUMBER})\s*(?P<unit>[a-zµ]+)\s*$")
_RATE = re.compile(rf"^\s*(?P<number>{_NUMBER})\s*/\s*(?P<unit>[a-z]+)\s*$")

MAX_DURATION_US = 3650 * 86_400_000_000
"""The longest duration the lab reads: ten years (a run, a TTL, a latency)."""

MAX_RATE_PER_SECOND = 1_000_000.0
"""The fastest rate the lab reads: one event a microsecond, the resolution of
its virtual clock (a replica's arrivals are never closer than that)."""

DURATION_HINT = "a duration such as '250ms', '30s', '10m', '2h' (units: us, ms, s, m, h, d)"
RATE_HINT = "a rate such as '500/s', '30/min', '1/h'"


def parse_duration_us(value: Any) -> int:
    """A duration in integer microseconds. A bare ``0`` is allowed; other bare
    numbers are refused, because a missing unit is the classic off-by-1000."""
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    if isinstance(value, int | float) and value == 0:
        return 0
    if not isinstance(value, str):
        raise ValueError(f"expected {DURATION_HINT}, got {value!r} (write the unit)")
    match = _DURATION.match(value)
    if not match or match["unit"] not in MICROSECONDS_PER:
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    number = float(match["number"].replace("_", ""))
    microseconds = number * MICROSECONDS_PER[match["unit"]]
    if microseconds < 0:
        raise ValueError(f"expected a duration of zero or more, got {value!r}")
    if microseconds > MAX_DURATION_US:
        raise ValueError(f"expected a duration of at most 3650d (ten years), got {value!r}")
    return round(microseconds)


def parse_duration_ms(value: Any) -> int:
    """A duration in integer milliseconds; sub-millisecond parts are refused."""
    microseconds = parse_duration_us(value)
    if microseconds % 1_000:
        raise ValueError(f"expected a whole number of milliseconds, got {value!r}")
    return microseconds // 1_000


def parse_rate_per_second(value: Any) -> float:
    """An event rate, per second."""
    if not isinstance(value, str):
        raise ValueError(f"expected {RATE_HINT}, got {value!r}")
    match = _RATE.match(value)
    if not match or match["unit"] not in PER_SECOND:
        raise ValueError(f"expected {RATE_HINT}, got {value!r}")
    rate = float(match["number"].replace("_", "")) * PER_SECOND[match["unit"]]
    if not math.isfinite(rate):
        raise ValueError(f"expected a finite rate, got {value!r}")
    if rate > MAX_RATE_PER_SECOND:
        raise ValueError(f"expected a rate of at most {format_rate(MAX_RATE_PER_SECOND)} (one "
                         f"event a microsecond, the virtual clock's resolution), got {value!r}")
    return rate


def format_rate(per_second: float) -> str:
    """A rate as people write it: ``1000000/s``, ``0.5/s``."""
    return f"{per_second:g}/s" if per_second < 1e6 else f"{per_second:.0f}/s"


def format_duration_us(microseconds: int) -> str:
    """The shortest exact human spelling of a duration: ``30000000`` -> ``"30s"``."""
    for unit in ("d", "h", "m", "s", "ms"):
        size = MICROSECONDS_PER[unit]
        if microseconds and microseconds % size == 0:
            return f"{microseconds // size}{unit}"
    return f"{microseconds}us"


DurationUs = Annotated[
    int,
    BeforeValidator(parse_duration_us),
    PlainSerializer(format_duration_us, return_type=str),
    Domain("a duration", 0, MAX_DURATION_US, format_duration_us),
]
"""A pydantic field written as ``"30s"`` and held as integer microseconds."""

DurationMs = Annotated[
    int,
    BeforeValidator(parse_duration_ms),
    PlainSerializer(lambda ms: format_duration_us(ms * 1_000), return_type=str),
    Domain("a duration in whole milliseconds", 0, MAX_DURATION_US // 1_000,
           lambda ms: format_duration_us(ms * 1_000)),
]
"""A pydantic field written as ``"30s"`` and held as integer milliseconds."""

RatePerSecond = Annotated[float, BeforeValidator(parse_rate_per_second),
                          Domain("a rate", 0.0, MAX_RATE_PER_SECOND, format_rate)]
"""A pydantic field written as ``"500/s"`` and held as events per second."""
