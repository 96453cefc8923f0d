"""The timeline of a run, drawn so a reviewer can see the race.

Top: one swimlane per involved replica. Each request is a bar from its
arrival to its settlement (green), or to its denial (grey); the calls it lost
are marked (a red dot for a lost reply, a red cross for a lost request, a
black bar for a timeout), and every injected fault is a labelled vertical
line. Bottom: for the keys involved, the spend the store recorded against the
spend that truly happened, and the cap. By default only the replicas the
fault schedule hit (or, failing that, those with lost calls) and the keys
their requests touched are drawn.

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

from simulator.trace import SCHEMA  # noqa: E402

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


def _drifting_keys(samples: list[dict[str, Any]], limit: int = 3) -> list[tuple[str, str]]:
    """The keys whose record strays furthest from the truth at the last sample:
    what to show when no fault names a replica (a broken migration, say)."""
    last: dict[tuple[str, str], int] = {}
    for row in samples:
        if row.get("scope", "subject") == "subject" and row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            last[key] = row["recorded_spend_microdollars"] - row["true_spend_microdollars"]
    return sorted(last, key=lambda key: (-abs(last[key]), key))[:limit]


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
                  cap: int | None = None, title: str = "") -> Path:
    """Draw ``result``'s timeline to ``path`` (PNG) and return it."""
    rows = _rows(result.trace)
    samples = result.sampler.rows if result.sampler else []
    replicas = (involved_replicas(rows, list(schedule))
                or _replicas_of(rows, _drifting_keys(samples)))
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
    figure, (swimlanes, spend) = plt.subplots(
        2, 1, figsize=(12, 3 + 0.5 * max(1, len(replicas))), sharex=True,
        gridspec_kw={"height_ratios": [max(1, len(replicas)), 3]})
    _draw_requests(swimlanes, requests, lane)
    _draw_losses(swimlanes, rows, lane)
    _draw_faults((swimlanes, spend), rows, lane)
    swimlanes.set_yticks(range(len(replicas)), [f"replica {r}" for r in replicas])
    swimlanes.set_ylim(-0.7, max(0.7, len(replicas) - 0.3))
    swimlanes.set_title(title or "timeline", loc="left")
    swimlanes.legend(loc="upper right", fontsize=7, ncols=3)
    _draw_spend(spend, samples, keys or set(_drifting_keys(samples)), cap)
    spend.set_xlabel("virtual time (s)")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _draw_requests(axes: Any, requests: dict[int, dict[str, Any]], lane: dict[int, int]) -> None:
    labelled: set[str] = set()
    for request in requests.values():
        end = request.get("request_settled") or request.get("request_denied")
        if end is None:
            continue
        denied = "request_denied" in request
        label = "denied" if denied else "served (reserve to settle)"
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


def _draw_spend(axes: Any, samples: list[dict[str, Any]], keys: set[tuple[str, str]],
                cap: int | None) -> None:
    """The store's record (settled spend, and that plus live holds) against the
    true spend, summed over the involved keys, from the per-key samples."""
    series: dict[int, list[int]] = {}
    for row in samples:
        if row.get("scope", "subject") != "subject":
            continue
        if (row["namespace"], row["subject"]) in keys:
            point = series.setdefault(row["time_us"], [0, 0, 0])
            point[0] += row["true_spend_microdollars"]
            point[1] += row["recorded_spend_microdollars"]
            point[2] += row["recorded_spend_microdollars"] + row["holds_live_microdollars"]
    times = sorted(series)
    seconds = [time / 1e6 for time in times]
    axes.plot(seconds, [series[t][0] for t in times], color="tab:red", label="true spend")
    axes.plot(seconds, [series[t][1] for t in times], color="tab:blue",
              label="recorded spend (store)")
    axes.plot(seconds, [series[t][2] for t in times], color="tab:blue", linestyle=":",
              label="recorded + live holds (what the store counts)")
    if cap is not None and len(keys) == 1:
        axes.axhline(cap, color="black", linewidth=1, label="cap")
    shown = ", ".join(f"{ns}/{subject}" for ns, subject in sorted(keys)[:3])
    more = f" (+{len(keys) - 3} more)" if len(keys) > 3 else ""
    axes.set_ylabel("micro-dollars")
    axes.set_title(f"the keys involved: {shown}{more}", loc="left", fontsize=9)
    axes.legend(loc="upper left", fontsize=7)
