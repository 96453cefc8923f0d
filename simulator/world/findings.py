"""A store call that raised: a finding about the store, not the end of the run.

The kernel tells the world of every process that failed with nobody to hear
it (``Kernel.failures``). A process of a replica's (a request being served, a
store's own background task) that raised is the store raising outside its
contract: the world records it in the trace (``store_raised``), keeps the
first one with where it was raised and its traceback, and the run goes on,
its verdict INCONCLUSIVE (``simulator.run.exercise``), ``hunt`` counting the
schedule as breaking. A process of the lab's own that fails still stops the
run: that is the lab's bug.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from simulator import LAB_ROOT
from simulator.engine.kernel import Process, describe_time

LAB_PACKAGE = LAB_ROOT / "simulator"
"""Frames under here are the lab's; the innermost other one is where the store raised."""


@dataclass(frozen=True, slots=True)
class StoreRaised:
    """The first store call that raised in a run."""

    line: str
    """``KeyError: 3 in Holder.retire (stores/x/holder.py:212), request 17 on
    replica 4 at t=12.345678s``."""
    traceback: str
    """The whole traceback, for ``--verbose`` (never in the trace or summary)."""


def store_raised(process: Process, error: BaseException, replica: int, now_us: int) -> StoreRaised:
    """What to say of ``error``, raised in ``process`` of ``replica`` at ``now_us``."""
    what = f"{type(error).__name__}: {error}"
    request = f"request {process.tag}" if process.tag >= 0 else process.name
    line = (f"{what}{_where(error)}, {request} on replica {replica} at "
            f"{describe_time(now_us)}")
    return StoreRaised(line, "".join(traceback.format_exception(error)))


def _where(error: BaseException) -> str:
    """`` in Class.method (path:line)``: the innermost frame outside the lab's own code."""
    found = ""
    for frame, line in traceback.walk_tb(error.__traceback__):
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(LAB_PACKAGE):
            continue
        shown = path.relative_to(LAB_ROOT) if path.is_relative_to(LAB_ROOT) else path.name
        found = f" in {frame.f_code.co_qualname} ({shown}:{line})"
    return found
