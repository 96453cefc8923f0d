"""A run's timeline as a zoomable plotly figure, for the HTML report.

The same picture as ``simulator.present.timeline``'s PNG, drawn from the same values
(``simulator.present.marks.Timeline``): the faults lane and one lane per
involved replica (at most ``MAX_LANES``, "+N more" named beneath), the
store's record against the truth, and the gap between them on its own axis;
a red dashed line where the store's own damage began, when the oracle says.
Panels share the time axis, so zooming one zooms all; hovering a bar, a lost
call or a fault says what it is. SVG traces only (no WebGL), so it renders
in any browser, headless ones included.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from simulator.present.marks import Timeline, time_scale

SERVED, REFUSED, FAULT, BEGAN = "#2ca02c", "#b0b0b0", "#800080", "#d62728"
LOSS_STYLE = {"reply_lost": ("circle", "red"), "request_lost": ("x", "red"),
              "call_timed_out": ("line-ns-open", "black"),
              "call_retried": ("triangle-up", "orange")}


def timeline_figure(timeline: Timeline) -> go.Figure:
    """The figure; the caller turns it into HTML (``Figure.to_html``)."""
    divisor, unit = time_scale(timeline.end_us)
    lanes = len(timeline.shown) + 1 + bool(timeline.hidden)
    figure = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                           row_heights=[max(2, lanes) / (max(2, lanes) + 4.6), 3 / (
                               max(2, lanes) + 4.6), 1.6 / (max(2, lanes) + 4.6)],
                           subplot_titles=(timeline.title, timeline.record.title
                                           if timeline.record else "no per-key samples",
                                           "the gap: record minus truth"))
    _lanes(figure, timeline, divisor)
    if timeline.record is not None:
        _record(figure, timeline, divisor)
    for mark in timeline.faults:
        start, end = mark.time_us / divisor, mark.end_us / divisor
        if end > start:
            figure.add_vrect(x0=start, x1=end, fillcolor=FAULT, opacity=0.08, line_width=0,
                             row="all", col=1)
        figure.add_vline(x=start, line_dash="dot", line_color=FAULT, opacity=0.5,
                         row="all", col=1)
    anchor = timeline.focus.anchor
    if anchor is not None and anchor.store_damage_us is not None:
        began = anchor.store_damage_us / divisor
        figure.add_vline(x=began, line_dash="dash", line_color=BEGAN, line_width=2,
                         row="all", col=1)
        figure.add_annotation(x=began, y=1, yref="paper", showarrow=False,
                              text="the store's damage began", font={"color": BEGAN},
                              xanchor="left", yanchor="bottom")
    figure.update_xaxes(title_text=f"virtual time ({unit})", row=3, col=1)
    figure.update_layout(height=260 + 32 * lanes + 330, margin={"l": 140, "r": 30, "t": 50,
                                                                 "b": 50},
                         hovermode="closest", legend={"orientation": "h", "y": -0.08},
                         template="plotly_white")
    return figure


def _lanes(figure: go.Figure, timeline: Timeline, divisor: float) -> None:
    top = len(timeline.shown)
    row = {replica: top - 1 - index for index, replica in enumerate(timeline.shown)}
    # Many bars, one trace each kind: segments joined by gaps (None) draw fast.
    segments: dict[bool, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for bar in timeline.bars:
        lane = segments[bar.refused]
        text = (f"replica {bar.replica} request {bar.request}: "
                f"{bar.start_us / 1e6:.6f}s to {bar.end_us / 1e6:.6f}s"
                f"{' (denied)' if bar.refused else ''}")
        lane["x"] += [bar.start_us / divisor, timeline.drawn_end_us(bar) / divisor, None]
        lane["y"] += [row[bar.replica]] * 2 + [None]
        lane["text"] += [text, text, None]
    for refused, lane in sorted(segments.items()):
        figure.add_trace(go.Scatter(
            x=lane["x"], y=lane["y"], hovertext=lane["text"], hoverinfo="text", mode="lines",
            line={"color": REFUSED if refused else SERVED, "width": 9},
            name="denied" if refused else timeline.served_label), row=1, col=1)
    for outage in timeline.outages:
        figure.add_shape(type="rect", x0=outage.start_us / divisor, x1=outage.end_us / divisor,
                         y0=row[outage.replica] - 0.45, y1=row[outage.replica] + 0.45,
                         fillcolor=FAULT, opacity=0.15, line_width=0, row=1, col=1)
    by_kind: dict[str, list[Any]] = defaultdict(list)
    for lost in timeline.lost_calls:
        by_kind[lost.kind].append(lost)
    for kind, calls in by_kind.items():
        symbol, color = LOSS_STYLE[kind]
        figure.add_trace(go.Scatter(
            x=[call.time_us / divisor for call in calls],
            y=[row[call.replica] + 0.3 for call in calls], mode="markers",
            marker={"symbol": symbol, "color": color, "size": 9},
            hovertext=[f"replica {call.replica} request {call.request}: {call.words} "
                       f"({call.detail}) at {call.time_us / 1e6:.6f}s" for call in calls],
            hoverinfo="text", name=calls[0].words), row=1, col=1)
    if timeline.faults:
        figure.add_trace(go.Scatter(
            x=[mark.time_us / divisor for mark in timeline.faults], y=[top] * len(timeline.faults),
            mode="markers+text", text=[mark.label for mark in timeline.faults],
            textposition="top right", textfont={"color": FAULT, "size": 11},
            marker={"symbol": "triangle-down", "color": FAULT, "size": 11},
            hovertext=[f"{mark.label} at {mark.time_us / 1e6:.6f}s" for mark in timeline.faults],
            hoverinfo="text", name="faults"), row=1, col=1)
    ticks = [top, *(row[replica] for replica in timeline.shown)]
    names = ["faults", *(f"replica {replica}" for replica in timeline.shown)]
    if timeline.hidden:
        ticks.append(-1)
        names.append(timeline.more)
    figure.update_yaxes(tickvals=ticks, ticktext=names, range=[
        -1.7 if timeline.hidden else -0.7, top + 0.9], showgrid=False, zeroline=False,
        fixedrange=True, row=1, col=1)


def _record(figure: go.Figure, timeline: Timeline, divisor: float) -> None:
    series = timeline.record
    assert series is not None
    times = [time / divisor for time in series.times_us]
    shape = "hv" if series.step else "linear"
    for row, lines in ((2, series.lines), (3, series.gaps)):
        for drawn in lines:
            figure.add_trace(go.Scatter(
                x=times, y=list(drawn.values), mode="lines", name=drawn.label,
                line={"color": drawn.color, "dash": "dot" if drawn.dotted else "solid",
                      "shape": shape}), row=row, col=1)
    if timeline.cap is not None:
        figure.add_hline(y=timeline.cap, line_color="black", line_width=1, row=2, col=1,
                         annotation_text=series.cap_label, annotation_position="top left")
    figure.add_hline(y=0, line_color="grey", line_width=1, row=3, col=1)
    figure.update_yaxes(title_text=series.unit, row=2, col=1)
    figure.update_yaxes(title_text=f"gap ({series.unit})", row=3, col=1)
