"""Leaked holds as intervals of time, and what they add up to.

A hold leaks from the moment its request is over (crashed, denied after its
reserve ran, settlement lost) until the store stops counting it: when it is
removed, or when its deadline passes, whichever comes first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Leak:
    key: tuple[str, str]
    start_us: int
    end_us: int
    amount: int
    cause: str
    """Why the hold outlived its request (``causes.LEAK_CAUSES``)."""
    exposure: str = ""
    """For a ``store_logic`` leak, what exposed it (``replica_crash``,
    ``reply_lost on reserve_v1``); empty otherwise."""

    @property
    def microdollar_seconds(self) -> float:
        return self.amount * (self.end_us - self.start_us) / 1e6


def peak_concurrent(leaks: list[Leak]) -> int:
    """The largest amount leaked at one instant, over ``leaks`` of one key."""
    changes = sorted([(leak.start_us, leak.amount) for leak in leaks]
                     + [(leak.end_us, -leak.amount) for leak in leaks],
                     key=lambda change: (change[0], change[1]))
    level = peak = 0
    for _, delta in changes:
        level += delta
        peak = max(peak, level)
    return peak
