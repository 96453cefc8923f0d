"""The timeline of a run, drawn as a PNG so a reviewer can see the race.

Top: a lane for the faults, then one swimlane per involved replica (at most
``MAX_LANES``; the others are named "+N more"). Each request is a bar from
its arrival to the end of its service (green), or to its refusal (grey); a
paused, partitioned or crashed replica's lane is shaded for as long as it
lasts; the calls it lost are marked (a red dot for a lost reply, a red cross
for a lost request, a black bar for a timeout). Every fault is drawn in the
faults lane — a span for as long as it lasts — with its label there, clear
of the replicas, and a dotted line down the panels below. Then the store's
record against the truth for the involved keys, and the gap between them
(record minus truth) on a scale of its own, so a drift of thousands shows on
a total of hundreds of thousands. What is drawn comes from
``simulator.present.marks``, which the HTML report draws too.

``draw_timeline`` is the one function the CLI (``replay --plot``) and the
notebooks call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no screen is assumed anywhere the lab runs

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from simulator.plugin.record_series import RecordSeries  # noqa: E402
from simulator.present.marks import MAX_LANES, Timeline, time_scale, timeline_of  # noqa: E402

LOSS_STYLE = {"reply_lost": ("o", "red"), "request_lost": ("x", "red"),
              "call_timed_out": ("|", "black"), "call_retried": ("^", "orange")}
FAULT_COLOR = "purple"


def draw_timeline(result: Any, path: Path, schedule: list[dict[str, Any]] = (),
                  settings: Any = None, title: str = "", max_lanes: int = MAX_LANES) -> Path:
    """Draw ``result``'s timeline to ``path`` (PNG) and return it; ``settings``,
    the store's, give the cap line when its family draws one."""
    timeline = timeline_of(result, schedule, settings=settings, title=title,
                           max_lanes=max_lanes)
    divisor, unit = time_scale(timeline.end_us)
    lanes = len(timeline.shown) + 1 + bool(timeline.hidden)  # + faults, + "+N more"
    figure, (swimlanes, record, gap) = plt.subplots(
        3, 1, figsize=(12, 4.5 + 0.45 * lanes), sharex=True,
        gridspec_kw={"height_ratios": [max(2, lanes), 3, 1.6]})
    _draw_lanes(swimlanes, timeline, divisor)
    swimlanes.set_title(timeline.title, loc="left")
    lanes, found = timeline.focus.lanes, timeline.focus
    if timeline.record is not None:
        _draw_record(record, gap, timeline.record, timeline.cap, divisor)
    elif lanes.draw_record is not None:  # a plugin family drawing its record itself
        lanes.draw_record(record, found.samples, set(found.keys), timeline.cap)
    else:
        record.text(0.5, 0.5, "no per-key samples of the involved keys", ha="center",
                    transform=record.transAxes)
    for mark in timeline.faults:
        for axes in (record, gap):
            axes.axvline(mark.time_us / divisor, color=FAULT_COLOR, linestyle=":", alpha=0.6)
    gap.set_xlabel(f"virtual time ({unit})")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _draw_lanes(axes: Any, timeline: Timeline, divisor: float) -> None:
    """Replica lanes from the top down, the faults lane above them, "+N more" below."""
    top = len(timeline.shown)
    row = {replica: top - 1 - index for index, replica in enumerate(timeline.shown)}
    labelled: set[str] = set()

    def once(label: str) -> str | None:
        first = label not in labelled
        labelled.add(label)
        return label if first else None

    for outage in timeline.outages:
        axes.barh(row[outage.replica], (outage.end_us - outage.start_us) / divisor,
                  left=outage.start_us / divisor, height=0.9, color=FAULT_COLOR, alpha=0.12,
                  label=once(f"replica {outage.kind}ed" if outage.kind != "pause"
                             else "replica paused"))
    for bar in timeline.bars:
        label = "denied" if bar.refused else timeline.served_label
        axes.barh(row[bar.replica], (timeline.drawn_end_us(bar) - bar.start_us) / divisor,
                  left=bar.start_us / divisor, height=0.35,
                  color="lightgrey" if bar.refused else "tab:green", alpha=0.8,
                  label=once(label))
    for lost in timeline.lost_calls:
        marker, color = LOSS_STYLE[lost.kind]
        axes.scatter(lost.time_us / divisor, row[lost.replica] + 0.3, marker=marker,
                     color=color, s=30, zorder=3, label=once(lost.words))
    for index, mark in enumerate(timeline.faults):
        start, end = mark.time_us / divisor, mark.end_us / divisor
        if end > start:
            axes.barh(top, end - start, left=start, height=0.5, color=FAULT_COLOR, alpha=0.35)
        axes.scatter(start, top, marker="v", color=FAULT_COLOR, s=40, zorder=3)
        # Labels alternate above and below the faults lane's middle, so two
        # faults close in time do not write over each other.
        axes.annotate(mark.label, (start, top + (0.28 if index % 2 == 0 else -0.42)),
                      fontsize=7, color=FAULT_COLOR, xytext=(4, 0),
                      textcoords="offset points")
        axes.axvline(start, color=FAULT_COLOR, linestyle=":", alpha=0.4)
    ticks = [top, *(row[replica] for replica in timeline.shown)]
    names = ["faults", *(f"replica {replica}" for replica in timeline.shown)]
    if timeline.hidden:
        ticks.append(-1)
        names.append(timeline.more)
    axes.set_yticks(ticks, names)
    axes.set_ylim(-1.7 if timeline.hidden else -0.7, top + 0.8)
    if labelled:
        # Beside the lanes, not on them: inside, it hid a lane's requests.
        _legend_beside(axes)


def _draw_record(record: Any, gap: Any, series: RecordSeries, cap: int | None,
                 divisor: float) -> None:
    times = [time / divisor for time in series.times_us]

    def line(axes: Any, values: Any, color: str, dotted: bool, label: str) -> None:
        style = ":" if dotted else "-"
        if series.step:
            axes.step(times, values, where="post", color=color, linestyle=style, label=label)
        else:
            axes.plot(times, values, color=color, linestyle=style, label=label)

    for drawn in series.lines:
        line(record, drawn.values, drawn.color, drawn.dotted, drawn.label)
    if cap is not None:
        record.axhline(cap, color="black", linewidth=1, label=series.cap_label)
    record.set_ylabel(series.unit)
    record.set_title(series.title, loc="left", fontsize=9)
    _legend_beside(record)
    # Under the series: a residual that stays at 0 is drawn, not hidden by the axis line.
    gap.axhline(0, color="grey", linewidth=0.8, zorder=0.5)
    for drawn in series.gaps:
        line(gap, drawn.values, drawn.color, drawn.dotted, drawn.label)
    gap.set_ylabel(f"gap ({series.unit})", fontsize=8)
    _legend_beside(gap)


def _legend_beside(axes: Any) -> None:
    """The panel's legend to its right, outside it: inside, it hid a lane's
    requests or the first second of the record."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, framealpha=0.9,
                borderaxespad=0.0)
