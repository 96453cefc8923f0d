"""A campaign's page: ``mutants.html``, written beside its Parquet tables.

One self-contained page (the style of ``run --report``'s, no script, nothing
loaded from anywhere) a reader opens to see how strong the lab's checks were
against the campaign's mutants: the summary line; the kill rates per operator
class and per invariant; the survivors by class, each with what it asks of
the user; then one row per mutant, its verdict and its diff. Every text from
the rows is escaped: a Lua diff is full of ``<`` and ``<=``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from simulator.mutate.campaign import SURVIVOR_CLASSES, MutantRow
from simulator.mutate.kinds import MUTANT
from simulator.mutate.python_probe import UNRUNNABLE
from simulator.present.html_report import STYLE

PAGE = "mutants.html"
MUTANT_STYLE = """
td { vertical-align: top; } td pre { margin: .3em 0 0; padding: .4em; }
"""
"""What this page adds to the report's style: a row of many cells reads from its top."""

SURVIVOR_MEANING = {
    "stillborn": "The mutated script or class does not compile: Redis would refuse to load "
                 "it (Python to define it), so no check is needed. Nothing to do.",
    "not reached": "No run of its hunt, the fault-free one or any under faults, executed "
                   "the mutated line, so no check could see it: the scenario's gap. "
                   "Strengthen the scenario (a workload, a setting or a fault kind that "
                   "reaches that line).",
    "equivalent": "The line ran, yet every run of its hunt had the base's trace to the last "
                  "event and, on Redis, its replies and keys to the last: an equivalent "
                  "mutant, or runs too plain to tell it apart. Look at the diff before "
                  "counting it as a gap.",
    "undetected": "A run reached the line and came out otherwise than the base's, and no "
                  "invariant caught it in the hunt: the lab's own gap (a metric or a contract "
                  "it lacks), or a hunt too short to reach the schedule that shows it.",
}
"""What each survivor class means for the user, in ``SURVIVOR_CLASSES`` order."""

COLUMNS = ("#", "kind", "script:line", "operator", "change", "probe", "probe detail",
           "verdict", "invariants", "schedules", "seconds", "store_logic", "exposed by",
           "diff")
LEGEND = ("schedules: the fault schedules the hunt judged up to the one that exposed the "
          "mutant, that one included (0: the fault-free run did), or all it judged when "
          "none did; seconds: the hunt's wall time, shrinking included; store_logic: the "
          "share of the mutant's added damage the oracle blamed on the store's logic; "
          "exposed by: the fault the oracle says exposed it.")
ABSENT = "—"
"""What a cell shows for a field the row does not have (None, or never judged)."""


def write_page(rows: Sequence[MutantRow], rates: Sequence[Mapping[str, Any]],
               summary: str, path: Path) -> Path:
    """Write the page of ``rows`` (their ``kill_rates`` as ``rates``, their
    ``summary_line`` as ``summary``) to ``path`` and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page_html(rows, rates, summary), encoding="utf-8")
    return path


def page_html(rows: Sequence[MutantRow], rates: Sequence[Mapping[str, Any]],
              summary: str) -> str:
    """The page, as text."""
    bases = sorted({row.kind.split(MUTANT, 1)[0] for row in rows})
    title = f"Mutants of {', '.join(bases)}" if bases else "A mutation campaign"
    body = "\n".join([
        f"<h1>{escape(title)}</h1>",
        f"<p class='meta' id='summary'>{escape(summary)}</p>",
        "<section id='kill-rates'><h2>Kill rates</h2>",
        "<p>A kill rate counts the mutants the lab could have caught: every mutant that "
        "compiles was hunted under faults, and those a run of its hunt reached and that "
        "did not behave as the unmutated kind in every run are <em>judged</em>. Per "
        "invariant, the share of the judged mutants it detected (a mutant may count for "
        "several).</p>",
        _rates_table(rates, "operator", "operator class"),
        _rates_table(rates, "invariant", "invariant"), "</section>",
        "<section id='survivors'><h2>Survivors by class</h2>", _survivors(rows),
        "</section>",
        "<section id='mutants'><h2>Every mutant</h2>", _mutants(rows), "</section>",
    ])
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(title)}</title><style>{STYLE}{MUTANT_STYLE}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def _rates_table(rates: Sequence[Mapping[str, Any]], by: str, heading: str) -> str:
    chosen = [rate for rate in rates if rate["by"] == by]
    if not chosen:
        return f"<p>By {escape(heading)}: no mutant judged or detected.</p>"
    head = "".join(f"<th>{escape(name)}</th>" for name in
                   (heading, "judged", "detected", "kill rate"))
    body = "".join(f"<tr><td>{escape(str(rate['name']))}</td><td>{rate['judged']}</td>"
                   f"<td>{rate['detected']}</td><td>{rate['kill_rate']:.0%}</td></tr>"
                   for rate in chosen)
    return (f"<h3>By {escape(heading)}</h3>"
            f"<table id='rates-{by}'><tr>{head}</tr>{body}</table>")


def _survivors(rows: Sequence[MutantRow]) -> str:
    counts = Counter(row.survived_as for row in rows if not row.detected)
    body = "".join(f"<tr{_classed(_survivor_style(name))}><td>{escape(name)}</td>"
                   f"<td>{counts[name]}</td><td>{escape(SURVIVOR_MEANING[name])}</td></tr>"
                   for name in SURVIVOR_CLASSES)
    return ("<table id='survivor-classes'><tr><th>class</th><th>mutants</th>"
            f"<th>what it means</th></tr>{body}</table>")


def _survivor_style(name: str) -> str:
    # Red for the lab's gap, amber for the scenario's: what a reader acts on.
    return {"undetected": "broken", "not reached": "inconclusive"}.get(name, "")


def _mutants(rows: Sequence[MutantRow]) -> str:
    if not rows:
        return "<p>No mutant: the operator classes chosen change nothing in these scripts.</p>"
    head = "".join(f"<th>{escape(name)}</th>" for name in COLUMNS)
    return (f"<p>{escape(LEGEND)}</p><table id='mutant-rows'><tr>{head}</tr>"
            + "".join(_mutant_row(row) for row in rows) + "</table>")


def _mutant_row(row: MutantRow) -> str:
    survived = f"survived: {row.survived_as}" if row.survived_as else "survived"
    verdict = "detected" if row.detected else survived
    style = "held" if row.detected else _survivor_style(row.survived_as)
    share = None if row.store_logic_share is None else f"{row.store_logic_share:.0%}"
    # A mutant never hunted (stillborn, or caught by its probe) spent no hunt:
    # 0.0 s would read as a fast kill.
    hunted = row.survived_as != "stillborn" and row.probe not in UNRUNNABLE
    seconds = None if row.seconds is None or not hunted else f"{row.seconds:.2f}"
    before = [row.number, row.kind, f"{row.script}:{row.line}", row.operator, row.change,
              row.probe, row.probe_detail]
    after = [row.invariants, row.schedules, seconds, share, row.exposed_by]
    diff = (f"<details><summary>diff</summary><pre>{escape(row.diff)}</pre></details>"
            if row.diff else ABSENT)
    return (f"<tr id='mutant-{row.number}'>"
            + "".join(f"<td>{_cell(value)}</td>" for value in before)
            + f"<td{_classed(style)}>{escape(verdict)}</td>"
            + "".join(f"<td>{_cell(value)}</td>" for value in after)
            + f"<td>{diff}</td></tr>")


def _classed(style: str) -> str:
    return f" class='{style}'" if style else ""


def _cell(value: Any) -> str:
    return ABSENT if value is None or value == "" else escape(str(value))
