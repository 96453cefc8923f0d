"""Keeping Python's cyclic garbage collector to what a run creates.

A run allocates millions of short-lived objects (events, calls, trace rows),
so the collector runs often, and each of its full passes walks every object in
the process: the imported libraries (pandas, pyarrow, fakeredis...) and the
fleet built before the first event, none of which the run will free. That
walk cost about a fifth of a run's time. ``gc.freeze`` (CPython's own remedy
for long-lived objects) moves everything alive at the start of the run out of
the collector's sight; what the run itself creates is collected as usual, and
everything goes back under the collector when the run ends.

What was garbage at the start must be collected before the freeze, or it is
frozen with the rest: a cycle the last run left (its world, its kernel) is
out of the collector's sight during the next run, back in the oldest
generation after it, and frozen again at the next start, so a process running
run after run (a hunt, a mutation campaign) only ever grew (3.5 MiB a mutant,
1.4 GiB after 11 minutes of ``mutate``). A full collection before every
freeze would cost a quarter of a quick run's time (0.70x to 0.75x on two
families' plain hunts, measured turn about: docs/speed.md); so, as CPython's
own rule for its oldest generation, a run collects first only when the
process holds a quarter more memory blocks than right after the last such
collection: garbage never outgrows a quarter of what is alive, and a run
pays for the walk only when that much has piled up (``bench``'s "campaign memory" line watches it).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

GROWTH = 1.25
"""How much the process's allocated blocks may grow past their count after the
last full collection before a run's start collects again."""
_blocks_after_collection = [0]


@contextmanager
def long_lived_frozen() -> Iterator[None]:
    """Exclude every object alive now from garbage collection while the block
    runs. If something in the process froze objects already, its freeze is
    left alone: unfreezing would undo it."""
    if gc.get_freeze_count():
        yield
        return
    if sys.getallocatedblocks() > GROWTH * _blocks_after_collection[0]:
        gc.collect()
        _blocks_after_collection[0] = sys.getallocatedblocks()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
