"""One self-contained HTML page a reviewer opens: ``run --report`` and
``replay --report``.

The page holds, in order: the verdicts (``simulator.present.verdicts``: whether each
invariant held, and each ``[expect]`` entry), for a replay the fixed store's
beside the broken one's; then for each run the story of the involved
replicas around the first fault or damage (``simulator.search.story``) and a
zoomable timeline (``simulator.present.plotly_timeline``: the involved replicas, the
faults, the store's record against the truth and the gap on its own scale);
the fault schedule; the scenario as the lab read it; for a run asked for
its reach, each store script and class with its lines marked reached or
never reached (``simulator.present.reach_page``); every summary metric.
Everything it needs is inside the file — plotly's JavaScript included — so it
opens from disk, offline, and nothing in it loads from the network (a test
opens it in a headless browser).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from simulator.families import invariants_for
from simulator.present.marks import timeline_of
from simulator.present.plotly_timeline import timeline_figure
from simulator.present.reach_page import STYLE as REACH_STYLE
from simulator.present.reach_page import reach_section
from simulator.present.verdicts import expectation_line, inconclusive_line, invariant_verdicts
from simulator.run.compose import RunResult
from simulator.scenario.conditions import judge_expectations
from simulator.scenario.model import Scenario, parse_scenario
from simulator.search.race_report import RaceReport, toml_document
from simulator.search.races import Replay, replay
from simulator.search.story import tell
from stores import registry

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
.meta { color: #555; } pre { background: #f6f6f6; padding: .8em; overflow-x: auto; }
pre.story { max-height: 26em; overflow-y: auto; } h3 { font-size: 1em; }
.sides { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr));
         gap: 1em; }
ul.verdicts { list-style: none; padding: 0; font-family: ui-monospace, monospace; }
ul.verdicts li { padding: .15em .4em; } .broken { color: #a00; font-weight: 600; }
.held { color: #060; } .inconclusive { color: #a60; font-weight: 600; }
table { border-collapse: collapse; font-size: .9em; }
td, th { border: 1px solid #ddd; padding: .2em .6em; text-align: left; }
"""


def write_report(path: str | Path, result: RunResult, scenario: Scenario, *,
                 schedule: Sequence[Mapping[str, Any]] | None = None,
                 fixed: RunResult | None = None, title: str | None = None,
                 headline: Sequence[str] = (), fixed_headline: Sequence[str] = (),
                 settings: Any = None, story: str = "") -> Path:
    """Write the report of ``result`` (run from ``scenario``) to ``path`` and
    return it. ``schedule``: the fault schedule (default: the scenario's);
    ``fixed``: the fixed store's run of the same scenario, seed and schedule;
    ``headline`` / ``fixed_headline``: lines that lead each run's verdicts
    (a replay's REPRODUCED / HOLDS); ``settings``: the store's (default: the
    scenario's), for the cap line; ``story``: a race report's account of the
    race, shown under the title."""
    faults = [dict(fault) for fault in schedule] if schedule is not None else [
        fault.model_dump(exclude_defaults=True) for fault in scenario.faults.schedule]
    settings = scenario.settings if settings is None else settings
    title = title or scenario.description or scenario.name
    runs = [_Side("run", "the run", result, settings, title, tuple(headline), scenario.expect)]
    if fixed is not None:
        runs.append(_Side("fixed", "the fixed store (same scenario, seed and schedule)", fixed,
                          None, f"fixed store: {fixed.summary['store']}",
                          tuple(fixed_headline), scenario.expect))
    body = "\n".join([
        f"<h1>{_text(title)}</h1>",
        f"<p class='meta'>{_text(_meta(result.summary))}</p>",
        *(f"<p class='story'>{_text(paragraph)}</p>"
          for paragraph in story.strip().split("\n\n") if paragraph.strip()),
        "<section id='verdicts'><h2>Verdicts</h2><div class='sides'>",
        *(_verdicts(side) for side in runs),
        "</div></section>",
        *(_story_and_timeline(side, faults) for side in runs),
        "<section id='schedule'><h2>The fault schedule</h2>",
        _schedule_table(faults), _rates(scenario), "</section>",
        "<section id='scenario'><h2>The scenario, as the lab read it</h2>",
        "<p>Paste it into a <code>.toml</code> file to run it again.</p>",
        f"<pre>{_text(scenario_text(scenario))}</pre></section>",
        reach_section(result.summary),
        "<section id='summary'><h2>Every metric</h2><details><summary>summary.json of the run"
        "</summary>", _summary_table(result.summary), "</details></section>",
    ])
    page = (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_text(title)}</title><style>{STYLE}{REACH_STYLE}</style>"
            f"<script>{get_plotlyjs()}</script></head>\n<body>\n{body}\n</body></html>\n")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def write_replay_report(path: str | Path, report: RaceReport, found: Replay, *,
                        backend: str | None = None, sample_every: str | None = None) -> Path:
    """A replay's report: the variant's run and, when the race report names a
    fixed store, the fixed store's beside it. ``found`` is one of the two
    (either); the other is replayed here, sampled as ``sample_every``."""
    def side(against_fixed: bool) -> Replay:
        if found.against_fixed == against_fixed:
            return found
        return replay(report, against_fixed=against_fixed, backend=backend,
                      sample_every=sample_every)

    variant = side(False)
    fixed = side(True) if report.fixed else None
    return write_report(
        path, variant.result, parse_scenario(report.scenario_for(report.variant),
                                             source=str(report.path)),
        schedule=report.schedule, fixed=None if fixed is None else fixed.result,
        title=report.title, story=report.story, headline=[variant.headline],
        fixed_headline=[] if fixed is None else [fixed.headline])


@dataclass(frozen=True)
class _Side:
    """One run on the page: the run itself, or the fixed store's beside it."""

    name: str
    """Its element ids' suffix: ``verdicts-run``, ``timeline-fixed``..."""
    heading: str
    result: RunResult
    settings: Any
    title: str
    headline: tuple[str, ...]
    expect: Mapping[str, str]


def _verdicts(side: _Side) -> str:
    lines = [*side.headline, *verdict_lines(side.result.summary, side.expect)]
    items = "".join(_verdict_item(line) for line in lines)
    return (f"<div><h3>{_text(side.heading)}</h3>"
            f"<ul class='verdicts' id='verdicts-{side.name}'>{items}</ul></div>")


def _story_and_timeline(side: _Side, faults: list[dict[str, Any]]) -> str:
    """One run's story around its first fault or damage, and its timeline."""
    name, heading = side.name, side.heading
    timeline = timeline_of(side.result, faults, settings=side.settings, title=side.title)
    found = timeline.focus
    story = tell(found.rows, list(found.replicas), found.anchor)
    why = (f"From a few events before {found.anchor.why} at "
           f"t={found.anchor.time_us / 1e6:.6f}s." if found.anchor is not None
           else "No fault, lost call or damage: from the start.")
    figure = timeline_figure(timeline).to_html(
        full_html=False, include_plotlyjs=False, div_id=f"timeline-{name}",
        config={"displaylogo": False, "responsive": True})
    return "\n".join([
        f"<section id='{name}'><h2>{_text(heading.capitalize())}: the story of the "
        f"{len(found.replicas)} involved replica(s)</h2>",
        f"<p>{_text(why)}</p><pre class='story'>{_text(chr(10).join(story.lines()))}</pre>",
        "<h3>Timeline</h3><p class='meta'>Drag to zoom, double-click to zoom out; hover for "
        "details.</p>", figure, "</section>"])


def verdict_lines(summary: Mapping[str, Any], expect: Mapping[str, str] = ()) -> list[str]:
    """What ``run`` prints first: whether each invariant of the run's family
    held (``simulator.present.verdicts``), then each ``[expect]`` entry with its
    measured value."""
    invariants = invariants_for(registry.get(summary["store"]))
    inconclusive = inconclusive_line(summary)
    return ([inconclusive] * (inconclusive is not None)
            + [str(verdict) for verdict in invariant_verdicts(summary, invariants)]
            + [expectation_line(outcome)
               for outcome in judge_expectations(dict(expect), summary)])


def _verdict_item(line: str) -> str:
    # Red for what broke: a reproduced race, a broken invariant, a failed expectation.
    broken = line.startswith(("BROKEN", "REPRODUCED")) or line.endswith("FAILED")
    kind = ("broken" if broken else "inconclusive" if line.startswith("INCONCLUSIVE")
            else "held")
    return f"<li class='{kind}'>{_text(line)}</li>"


def _meta(summary: Mapping[str, Any]) -> str:
    return " · ".join(f"{name} {summary[name]}" for name in
                      ("store", "seed", "backend", "trace_fingerprint") if name in summary)


def _schedule_table(faults: list[dict[str, Any]]) -> str:
    if not faults:
        return "<p>No fault at an exact time.</p>"
    columns = list(dict.fromkeys(name for fault in faults for name in fault))
    head = "".join(f"<th>{_text(name)}</th>" for name in columns)
    rows = "".join("<tr>" + "".join(f"<td>{_text(_value(fault.get(name, '')))}</td>"
                                    for name in columns) + "</tr>" for fault in faults)
    return f"<table><tr>{head}</tr>{rows}</table>"


def _rates(scenario: Scenario) -> str:
    rates = scenario.faults.model_dump(exclude_defaults=True, exclude={"schedule"})
    rates.update({f"network.{name}": value for name, value in scenario.network.model_dump(
        exclude_defaults=True).items() if "loss" in name})
    if not rates:
        return "<p>No fault drawn from rates.</p>"
    return ("<p>Drawn from rates:</p><pre>"
            + _text("\n".join(f"{name} = {_value(value)}" for name, value in rates.items()))
            + "</pre>")


def scenario_text(scenario: Scenario) -> str:
    """The fields the scenario set, as a scenario file writes them (``duration
    = "6s"``, its fault schedule included): TOML that reads back as the same
    scenario."""
    return toml_document(scenario.model_dump(by_alias=True, exclude_unset=True,
                                             mode="json")).strip()


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _summary_table(summary: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><td>{_text(name)}</td><td>{_text(_value(value))}</td></tr>"
                   for name, value in summary.items())
    return f"<table>{rows}</table>"


def _text(text: str) -> str:
    return html.escape(str(text), quote=True)
