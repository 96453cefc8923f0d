"""Where to look in a run: the replicas involved, the keys they touched, and
the moment the story starts (the first fault, lost call or damage).

A run of a few seconds has thousands of routine events; a reviewer needs the
few that tell the race. ``replay --trace``, ``replay --plot`` and the HTML
report all choose them here, so the story, the PNG and the page agree on who
is involved and where things start to go wrong:

* the involved replicas are those the fault schedule hit; failing that, those
  that lost calls; failing that, those that served the keys whose record
  strayed furthest from the truth (the family says which,
  ``TimelineLanes.strayed_keys``);
* the story starts where the store's own damage began, when the oracle says
  (``simulator.plugin.contracts.BEGAN_AT``: the first call after which the
  store's record and the truth parted; its replica is involved); otherwise
  at the earliest of the first injected fault (or operator migration), the
  first lost call of an involved replica, and the first sample showing damage
  (``TimelineLanes.violation_columns``); a few events earlier for context.

Nothing here runs anything or draws anything: it reads a trace and samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.engine.trace import COLUMNS
from simulator.families import family_of
from simulator.plugin.contracts import BEGAN, BEGAN_AT, BEGAN_REQUEST
from simulator.plugin.family import TimelineLanes
from stores import registry

Row = dict[str, Any]

ROUTINE = frozenset({"call_executed", "request_arrived", "replica_started",
                     "replica_restarted", "work_completed"})
"""Events too common to tell a story with."""

LOST_CALLS = ("reply_lost", "request_lost", "call_timed_out", "call_retried",
              "misaligned_reply", "waiter_dropped")
"""Events that say a call went astray: the first of them may start the story."""

FAULT_PREFIXES = ("fault_", "migration")
"""Events the lab injected (or an operator's migration did)."""


def trace_rows(trace: Any) -> list[Row]:
    """The trace's events as dicts, in order (``simulator.engine.trace.COLUMNS``)."""
    names = list(COLUMNS)
    return [dict(zip(names, row, strict=True))
            for row in zip(*(trace.columns[name] for name in names), strict=True)]


def describe_row(row: Row) -> str:
    """``t=1.012997s replica 3 request 3000000009: reply_lost HDEL -> scheduled``
    (a fault that lasts says for how long: ``fault_pause 1s``)."""
    replica = "server" if row["replica"] < 0 else f"replica {row['replica']}"
    request = f" request {row['request']}" if row["request"] >= 0 else ""
    detail = f" {row['detail']}" if row["detail"] else ""
    lasts = row["kind"].startswith("fault_") and "migration" not in row["kind"]
    if lasts and row["amount"] > 0:  # a killed migration's amount is a command count
        detail += f" {row['amount'] / 1e6:g}s"
    outcome = f" -> {row['outcome']}" if row["outcome"] else ""
    return (f"t={row['time_us'] / 1e6:.6f}s {replica}{request}: {row['kind']}{detail}"
            f"{outcome}")


def scheduled_replicas(schedule: list[dict[str, Any]]) -> list[int]:
    """The replicas a fault schedule names, in the order it names them."""
    chosen: list[int] = []
    for fault in schedule:
        for replica in [fault.get("replica"), *fault.get("replicas", [])]:
            if replica is not None and replica not in chosen:
                chosen.append(replica)
    return chosen


def involved_replicas(rows: list[Row], schedule: list[dict[str, Any]],
                      samples: list[Row], lanes: TimelineLanes) -> list[int]:
    """Every involved replica, ascending (see the module docstring for which)."""
    chosen = scheduled_replicas(schedule)
    if not chosen:
        chosen = list(dict.fromkeys(row["replica"] for row in rows
                                    if row["kind"] in LOST_CALLS and row["replica"] >= 0))
    if not chosen and samples:
        strayed = set(lanes.strayed_keys(samples))
        chosen = list(dict.fromkeys(row["replica"] for row in rows if row["replica"] >= 0
                                    and (row["namespace"], row["subject"]) in strayed))
    return sorted(chosen)


def involved_keys(rows: list[Row], replicas: list[int]) -> set[tuple[str, str]]:
    """The keys the involved replicas' requests touched."""
    chosen = set(replicas)
    return {(row["namespace"], row["subject"]) for row in rows
            if row["replica"] in chosen and row["request"] >= 0 and row["namespace"]}


@dataclass(frozen=True)
class Anchor:
    """Where the story starts, and why there."""

    time_us: int
    why: str
    store_damage_us: int | None = None
    """Where the store's own damage began (the oracle's ``BEGAN_AT``), when the
    story is that; it starts at the fault that exposed it, if that came first."""

    @property
    def store_damage(self) -> bool:
        return self.store_damage_us is not None


def first_damage(samples: list[Row], columns: tuple[str, ...]) -> Anchor | None:
    """The first aggregate sample where one of ``columns`` is not zero."""
    for row in samples:
        if row["namespace"] == "*":
            hit = next((name for name in columns if row.get(name)), None)
            if hit is not None:
                return Anchor(row["time_us"], f"the first damage sampled ({hit})")
    return None


def store_damage_began(summary: dict[str, Any], rows: list[Row]) -> Anchor | None:
    """Where the oracle says the store's own damage began, if it says: from the
    fault that exposed it when that came first (the first lost call of that
    call's request, and the fault injected on its replica before it), so the
    story shows both."""
    at_us = summary.get(BEGAN_AT)
    if at_us is None:
        return None
    request = summary.get(BEGAN_REQUEST)
    mine = [row for row in rows if row["request"] == request and row["time_us"] <= at_us]
    lost = next((row for row in mine if row["kind"] in LOST_CALLS), None)
    start = at_us
    if lost is not None:
        start = lost["time_us"]
        injected = [row["time_us"] for row in rows
                    if row["kind"].startswith(FAULT_PREFIXES) and row["replica"] == lost["replica"]
                    and row["time_us"] <= start]
        start = injected[-1] if injected else start
    return Anchor(start, f"where the store's own damage began ({summary.get(BEGAN, '')})",
                  store_damage_us=at_us)


def story_anchor(rows: list[Row], replicas: list[int], samples: list[Row],
                 lanes: TimelineLanes) -> Anchor | None:
    """The earliest of the first fault, the first lost call of an involved
    replica, and the first damage sampled; None when the run has none."""
    involved = set(replicas)
    found = []
    fault = next((row for row in rows if row["kind"].startswith(FAULT_PREFIXES)), None)
    if fault is not None:
        found.append(Anchor(fault["time_us"], f"the first fault ({fault['kind']})"))
    lost = next((row for row in rows
                 if row["kind"] in LOST_CALLS and row["replica"] in involved), None)
    if lost is not None:
        found.append(Anchor(lost["time_us"], f"the first lost call ({lost['kind']})"))
    damage = first_damage(samples, lanes.violation_columns)
    if damage is not None:
        found.append(damage)
    return min(found, key=lambda anchor: anchor.time_us, default=None)


def is_told(row: Row, replicas: set[int]) -> bool:
    """Whether an event belongs in the story: anything the lab injected, the
    server's doings, and the involved replicas' events that are not routine."""
    return (row["kind"].startswith((*FAULT_PREFIXES, "server_"))
            or (row["replica"] in replicas and row["kind"] not in ROUTINE))


@dataclass(frozen=True)
class Story:
    """A window of the story's events, and what it leaves out on either side."""

    events: tuple[Row, ...]
    earlier: int
    """Story events before the window."""
    later: int
    """Story events after the window."""
    anchor: Anchor | None

    def lines(self) -> list[str]:
        """The window in words, with ``... (N earlier)`` / ``... (N more)`` markers."""
        head = [f"... ({self.earlier} earlier)"] if self.earlier else []
        tail = [f"... ({self.later} more)"] if self.later else []
        return head + [describe_row(row) for row in self.events] + tail


def tell(rows: list[Row], replicas: list[int], anchor: Anchor | None, *,
         start_us: int | None = None, before: int = 5, limit: int = 60) -> Story:
    """The involved replicas' story from ``start_us`` (default: ``before``
    story events ahead of ``anchor``), at most ``limit`` events (0: all)."""
    told = [row for row in rows if is_told(row, set(replicas))]
    if start_us is not None:
        first = next((index for index, row in enumerate(told) if row["time_us"] >= start_us),
                     len(told))
    elif anchor is not None:
        at = next((index for index, row in enumerate(told) if row["time_us"] >= anchor.time_us),
                  len(told))
        first = max(0, at - before)
    else:
        first = 0
    last = len(told) if limit <= 0 else min(len(told), first + limit)
    return Story(tuple(told[first:last]), earlier=first, later=len(told) - last, anchor=anchor)


@dataclass(frozen=True)
class Focus:
    """A run's trace and samples, with who is involved and where the story starts."""

    rows: list[Row]
    samples: list[Row]
    lanes: TimelineLanes
    replicas: tuple[int, ...]
    keys: frozenset[tuple[str, str]]
    anchor: Anchor | None


def focus(result: Any, schedule: list[dict[str, Any]] = ()) -> Focus:
    """Where to look in ``result`` (a ``RunResult``) run under ``schedule``."""
    summary = result.summary
    lanes = family_of(registry.get(summary["store"])).timeline
    rows = trace_rows(result.trace)
    samples = result.sampler.rows if result.sampler else []
    replicas = involved_replicas(rows, list(schedule), samples, lanes)
    began = store_damage_began(summary, rows)
    if began is not None:
        # The replica that made the call where the damage began is involved.
        request = summary.get(BEGAN_REQUEST)
        replica = next((row["replica"] for row in rows
                        if row["request"] == request and row["replica"] >= 0), None)
        if replica is not None:
            replicas = sorted({*replicas, replica})
    keys = involved_keys(rows, replicas) or set(lanes.strayed_keys(samples))
    return Focus(rows, samples, lanes, tuple(replicas), frozenset(keys),
                 began or story_anchor(rows, replicas, samples, lanes))
