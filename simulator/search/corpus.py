"""A hunt that goes where no schedule has been: a corpus of the schedules
that reached new store lines, and draws derived from them beside fresh ones.

Coverage-guided fuzzers (AFL's corpus of inputs that reached new edges,
HypoFuzz on Hypothesis, Antithesis branching from runs that found new
behaviour) spend their draws near what was new. Here a schedule whose run
reached a store line no run of the hunt had reached before (the fault-free
one included) joins the corpus; half the draws then take a corpus schedule
and change one fault of it: one added, one dropped, one moved to another
replica, or one retimed (``guided``). Shrinking prefers fresh draws (the
coin shrinks to "fresh"), then the plainer change.

**Deterministic with any number of workers.** The schedule numbered ``i``
may only derive from corpus schedules numbered below ``i - LAG``: before
drawing it, the search waits until those are judged and told
(``Corpus.visible``), however many workers run ahead. So the corpus a draw
sees, and the schedule drawn, depend only on the seed and the runs' reach;
and the shrinking, which draws the search's schedules again from the start,
sees at each the corpus the search saw (``calls`` counts the draws judged).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from simulator.reach.lines import Reach
from stores.quantities import parse_duration_us

Schedule = list[dict[str, Any]]

LAG = 8
"""How far behind the draws the corpus they see may be: the schedules in
flight with two workers (``batches.BATCHES_PER_WORKER`` x
``SCHEDULES_PER_BATCH`` each), so that two workers seldom wait for it."""
CHANGES = ("retime", "move", "drop", "add")
PICK = 1 << 16
"""The range a corpus schedule and a fault of it are picked from (modulo
their counts): the draws' shape must not depend on the corpus."""
"""How a corpus schedule is changed, plainest first (what shrinking prefers)."""


class Corpus:
    """The schedules of a hunt that reached new store lines, by number."""

    def __init__(self, reached: Reach | None) -> None:
        self.entries: list[tuple[int, Schedule]] = []
        self.seen = reached
        """Every line the hunt's runs reached so far (the fault-free run's first)."""
        self.calls = 0
        """Schedules handed to the search's condition so far: the number the
        next schedule drawn will have."""
        self.wait: Callable[[int], None] | None = None
        """Set by the search: returns once every schedule numbered below its
        argument is judged and told (or the search is over)."""

    def learn(self, number: int, schedule: Schedule, reach: str | None) -> None:
        """Schedule ``number`` was judged: keep it if it reached new lines."""
        if reach is None:
            return
        run = Reach.decode(reach)
        seen = self.seen
        if seen is None or any(lines - seen.reached.get(unit, frozenset())
                               for unit, lines in run.reached.items()):
            self.entries.append((number, copy.deepcopy(schedule)))
        self.seen = run if seen is None else seen.union(run)

    def visible(self) -> list[Schedule]:
        """The corpus the schedule about to be drawn may derive from."""
        horizon = self.calls - LAG
        if horizon <= 0:
            return []
        if self.wait is not None:
            self.wait(horizon)
        return [schedule for number, schedule in self.entries if number < horizon]


def guided(fresh: st.SearchStrategy[Schedule], corpus: Corpus,
           one_fault: st.SearchStrategy[dict[str, Any]], replicas: int, until_us: int,
           max_faults: int) -> st.SearchStrategy[Schedule]:
    """Draws of ``fresh``, and, once the corpus has schedules, as many changes
    of one of them (see the module)."""
    until_ms = max(1, until_us // 1_000)

    @st.composite
    def draw(data: st.DrawFn) -> Schedule:
        # Every choice is drawn every time, whatever the corpus holds:
        # Hypothesis requires the same choices after the same prefix.
        derived = data(st.booleans())
        drawn = data(fresh)
        which = data(st.integers(0, PICK - 1))
        change = data(st.sampled_from(CHANGES))
        where = data(st.integers(0, PICK - 1))
        added = data(one_fault)
        replica = data(st.integers(0, replicas - 1))
        at_ms = data(st.integers(0, until_ms - 1))
        entries = corpus.visible()
        if not derived or not entries:
            return drawn
        schedule = [dict(fault) for fault in entries[which % len(entries)]]
        fault = schedule[where % len(schedule)]
        if change == "add" and len(schedule) < max_faults:
            schedule.append(added)
        elif change == "drop" and len(schedule) > 1:
            schedule.remove(fault)
        elif change == "move" and "replica" in fault:
            fault["replica"] = replica
        else:
            fault["at"] = f"{at_ms}ms"
        return sorted(schedule, key=lambda item: parse_duration_us(item["at"]))

    return draw()
