"""Keeping Python's cyclic garbage collector to what a run creates.

A run allocates millions of short-lived objects (events, calls, trace rows),
so the collector runs often, and each of its full passes walks every object in
the process: the imported libraries (pandas, pyarrow, fakeredis...) and the
fleet built before the first event, none of which the run will free. That
walk cost about a fifth of a run's time. ``gc.freeze`` (CPython's own remedy
for long-lived objects) moves everything alive at the start of the run out of
the collector's sight; what the run itself creates is collected as usual, and
everything goes back under the collector when the run ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def long_lived_frozen() -> Iterator[None]:
    """Exclude every object alive now from garbage collection while the block
    runs. If something in the process froze objects already, its freeze is
    left alone: unfreezing would undo it."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
