"""The timeline of a run, drawn so a reviewer can see the race.

Top: one swimlane per involved replica. Each request is a bar from its
arrival to the end of its service (green), or to its refusal (grey); the
calls it lost are marked (a red dot for a lost reply, a red cross for a lost
request, a black bar for a timeout), and every injected fault is a labelled
vertical line. Bottom: for the keys involved, the store's record against the
truth, as the store's family draws it (``TimelineLanes``: for a budget, the
recorded spend against the true spend and the cap). By default only the
replicas the fault schedule hit (or, failing that, those with lost calls) and
the keys their requests touched are drawn.

``draw_timeline`` is the one function the CLI (``replay --plot``) and the
notebooks call.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no screen is assumed anywhere the lab runs

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from simulator.families import TimelineLanes, family_of  # noqa: E402
from simulator.trace import SCHEMA  # noqa: E402
from stores import registry  # noqa: E402

LOSSES = {"reply_lost": ("o", "red", "reply lost"), "request_lost": ("x", "red", "request lost"),
          "call_timed_out": ("|", "black", "timed out"), "call_retried": ("^", "orange", "retried")}


def _rows(trace: Any) -> list[dict[str, Any]]:
    names = [field.name for field in SCHEMA]
    return [dict(zip(names, row, strict=True))
            for row in zip(*(trace.columns[name] for name in names), strict=True)]


def involved_replicas(rows: list[dict[str, Any]], schedule: list[dict[str, Any]],
                      limit: int = 8) -> list[int]:
    """The replicas a schedule hit; else those that lost calls; at most ``limit``."""
    chosen: list[int] = []
    for fault in schedule:
        for replica in [fault.get("replica"), *fault.get("replicas", [])]:
            if replica is not None and replica not in chosen:
                chosen.append(replica)
    if not chosen:
        for row in rows:
            if row["kind"] in LOSSES and row["replica"] >= 0 and row["replica"] not in chosen:
                chosen.append(row["replica"])
    return sorted(chosen[:limit])


def _replicas_of(rows: list[dict[str, Any]], keys: list[tuple[str, str]],
                 limit: int = 8) -> list[int]:
    chosen: list[int] = []
    for row in rows:
        if (row["namespace"], row["subject"]) in keys and row["replica"] not in chosen:
            chosen.append(row["replica"])
            if len(chosen) == limit:
                break
    return sorted(chosen)


def draw_timeline(result: Any, path: Path, schedule: list[dict[str, Any]] = (),
                  settings: Any = None, title: str = "") -> Path:
    """Draw ``result``'s timeline to ``path`` (PNG) and return it; ``settings``,
    the store's, give the cap line when its family draws one."""
    lanes = family_of(registry.get(result.summary["store"])).timeline
    rows = _rows(result.trace)
    samples = result.sampler.rows if result.sampler else []
    replicas = (involved_replicas(rows, list(schedule))
                or _replicas_of(rows, lanes.strayed_keys(samples)))
    lane = {replica: index for index, replica in enumerate(replicas)}
    requests: dict[int, dict[str, Any]] = defaultdict(dict)
    keys: set[tuple[str, str]] = set()
    for row in rows:
        if row["replica"] in lane and row["request"] >= 0:
            request = requests[row["request"]]
            request.setdefault("replica", row["replica"])
            request.setdefault("start", row["time_us"])
            request[row["kind"]] = row["time_us"]
            if row["namespace"]:
                keys.add((row["namespace"], row["subject"]))
    figure, (swimlanes, record) = plt.subplots(
        2, 1, figsize=(12, 3 + 0.5 * max(1, len(replicas))), sharex=True,
        gridspec_kw={"height_ratios": [max(1, len(replicas)), 3]})
    _draw_requests(swimlanes, requests, lane, lanes)
    _draw_losses(swimlanes, rows, lane)
    _draw_faults((swimlanes, record), rows, lane)
    swimlanes.set_yticks(range(len(replicas)), [f"replica {r}" for r in replicas])
    swimlanes.set_ylim(-0.7, max(0.7, len(replicas) - 0.3))
    swimlanes.set_title(title or "timeline", loc="left")
    swimlanes.legend(loc="upper right", fontsize=7, ncols=3)
    lanes.draw_record(record, samples, keys or set(lanes.strayed_keys(samples)),
                      None if settings is None else lanes.cap(settings))
    record.set_xlabel("virtual time (s)")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _draw_requests(axes: Any, requests: dict[int, dict[str, Any]], lane: dict[int, int],
                   lanes: TimelineLanes) -> None:
    labelled: set[str] = set()
    for request in requests.values():
        end = request.get(lanes.served) or request.get(lanes.refused)
        if end is None:
            continue
        denied = lanes.refused in request
        label = "denied" if denied else lanes.served_label
        axes.barh(lane[request["replica"]], (end - request["start"]) / 1e6,
                  left=request["start"] / 1e6, height=0.35,
                  color="lightgrey" if denied else "tab:green", alpha=0.8,
                  label=None if label in labelled else label)
        labelled.add(label)


def _draw_losses(axes: Any, rows: list[dict[str, Any]], lane: dict[int, int]) -> None:
    labelled: set[str] = set()
    for row in rows:
        if row["kind"] in LOSSES and row["replica"] in lane:
            marker, color, label = LOSSES[row["kind"]]
            axes.scatter(row["time_us"] / 1e6, lane[row["replica"]] + 0.3, marker=marker,
                         color=color, s=30, zorder=3,
                         label=None if label in labelled else f"{label} ({row['detail']})")
            labelled.add(label)


def _draw_faults(panels: tuple[Any, Any], rows: list[dict[str, Any]],
                 lane: dict[int, int]) -> None:
    for row in rows:
        if row["kind"].startswith(("fault_", "migration_")) and (
                row["replica"] < 0 or row["replica"] in lane):
            for axes in panels:
                axes.axvline(row["time_us"] / 1e6, color="purple", linestyle=":", alpha=0.6)
            panels[0].annotate(row["kind"].removeprefix("fault_"), (row["time_us"] / 1e6, 0),
                               xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                               color="purple", va="bottom")
