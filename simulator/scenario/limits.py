"""What a scenario's ``[limits]`` table may say: the most work one run may do.

The limits are checked before a run starts and while it runs
(``simulator.run.limits``); this is only what they are and how they are
written (``max_memory = "16GiB"``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer

from simulator.scenario.base import Model
from stores.domains import Domain, Integer

GiB = 2**30
DEFAULT_MAX_EVENTS = 200_000_000
"""Kernel events: the committed scenarios take from a few dozen to about
620,000; a run takes 0.05 to 0.2 ms of wall time an event, so this is hours."""
DEFAULT_MAX_KEYS = 10_000_000
DEFAULT_MAX_MEMORY = 8 * GiB
"""Or half of the machine's memory, when that is less."""
MEMORY_UNITS = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
                "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
MEMORY_HINT = ("a memory size such as '512MiB' or '16GiB' (units: B, KiB, MiB, GiB, TiB, "
               "KB, MB, GB, TB)")
_MEMORY = re.compile(r"^\s*(?P<number>[0-9][0-9_]*(?:\.[0-9]+)?)\s*(?P<unit>[a-zA-Z]+)\s*$")
MIN_MEMORY, MAX_MEMORY = 2**20, 2**50
MAX_EVENTS_BOUND = 2**53


def parse_memory_bytes(value: Any) -> int:
    """``"16GiB"`` -> bytes; a bare whole number is bytes already."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected {MEMORY_HINT}, got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _MEMORY.match(value)
        unit = match["unit"].lower() if match else ""
        if match is None or unit not in MEMORY_UNITS:
            raise ValueError(f"expected {MEMORY_HINT}, got {value!r}")
        size = round(float(match["number"].replace("_", "")) * MEMORY_UNITS[unit])
    if not MIN_MEMORY <= size <= MAX_MEMORY:
        raise ValueError(f"expected a memory size from 1MiB to 1024TiB, got {value!r}")
    return size


def format_bytes(size: float) -> str:
    """``8GiB``, ``1.5GiB``, ``740MiB``: as a size is written, to a tenth."""
    if size != size or size == float("inf"):
        return "an unbounded amount"
    if size >= 2**60:
        return f"{size / 2**40:.2g}TiB"
    for unit, scale in (("TiB", 2**40), ("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + unit
    return f"{size:.0f}B"


def count(value: float) -> str:
    """``1,234``, ``12.3 million``, ``4.5e+12``: a figure a person reads at a glance."""
    if value != value or value == float("inf"):
        return "an unbounded number of"
    if value < 10_000_000:
        return f"{value:,.0f}"
    if value < 1e12:
        for name, scale in (("billion", 1e9), ("million", 1e6)):
            if value >= scale:
                return f"{value / scale:.3g} {name}"
    return f"{value:.2g}"


MemorySize = Annotated[
    int, BeforeValidator(parse_memory_bytes), PlainSerializer(format_bytes, return_type=str),
    Domain("a memory size", MIN_MEMORY, MAX_MEMORY, format_bytes)]
"""A pydantic field written as ``"16GiB"`` and held as bytes."""


class Limits(Model):
    """How much work one run may do (``simulator.run.limits``)."""

    max_events: Integer = Field(
        DEFAULT_MAX_EVENTS, ge=1, le=MAX_EVENTS_BOUND,
        description="Kernel events a run may take: a run estimated past it is refused "
        "before it starts, one that gets there is stopped (run --max-events N).")
    max_memory: MemorySize | None = Field(
        None, description="Resident memory a run's process may reach, e.g. '16GiB': "
        "estimated before, measured while it runs; none: 8GiB or half of the machine's "
        "memory, whichever is smaller (run --max-memory SIZE).")
    max_keys: Integer = Field(
        DEFAULT_MAX_KEYS, ge=1, le=MAX_EVENTS_BOUND,
        description="Keys a run may hold: the key space's subjects and namespaces and the "
        "sessions' counters (run --max-keys N).")
