"""The HTML report's store lines: each Lua script and Python class of the
store, its lines marked reached or never reached, as coverage.py's HTML
marks a file (a line that can run no mark at all)."""

from __future__ import annotations

import html
from pathlib import Path

from simulator.reach.lines import REACH, Reach, reach_account
from stores import registry

STYLE = """
pre.reach { padding: .4em 0; line-height: 1.35; }
pre.reach span { display: block; padding: 0 .6em; }
pre.reach .reached { background: #e6f6e6; } pre.reach .missed { background: #fbe3e3; }
pre.reach .number { color: #888; user-select: none; }
"""
"""What this section adds to the report's style."""
CONTEXT = 2
"""Lines shown around a Python class's first and last line that can run."""


def reach_section(summary: dict) -> str:
    """The section, or nothing for a run not asked for its reach."""
    if REACH not in summary:
        return ""
    reach = Reach.decode(summary[REACH])
    units = [_unit(reach, unit) for unit in sorted(reach.runnable)]
    return "\n".join([
        "<section id='reach'><h2>Store lines reached</h2>",
        f"<pre>{html.escape(reach_account(summary))}</pre>",
        "<p>Green: a line a run executed; red: a line that can run and no run did "
        "(a gap of the scenario's, or code that only a fault the run did not inject "
        "reaches); unmarked: no statement of its own.</p>",
        *units, "</section>"])


def _unit(reach: Reach, unit: str) -> str:
    lines, first = unit_source(unit, reach.runnable[unit])
    runnable, reached = reach.runnable[unit], reach.reached.get(unit, frozenset())
    rows = []
    for number, text in enumerate(lines, start=first):
        style = ("reached" if number in reached else "missed" if number in runnable else "")
        marked = f" class='{style}'" if style else ""
        rows.append(f"<span{marked}><span class='number'>{number:>4}</span>  "
                    f"{html.escape(text)}</span>")
    count = f"{len(reached)} of {len(runnable)}"
    return (f"<details{' open' if len(reached) < len(runnable) else ''}><summary>"
            f"{html.escape(unit)}: {count} lines reached</summary>"
            f"<pre class='reach'>{''.join(rows)}</pre></details>")


def unit_source(unit: str, runnable: frozenset[int]) -> tuple[list[str], int]:
    """The lines a unit's section shows, and the number of the first: a
    script whole; a class from just before its first line that can run to
    just after its last."""
    path_text, _, rest = unit.partition(": ")
    path = Path(path_text)
    if unit.endswith(".lua") and path.is_file():
        return path.read_text(encoding="utf-8").splitlines(), 1
    if path.suffix == ".py" and path.is_file() and runnable:
        lines = path.read_text(encoding="utf-8").splitlines()
        first = max(1, min(runnable) - CONTEXT)
        return lines[first - 1:max(runnable) + CONTEXT], first
    if rest.endswith(".lua"):  # a kind's script with no file of its own
        scripts = registry.get(path_text).scripts or {}
        name = rest.removesuffix(".lua")
        if name in scripts:
            return scripts[name].splitlines(), 1
    return [], 1
