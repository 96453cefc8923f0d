"""Arrival processes: when each replica's requests arrive.

A process is written as text (``"poisson(500/s)"``, ``"poisson(5/s) per
replica"``, ``"bursts(2000/s, on=2s, off=8s)"``) or, for exact scenarios, as a
fixed list (``{ at = ["0ms", "5ms"], replica = [0, 1] }``) that may also pin
fields of the requests. Each replica gets its own ``Timer`` drawn from its own
stream. A fleet-wide Poisson rate is split evenly over the replicas: the
superposition of independent Poisson processes is Poisson at the summed rate.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import Field, ValidationError, model_validator

from simulator.scenario.base import Model, ReplicaIndex
from simulator.scenario.domains import field_path
from stores.domains import MAX_AMOUNT, Amount, Domain, spell_number
from stores.quantities import (
    MAX_RATE_PER_SECOND,
    DurationUs,
    format_duration_us,
    format_rate,
    parse_duration_us,
    parse_rate_per_second,
)

Pins = Mapping[str, Any]
"""Request fields a fixed list sets, by ``Request`` field name."""
NO_PINS: Pins = MappingProxyType({})


class Arrivals(Model):
    """An arrival process; written as text, e.g. ``"poisson(500/s)"``, or as a
    fixed list (a table). The subclasses are the forms."""

    written_as_text: ClassVar[bool] = True

    def timer(self, replicas: int, replica: int, rng: random.Random) -> Timer:
        """Replica ``replica``'s arrival times, drawn from its ``rng``."""
        raise NotImplementedError

    def check_fits(self, replicas: int, until_us: int) -> None:
        """Raise ``ValueError`` if the process cannot run on this fleet for this long."""


class Poisson(Arrivals):
    """Poisson arrivals at a fleet-wide rate split evenly over the replicas,
    or at a rate each replica receives on its own."""

    rate_per_second: float = Field(gt=0, le=MAX_RATE_PER_SECOND, allow_inf_nan=False,
                                   description="Arrivals per second.")
    per_replica: bool = Field(
        False, description="Each replica gets the whole rate (else the fleet shares it)."
    )

    def replica_rate_per_us(self, replicas: int) -> float:
        if self.per_replica:
            return self.rate_per_second / 1e6
        return self.rate_per_second / replicas / 1e6

    def timer(self, replicas: int, replica: int, rng: random.Random) -> Timer:
        return PoissonTimer(self.replica_rate_per_us(replicas), rng)

    def _scope(self) -> str:
        return " per replica" if self.per_replica else ""

    def __str__(self) -> str:
        return f"poisson({self.rate_per_second:g}/s){self._scope()}"


class Bursts(Poisson):
    """Poisson arrivals during ``on`` windows, none during ``off`` windows; the
    on/off cycle starts at virtual time 0 on every replica, so they burst together."""

    on_us: int = Field(gt=0, description="Length of each window with arrivals.")
    off_us: int = Field(ge=0, description="Length of each quiet window after it.")

    def timer(self, replicas: int, replica: int, rng: random.Random) -> Timer:
        return PoissonTimer(self.replica_rate_per_us(replicas), rng, self.on_us, self.off_us)

    def __str__(self) -> str:
        on, off = format_duration_us(self.on_us), format_duration_us(self.off_us)
        return f"bursts({self.rate_per_second:g}/s, on={on}, off={off}){self._scope()}"


# Fixed-list columns that pin a request field, and the field each one sets.
PINNED_FIELDS = {
    "namespace": "namespace",
    "subject": "subject",
    "estimate": "estimate_microdollars",
    "actual": "actual_microdollars",
    "duration_us": "duration_us",
}


class FixedArrivals(Arrivals):
    """A fixed list of arrivals, for exact scenarios: parallel lists, one entry
    per arrival. Unpinned request fields are drawn as usual."""

    at_us: tuple[DurationUs, ...] = Field(
        alias="at", min_length=1, description="When each request arrives, in time order."
    )
    replica: tuple[ReplicaIndex, ...] | None = Field(
        None, description="Where each arrives; default round-robin (i mod replicas)."
    )
    namespace: tuple[str, ...] | None = Field(
        None, description="Each one's namespace; default drawn (or its subject's)."
    )
    subject: tuple[str, ...] | None = Field(None, description="Each one's subject; default drawn.")
    estimate: tuple[Amount, ...] | None = Field(
        None, description="Each one's estimate in micro-dollars; default drawn."
    )
    actual: tuple[Amount, ...] | None = Field(
        None, description="Each one's actual spend in micro-dollars; default drawn."
    )
    duration_us: tuple[DurationUs, ...] | None = Field(
        None, alias="duration", description="Each one's duration; default drawn."
    )

    @model_validator(mode="after")
    def _parallel_and_in_order(self) -> FixedArrivals:
        count = len(self.at_us)
        for name, field in type(self).model_fields.items():
            column = getattr(self, name)
            if column is not None and len(column) != count:
                raise ValueError(
                    f"{field.alias or name} has {len(column)} entries but at has {count}; "
                    "expected one entry per arrival"
                )
        for index in range(1, count):
            if self.at_us[index] < self.at_us[index - 1]:
                raise ValueError(
                    f"expected at in time order, got at[{index}] = "
                    f"{format_duration_us(self.at_us[index])} after at[{index - 1}] = "
                    f"{format_duration_us(self.at_us[index - 1])}"
                )
        return self

    def owners(self, replicas: int) -> tuple[int, ...]:
        """The replica each arrival goes to (round-robin unless listed)."""
        return self.replica or tuple(index % replicas for index in range(len(self.at_us)))

    def pins(self, index: int) -> Pins:
        return {
            request_field: column[index]
            for name, request_field in PINNED_FIELDS.items()
            if (column := getattr(self, name)) is not None
        }

    def timer(self, replicas: int, replica: int, rng: random.Random) -> Timer:
        mine = [(at_us, self.pins(index)) for index, (at_us, owner)
                in enumerate(zip(self.at_us, self.owners(replicas), strict=True))
                if owner == replica]
        return ListTimer(mine)

    def check_fits(self, replicas: int, until_us: int) -> None:
        for index, owner in enumerate(self.owners(replicas)):
            if owner >= replicas:
                raise ValueError(
                    f"workload.arrivals: expected replica numbers 0 to {replicas - 1} "
                    f"(the fleet has {replicas}), got replica[{index}] = {owner}"
                )
        if self.at_us[-1] >= until_us:
            raise ValueError(
                f"workload.arrivals: expected every arrival before the scenario's duration "
                f"{format_duration_us(until_us)}, got at[{len(self.at_us) - 1}] = "
                f"{format_duration_us(self.at_us[-1])} (it would never arrive)"
            )

    def __str__(self) -> str:
        first, last = (format_duration_us(self.at_us[i]) for i in (0, -1))
        return f"a fixed list of {len(self.at_us)} arrivals from {first} to {last}"


_PROCESS = re.compile(
    r"^\s*(?P<family>poisson|bursts)\((?P<args>[^)]*)\)\s*(?P<per_replica>per\s+replica)?\s*$"
)
ARRIVALS_DOMAIN = Domain(
    f"an arrival process, its rate more than 0/s and at most {format_rate(MAX_RATE_PER_SECOND)}"
    ", its on window longer than 0; or a fixed list, its times in order and before the "
    f"scenario's duration, its replicas within the fleet, its amounts from 0 to "
    f"{spell_number(MAX_AMOUNT)}")
"""What ``workload.arrivals`` may be, for the fields reference."""
ARRIVALS_HINT = (
    "'poisson(RATE)' or 'bursts(RATE, on=DURATION, off=DURATION)', either optionally "
    "followed by 'per replica', or a fixed list {at = [...]}"
)


def parse_arrivals(value: Any) -> Arrivals:
    """An arrival process from its text, or a fixed list from its table."""
    if isinstance(value, Arrivals):
        return value
    if isinstance(value, Mapping):
        return _validated(FixedArrivals, value)
    match = _PROCESS.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected {ARRIVALS_HINT}, got {value!r}")
    rate, *options = (part.strip() for part in match["args"].split(","))
    fields: dict[str, Any] = {
        "rate_per_second": _positive_rate(rate, value),
        "per_replica": bool(match["per_replica"]),
    }
    if match["family"] == "poisson":
        if options:
            raise ValueError(f"poisson takes one rate, e.g. 'poisson(500/s)', got {value!r}")
        return _validated(Poisson, fields)
    return _validated(Bursts, fields | _windows(options, value))


def _positive_rate(text: str, whole: str) -> float:
    rate = parse_rate_per_second(text)
    if not rate > 0 or math.isinf(rate):
        raise ValueError(f"expected a positive, finite rate, got {text!r} in {whole!r}")
    return rate


def _windows(options: list[str], whole: str) -> dict[str, int]:
    given = {name.strip(): text.strip()
             for name, _, text in (option.partition("=") for option in options)}
    if sorted(given) != ["off", "on"] or len(options) != 2 or not all(given.values()):
        raise ValueError(
            f"bursts takes (RATE, on=DURATION, off=DURATION), e.g. "
            f"'bursts(2000/s, on=2s, off=8s)', got {whole!r}"
        )
    windows = {f"{name}_us": parse_duration_us(text) for name, text in given.items()}
    if windows["on_us"] <= 0:
        raise ValueError(f"expected an on window longer than zero, got {whole!r}")
    return windows


def _validated(model: type[Arrivals], data: Mapping[str, Any]) -> Any:
    """``model`` validated from ``data``, its problems folded into one ValueError
    (the scenario loader then prefixes the field path, ``workload.arrivals``)."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ValueError("; ".join(_describe(problem, model) for problem in error.errors())) \
            from None


def _describe(problem: Any, model: type[Arrivals]) -> str:
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{field_path([part])}"
                    for part in problem["loc"]).lstrip(".")
    message = problem["msg"].removeprefix("Value error, ")
    if problem["type"] == "extra_forbidden":
        known = ", ".join(field.alias or name for name, field in model.model_fields.items())
        message = f"unknown field; a fixed list takes {known}"
    elif problem["type"] == "missing":
        message = "required field is missing"
    elif "got" not in message:
        message = f"{message}, got {problem.get('input')!r}"
    return f"{where}: {message}" if where else message


def arrivals_as_written(arrivals: Arrivals) -> Any:
    if isinstance(arrivals, FixedArrivals):
        return arrivals.model_dump(by_alias=True, exclude_none=True)
    return str(arrivals)


# ------------------------------------------------------------------ timers


class Timer:
    """One replica's arrival times."""

    def next(self, now_us: int) -> tuple[int, Pins] | None:
        """The next arrival (never before ``now_us``) and what it pins, or None
        when no more will come."""
        raise NotImplementedError


class PoissonTimer(Timer):
    """Poisson arrivals, optionally only during the on windows of an on/off
    cycle starting at time 0 (windows are ``[k * cycle, k * cycle + on)``).

    It keeps time in on-time: virtual time with the off windows cut out. A
    Poisson process restricted to the on windows is a Poisson process in
    on-time, so gaps are drawn there and mapped back to virtual time. With no
    off window, on-time is virtual time.
    """

    def __init__(self, rate_per_us: float, rng: random.Random, on_us: int = 0,
                 off_us: int = 0) -> None:
        self.rate_per_us = rate_per_us
        self.rng = rng
        self.on_us = on_us
        self.off_us = off_us
        self._on_clock = 0

    def next(self, now_us: int) -> tuple[int, Pins]:
        gap_us = max(1, round(self.rng.expovariate(self.rate_per_us)))
        # Memoryless: a replica that was booting owes no arrivals it missed.
        self._on_clock = max(self._on_clock, self._on_time(now_us)) + gap_us
        return self._virtual_time(self._on_clock), NO_PINS

    def _on_time(self, virtual_us: int) -> int:
        if not self.off_us:
            return virtual_us
        cycles, into = divmod(virtual_us, self.on_us + self.off_us)
        return cycles * self.on_us + min(into, self.on_us)

    def _virtual_time(self, on_us: int) -> int:
        if not self.off_us:
            return on_us
        cycles, into = divmod(on_us, self.on_us)
        return cycles * (self.on_us + self.off_us) + into


class ListTimer(Timer):
    """A fixed list of arrivals, in time order."""

    def __init__(self, arrivals: list[tuple[int, Pins]]) -> None:
        self._arrivals: Iterator[tuple[int, Pins]] = iter(arrivals)

    def next(self, now_us: int) -> tuple[int, Pins] | None:
        arrival = next(self._arrivals, None)
        if arrival is None:
            return None
        at_us, pins = arrival
        # Listed before the replica finished booting: it waits for the replica.
        return max(at_us, now_us), pins
