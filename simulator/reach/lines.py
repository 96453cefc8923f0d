"""A run's reach, as figures and words: per unit of the store's code (a Lua
script, a Python class), the lines that can run and those that ran.

A reach travels in a run's summary as one JSON text (``encode``), so a hunt,
a sweep or a campaign can add up its runs' (``union``) wherever they ran,
with nothing but the summaries.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

REACH = "store_reach"
"""The summary's field holding the run's reach (``Reach.encode``)."""
REACHED, TOTAL = "store_lines_reached", "store_lines_total"
"""The summary's two figures: lines of the store that ran, of those that can."""
REPLAY_DIVERGED = "store_reach_replay_diverged"
"""The summary's count of calls whose replay for the reach
(``simulator.reach.replay``) answered otherwise than the run's server: 0
when the reach is the run's."""
STATE = "store_state_digest"
"""The summary's digest of what the run's server answered and held at the
end (``simulator.reach.replay.Replayed.state``)."""
SHOWN_GAPS = 12
"""How many stretches of lines never reached a one-line account names."""


@dataclass(frozen=True)
class Reach:
    """Per unit (``stores/x/acquire.lua``, ``stores/x/limiter.py: Limiter``),
    the lines that can run and the lines that ran (a subset)."""

    runnable: dict[str, frozenset[int]] = field(default_factory=dict)
    reached: dict[str, frozenset[int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(len(lines) for lines in self.runnable.values())

    @property
    def count(self) -> int:
        return sum(len(lines) for lines in self.reached.values())

    def missed(self, unit: str) -> list[int]:
        return sorted(self.runnable[unit] - self.reached.get(unit, frozenset()))

    def union(self, other: Reach) -> Reach:
        runnable = dict(self.runnable)
        for unit, lines in other.runnable.items():
            runnable[unit] = runnable.get(unit, frozenset()) | lines
        reached = {unit: self.reached.get(unit, frozenset()) | other.reached.get(unit, frozenset())
                   for unit in runnable}
        return Reach(runnable, reached)

    def figures(self) -> dict[str, object]:
        """What a summary carries: the two counts and the whole reach."""
        return {REACHED: self.count, TOTAL: self.total, REACH: self.encode()}

    def encode(self) -> str:
        return json.dumps({unit: [spans(self.runnable[unit]),
                                  spans(self.reached.get(unit, frozenset()))]
                           for unit in sorted(self.runnable)}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Reach:
        units = json.loads(text)
        return cls({unit: lines_of(pair[0]) for unit, pair in units.items()},
                   {unit: lines_of(pair[1]) for unit, pair in units.items()})

    def headline(self) -> str:
        """``store lines reached R of T (P%)``."""
        share = f" ({self.count / self.total:.0%})" if self.total else ""
        return f"store lines reached {self.count} of {self.total}{share}"

    def gaps(self) -> list[str]:
        """Per unit with lines never reached, ``unit: lines a-b, c``."""
        return [f"{unit}: {spans(missed).replace(',', ', ')}"
                for unit in sorted(self.runnable) if (missed := self.missed(unit))]

    def account(self) -> str:
        """The headline and where the lines never reached are (the first
        ``SHOWN_GAPS`` units, then how many more)."""
        gaps = self.gaps()
        if not gaps:
            return self.headline() + ("; every one" if self.total else "")
        shown = gaps[:SHOWN_GAPS]
        hidden = len(gaps) - SHOWN_GAPS
        more = f"\n  ... and {hidden} unit(s) more" if hidden > 0 else ""
        return (self.headline() + "; never reached:\n  " + "\n  ".join(shown) + more)


def reach_account(summary: dict) -> str:
    """What a summary says of the run's reach, in words (``Reach.account``)."""
    if REACH not in summary:
        return "store lines reached: not recorded (the run was not asked for its reach)"
    text = Reach.decode(summary[REACH]).account()
    diverged = summary.get(REPLAY_DIVERGED)
    if diverged:
        text += (f"\n  (the replay that counts the Lua lines answered {diverged} call(s) "
                 "otherwise than the run's server: those lines are approximate)")
    return text


def union_of(reaches: Iterable[Reach]) -> Reach:
    total = Reach()
    for reach in reaches:
        total = total.union(reach)
    return total


def spans(lines: Iterable[int]) -> str:
    """``1-3,5``: sorted lines as runs of consecutive numbers."""
    ordered = sorted(lines)
    parts: list[str] = []
    start = previous = None
    for line in ordered:
        if previous is not None and line == previous + 1:
            previous = line
            continue
        if start is not None:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
        start = previous = line
    if start is not None:
        parts.append(f"{start}" if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def lines_of(text: str) -> frozenset[int]:
    """The lines ``spans`` wrote."""
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return frozenset(found)
