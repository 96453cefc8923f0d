"""How much work one run may do, checked before it starts and while it runs.

A scenario's ``[limits]`` table (``max_events``, ``max_memory``,
``max_keys``), or the same as flags (``run --max-events N --max-memory
16GiB --max-keys N``, also on ``check``, ``sweep`` and ``hunt``), bounds a
run two ways:

* **Before it starts**, against the work estimated from the scenario's
  parameters (``simulator.run.estimate``): a run that would pass a limit is
  refused, one line naming the field that drives the work, the estimate and
  the limit, and how to raise it. Nothing is built first: a rate or a key
  count that would take years or the machine's memory is refused in
  milliseconds.
* **While it runs**, by a guard the kernel calls every ``CHECK_EVERY``
  events (``Kernel.set_guard``): it counts the events run and reads the
  process's resident memory, and stops the run past either limit with a
  message that says where (virtual time, seed) and against what estimate,
  rather than let it swap or be killed. That covers what the estimate cannot
  see, such as work a store starts by itself from its settings.

Both raise ``WorkLimitExceeded``, a ``ValueError``: the command line reports
it as an input error (exit 2). The defaults are ``DEFAULT_MAX_EVENTS``
kernel events (hours of wall time), ``DEFAULT_MAX_KEYS`` keys,
and 8 GiB of memory or half of the machine's (its cgroup's, in a container;
the process's address space, under ``ulimit -v``), whichever is smaller,
judged on the machine that runs the run.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.engine.kernel import Kernel, describe_time
from simulator.scenario.limits import (  # noqa: F401  (re-exported: the run's limits in one place)
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_KEYS,
    DEFAULT_MAX_MEMORY,
    GiB,
    Limits,
    count,
    format_bytes,
    parse_memory_bytes,
)

if TYPE_CHECKING:
    from simulator.run.estimate import WorkEstimate

CHECK_EVERY = 100_000
"""Events between two looks at the run's event count and memory: about a
tenth of a second of a run, and reading the memory costs a few µs."""


class WorkLimitExceeded(ValueError):
    """A run that would pass, or passed, one of its limits; the message names
    the limit, the figure and how to raise it."""


@dataclass(frozen=True, slots=True)
class RunLimits:
    """A scenario's limits, with the machine's default memory filled in."""

    max_events: int
    max_memory: int
    max_keys: int
    memory_is_default: bool


def run_limits(limits: Limits) -> RunLimits:
    if limits.max_memory is not None:
        return RunLimits(limits.max_events, limits.max_memory, limits.max_keys, False)
    return RunLimits(limits.max_events, default_max_memory(), limits.max_keys, True)


def default_max_memory() -> int:
    """8 GiB, or half of what this machine (or its container) has, if less."""
    machine = machine_memory()
    return DEFAULT_MAX_MEMORY if machine is None else min(DEFAULT_MAX_MEMORY, machine // 2)


def machine_memory() -> int | None:
    """The memory this process may have: the machine's, its cgroup's limit, or
    its address space (``ulimit -v``), whichever is least."""
    sizes = []
    address_space, _ = resource.getrlimit(resource.RLIMIT_AS)
    if address_space != resource.RLIM_INFINITY:
        # Past it an allocation fails (a MemoryError) before the guard could
        # stop the run with a message; half of it, by default, leaves room.
        sizes.append(address_space)
    try:
        sizes.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) means no limit
            sizes.append(int(text))
    sizes = [size for size in sizes if size > 0]
    return min(sizes) if sizes else None


def resident_memory() -> int:
    """The process's resident memory now, in bytes (its peak where the system
    does not tell the current figure)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB here


def peak_resident_memory() -> int:
    """The process's peak resident memory since it last started a program, in bytes.

    Linux's ``ru_maxrss`` survives ``exec``: a run started by ``subprocess`` from
    a large process (a test session, a notebook kernel) would report its
    parent's size at the fork. ``VmHWM`` belongs to the program's own memory.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB here


# ----------------------------------------------------------------- messages

RAISE_EVENTS = "raise it with --max-events N or [limits] max_events"
RAISE_MEMORY = "raise it with --max-memory SIZE (e.g. 16GiB) or [limits] max_memory"


def memory_limit_words(limits: RunLimits) -> str:
    default = ", the default here" if limits.memory_is_default else ""
    return f"{format_bytes(limits.max_memory)}{default}"


@dataclass(frozen=True, slots=True)
class _Passed:
    """One limit an estimated run passes, in words."""

    figure: str
    limit: str
    field: str
    flag: str


def refusals(estimate: WorkEstimate, limits: RunLimits) -> list[str]:
    """One line naming every limit the estimated run would pass, and the
    field that drives the work; empty when it fits."""
    passed = []
    if estimate.kernel_events > limits.max_events:
        passed.append(_Passed(f"about {count(estimate.kernel_events)} kernel events",
                              f"{count(limits.max_events)} events", "max_events",
                              "--max-events N"))
    if estimate.memory_bytes > limits.max_memory:
        passed.append(_Passed(f"about {format_bytes(estimate.memory_bytes)} of memory",
                              memory_limit_words(limits), "max_memory", "--max-memory SIZE"))
    if estimate.keys > limits.max_keys:
        passed.append(_Passed(f"{count(estimate.keys)} keys", f"{limits.max_keys:,} keys",
                              "max_keys", "--max-keys N"))
    if not passed:
        return []
    first = passed[0].field
    driver, detail = (
        (estimate.events_driver, f" ({estimate.events_detail})") if first == "max_events" else
        (estimate.memory_driver, f" ({estimate.memory_detail})") if first == "max_memory" else
        (estimate.keys_driver, ""))
    limit = "limits" if len(passed) > 1 else "limit"
    return [f"{driver}: the run would take {' and '.join(item.figure for item in passed)}"
            f"{detail}, past its {limit} of {' and '.join(item.limit for item in passed)} "
            f"({', '.join(f'limits.{item.field}' for item in passed)}); make the scenario "
            f"smaller, or raise the {limit} with {' and '.join(item.flag for item in passed)} "
            "or in the scenario's [limits] table"]


def refuse_beyond(estimate: WorkEstimate, limits: RunLimits) -> None:
    """Raise ``WorkLimitExceeded`` when the estimated run passes a limit."""
    found = refusals(estimate, limits)
    if found:
        raise WorkLimitExceeded("\n".join(found))


def refuse_workers_beyond(workers: int, run_bytes: float, limits: RunLimits) -> None:
    """Raise ``WorkLimitExceeded`` when ``workers`` local processes, each
    running one simulation of about ``run_bytes`` at a time, would together
    pass the memory limit a single run is held to (``--workers 500`` on a
    small machine is refused, not a swap storm)."""
    need = workers * run_bytes
    if workers > 1 and need > limits.max_memory:
        fits = max(1, int(limits.max_memory // run_bytes))
        raise WorkLimitExceeded(
            f"--workers {workers}: {workers} local processes, each running a simulation "
            f"of about {format_bytes(run_bytes)}, would need about {format_bytes(need)}, "
            f"past the memory limit of {format_bytes(limits.max_memory)}; use --workers "
            f"{fits} or fewer, or {RAISE_MEMORY}")


# -------------------------------------------------------------------- guard


class RunGuard:
    """Stops a run past its event or memory limit, as the kernel runs it."""

    def __init__(self, kernel: Kernel, limits: RunLimits, estimate: WorkEstimate,
                 end_us: int, memory: Callable[[], int] | None = None,
                 every: int | None = None) -> None:
        self.kernel = kernel
        self.limits = limits
        self.estimate = estimate
        self.end_us = end_us
        self.memory = memory or resident_memory
        self.every = every or CHECK_EVERY

    def install(self) -> None:
        self.kernel.set_guard(self, self._until_next())

    def __call__(self) -> int:
        """Called just before an event runs: stop the run, or say when to look again."""
        kernel = self.kernel
        if kernel.events_run >= self.limits.max_events:
            raise WorkLimitExceeded(
                f"run stopped at {self._where()}: it reached its limit of "
                f"{count(self.limits.max_events)} kernel events (limits.max_events), where "
                f"about {count(self.estimate.kernel_events)} were estimated: some of its "
                f"work is not in the estimate (a boot or retry loop, a store's own "
                f"periodic work); {RAISE_EVENTS}")
        used = self.memory()
        if used > self.limits.max_memory:
            raise WorkLimitExceeded(
                f"run stopped at {self._where()}: its memory reached {format_bytes(used)}, "
                f"past its limit of {memory_limit_words(self.limits)} (limits.max_memory), "
                f"where about {format_bytes(self.estimate.memory_bytes)} was estimated; "
                f"{RAISE_MEMORY}")
        return self._until_next()

    def _until_next(self) -> int:
        # Exactly at the event limit, and at least every ``every`` events.
        return max(1, min(self.every, self.limits.max_events - self.kernel.events_run))

    def _where(self) -> str:
        kernel = self.kernel
        return (f"{describe_time(kernel.now)} of {self.end_us / 1e6:g}s (seed {kernel.seed}), "
                f"after {kernel.events_run:,} events")
