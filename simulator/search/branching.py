"""Which snapshot ladder a hunt's run branches from, in this process.

A hunt asks for thousands of runs of one scenario that differ only in their
fault schedules: each is branched from a ladder of snapshots of the
scenario's fault-free run (``simulator.run.snapshots``) when its backend
can be forked, so only what follows its first fault is simulated. The
ladders a process made are kept, the least recently used closed first: a
hunt needs one (two with a reference store), a ``mutate`` campaign one per
mutant, in turn. ``close_ladders`` ends them all; so does the process's end.
"""

from __future__ import annotations

import atexit
import json
from collections import OrderedDict
from multiprocessing.util import Finalize
from typing import Any

from simulator.run.snapshots import SnapshotLadder, forkable
from simulator.scenario.model import Scenario, parse_scenario

LADDERS: OrderedDict[str, SnapshotLadder] = OrderedDict()
"""This process's open ladders, by trunk scenario and seed."""
LADDERS_KEPT = 2
"""Open at once: the candidate's and the reference's (each a trunk and its keepers)."""


def branched_summary(data: dict[str, Any], scenario: Scenario, seed: int
                     ) -> dict[str, Any] | None:
    """The summary of ``scenario``'s run with ``seed``, branched from a
    snapshot of the fault-free run of ``data`` (the same scenario before
    its schedule); None when it cannot branch (``forkable``, or no snapshot
    comes before its first fault), and the caller runs it from t = 0."""
    if forkable(scenario) is not None:
        return None
    trunk = dict(data, faults={**data.get("faults", {}), "schedule": []})
    key = json.dumps([trunk, seed], sort_keys=True, default=str)
    ladder = LADDERS.get(key)
    if ladder is None:
        ladder = SnapshotLadder.evenly(parse_scenario(trunk), seed)
    LADDERS[key] = ladder
    LADDERS.move_to_end(key)
    while len(LADDERS) > LADDERS_KEPT:
        LADDERS.popitem(last=False)[1].close()
    return ladder.summary_of(scenario)


def close_ladders() -> None:
    """End every ladder this process opened (their processes exit)."""
    while LADDERS:
        LADDERS.popitem()[1].close()


atexit.register(close_ladders)
# A pool's worker process ends through multiprocessing, which runs its
# finalizers, not atexit's.
Finalize(None, close_ladders, exitpriority=0)
