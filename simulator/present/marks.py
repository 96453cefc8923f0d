"""What a run's timeline shows, as values: lanes, request bars, lost calls,
faults and the record against the truth.

Two renderers draw it — ``simulator.present.timeline`` (a PNG, with matplotlib) and
``simulator.present.html_report`` (a zoomable page, with plotly) — so both show the
same replicas, the same bars and the same faults; neither decides what to
show. Who is involved and which keys come from ``simulator.search.story``; what the
record means from the family (``TimelineLanes.series``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from simulator.plugin.record_series import RecordSeries
from simulator.scenario.faults import FAULT_KINDS
from simulator.search.story import FAULT_PREFIXES, Focus, focus

MAX_LANES = 8
"""Replica lanes drawn; the others are named in a "+N more" line."""

LOSS_WORDS = {"reply_lost": "reply lost", "request_lost": "request lost",
              "call_timed_out": "timed out", "call_retried": "retried"}
"""The lost-call events a lane marks, in words."""


@dataclass(frozen=True)
class Bar:
    """One request on its replica's lane, from arrival to its end."""

    replica: int
    request: int
    start_us: int
    end_us: int
    refused: bool


@dataclass(frozen=True)
class LostCall:
    replica: int
    request: int
    time_us: int
    kind: str
    detail: str

    @property
    def words(self) -> str:
        return LOSS_WORDS[self.kind]


@dataclass(frozen=True)
class FaultMark:
    """Faults of one kind injected at one instant (over several replicas, or
    on the server when ``replicas`` is empty), lasting until ``end_us``."""

    time_us: int
    end_us: int
    kind: str
    replicas: tuple[int, ...]
    details: tuple[str, ...]
    count: int = 1
    """Trace events grouped here (one per replica, and per call aimed at)."""
    armed_us: int | None = None
    """For a fault armed on a replica's next matching call (a lost reply, a
    connection fault): when it was armed; ``time_us`` is when it first hit."""

    @property
    def label(self) -> str:
        """``lose_reply x20 (HDEL, settle_v1)``, ``pause 1s on replica 1``."""
        times = f" x{self.count}" if self.count > 1 else ""
        calls = f" ({', '.join(self.details)})" if self.details else ""
        span = self.end_us - self.time_us
        lasting = f" {span / 1e6:g}s" if span else ""
        where = (f" on replica {self.replicas[0]}" if len(self.replicas) == 1
                 else "" if self.replicas else " on the server")
        armed = (f", armed at {self.armed_us / 1e6:g}s"
                 if self.armed_us is not None and self.armed_us != self.time_us else "")
        return f"{self.kind}{lasting}{times}{calls}{where}{armed}"


@dataclass(frozen=True)
class Outage:
    """A stretch a replica's lane is out: paused, partitioned, or crashed until restarted."""

    replica: int
    start_us: int
    end_us: int
    kind: str


@dataclass(frozen=True)
class Timeline:
    title: str
    shown: tuple[int, ...]
    """The replica lanes drawn, ascending."""
    hidden: tuple[int, ...]
    """Involved replicas left out of the lanes ("+N more")."""
    served_label: str
    bars: tuple[Bar, ...]
    lost_calls: tuple[LostCall, ...]
    faults: tuple[FaultMark, ...]
    outages: tuple[Outage, ...]
    record: RecordSeries | None
    cap: int | None
    """The family's cap line, when the record is one key's."""
    end_us: int
    focus: Focus

    def drawn_end_us(self, bar: Bar) -> int:
        """Where ``bar`` ends as drawn: at least ``MIN_BAR_SHARE`` of the run
        long, so a request served the instant it arrived (a spend funded by a
        lease already held) is a visible tick, not a bar of no width."""
        return max(bar.end_us, bar.start_us + max(1, round(MIN_BAR_SHARE * self.end_us)))

    @property
    def more(self) -> str:
        """``+2 more: 8, 9`` (the first few hidden replicas named), or ""."""
        if not self.hidden:
            return ""
        named = ", ".join(str(replica) for replica in self.hidden[:6])
        return f"+{len(self.hidden)} more: {named}{', ...' if len(self.hidden) > 6 else ''}"


MIN_BAR_SHARE = 0.002
"""The shortest a request's bar is drawn, as a share of the run (a pixel or
two of a timeline's width)."""


def time_scale(end_us: int) -> tuple[float, str]:
    """The divisor from µs and the axis unit: hours for runs of hours (a
    session's day), else seconds."""
    return (3.6e9, "h") if end_us > 2 * 3_600_000_000 else (1e6, "s")


def timeline_of(result: Any, schedule: list[dict[str, Any]] = (), settings: Any = None,
                title: str = "", max_lanes: int = MAX_LANES) -> Timeline:
    """What to draw of ``result`` (a ``RunResult``) run under ``schedule``;
    ``settings``, the store's, give the cap line when its family has one."""
    found = focus(result, schedule)
    lanes = found.lanes
    shown = found.replicas[:max_lanes]
    on_lane = set(shown)
    requests: dict[int, dict[str, Any]] = defaultdict(dict)
    lost: list[LostCall] = []
    for row in found.rows:
        if row["replica"] not in on_lane:
            continue
        if row["request"] >= 0:
            request = requests[row["request"]]
            request.setdefault("replica", row["replica"])
            request.setdefault("start", row["time_us"])
            request[row["kind"]] = row["time_us"]
        if row["kind"] in LOSS_WORDS:
            lost.append(LostCall(row["replica"], row["request"], row["time_us"], row["kind"],
                                 row["detail"]))
    bars = []
    for number, request in requests.items():
        end = request.get(lanes.served) or request.get(lanes.refused)
        if end is not None:
            bars.append(Bar(request["replica"], number, request["start"], end,
                            refused=lanes.refused in request))
    record = None
    if lanes.series is not None and found.samples and found.keys:
        record = lanes.series(found.samples, set(found.keys))
    end_us = max([found.rows[-1]["time_us"] if found.rows else 0,
                  *(row["time_us"] for row in found.samples[-1:])])
    return Timeline(
        title=title or "timeline", shown=shown, hidden=found.replicas[max_lanes:],
        served_label=lanes.served_label, bars=tuple(bars), lost_calls=tuple(lost),
        faults=fault_marks(found.rows, set(found.replicas)),
        outages=outages(found.rows, on_lane, end_us), record=record,
        # A cap bounds one key: against a sum of several it would mislead.
        cap=lanes.cap(settings) if settings is not None and len(found.keys) == 1 else None,
        end_us=end_us, focus=found)


def fault_marks(rows: list[dict[str, Any]], replicas: set[int]) -> tuple[FaultMark, ...]:
    """The faults on the server, or on an involved replica, grouped by instant and kind."""
    groups: dict[tuple[int, str, int], dict[str, Any]] = {}
    for row in rows:
        if row["kind"].startswith(FAULT_PREFIXES) and (
                row["replica"] < 0 or row["replica"] in replicas):
            kind = row["kind"].removeprefix("fault_")
            group = groups.setdefault((row["time_us"], kind, row["amount"]),
                                      {"replicas": [], "details": [], "count": 0})
            group["count"] += 1
            if row["replica"] >= 0 and row["replica"] not in group["replicas"]:
                group["replicas"].append(row["replica"])
            if row["detail"] and row["detail"] not in group["details"]:
                group["details"].append(row["detail"])
    # A fault's amount is its duration (a pause, a partition, a server down);
    # a migration's is a command count, not time. An armed fault is drawn
    # where it first hit a call, not where it was armed.
    marks = []
    for (time, kind, amount), group in groups.items():
        hit = _first_hit(rows, time, kind, group["replicas"], group["details"])
        shown = time if hit is None else hit
        marks.append(FaultMark(shown, shown + (amount if not kind.startswith("migration") else 0),
                               kind, tuple(group["replicas"]), tuple(group["details"]),
                               group["count"], None if hit is None else time))
    return tuple(sorted(marks, key=lambda mark: mark.time_us))


ARMED_HITS = {"request": ("request_lost", "scheduled"), "reply": ("reply_lost", "scheduled"),
              "stall": ("connection_stalled", None), "reset": ("connection_reset", None),
              "slow": ("slow_reply", None), "drop_waiter": ("waiter_dropped", None)}
"""What the trace says when a fault armed on a replica's next call hits it:
the event kind, and its outcome when that tells an armed loss from a drawn one."""


def _first_hit(rows: list[dict[str, Any]], armed_us: int, kind: str, replicas: list[int],
               calls: list[str]) -> int | None:
    """When a fault armed at ``armed_us`` on ``replicas`` first hit one of
    their calls (one of ``calls``, if it names some); None for a fault that
    is not armed, or that never hit."""
    fault = FAULT_KINDS.get(kind)
    if fault is None or fault.armed is None:
        return None
    event, outcome = ARMED_HITS[fault.armed]
    return next((row["time_us"] for row in rows
                 if row["time_us"] >= armed_us and row["kind"] == event
                 and row["replica"] in replicas and (outcome is None or row["outcome"] == outcome)
                 and (not calls or row["detail"] in calls)), None)


def outages(rows: list[dict[str, Any]], lanes: set[int], end_us: int) -> tuple[Outage, ...]:
    """Pauses and partitions of the lanes' replicas, and each crash until its restart."""
    found = []
    crashed: dict[int, int] = {}
    for row in rows:
        replica = row["replica"]
        if replica not in lanes:
            continue
        if row["kind"] in ("fault_pause", "fault_partition") and row["amount"] > 0:
            found.append(Outage(replica, row["time_us"], row["time_us"] + row["amount"],
                                row["kind"].removeprefix("fault_")))
        elif row["kind"] == "fault_crash":
            crashed.setdefault(replica, row["time_us"])
        elif row["kind"] == "replica_restarted" and replica in crashed:
            found.append(Outage(replica, crashed.pop(replica), row["time_us"], "crash"))
    found += [Outage(replica, start, end_us, "crash") for replica, start in crashed.items()]
    return tuple(found)
