"""A command's processes, found through Linux's ``/proc``: the tests start a
command leading a session of its own and check that, however it ended,
nothing of it (workers, forkserver, resource tracker, a throwaway server)
is left running."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

GONE_WITHIN_S = 10.0
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cpu_s: float


def session_processes(session: int) -> dict[int, Proc]:
    """Every live process of a session (a zombie has exited: only its entry is left)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # After "pid (comm) ": state ppid pgrp session ... utime stime (fields 3-15).
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in "ZX" or int(fields[3]) != session:
            continue
        cpu_s = (int(fields[11]) + int(fields[12])) / TICKS_PER_S
        found[int(entry.name)] = Proc(int(entry.name), int(fields[1]), cpu_s)
    return found


def left_behind(session: int) -> dict[int, Proc]:
    """The session's processes still alive ``GONE_WITHIN_S`` from now, if any."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while (remaining := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return remaining
