"""A campaign's results: the table of every mutant, kill rates, the summary line.

The kill rate counts what the lab could have caught: a mutant is in its
denominator when it compiles, a run of its hunt reached the mutated line,
and its runs were not all the base's (``judged``); stillborn, not-reached
and equivalent mutants are counted apart, as survivors of their own kinds,
and the not-reached ones again in the reach figure (mutants whose line a run
reached, of those that compile). Per invariant, a mutant counts for each
invariant that detected it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.mutate.campaign import (
    EQUIVALENT,
    NOT_REACHED,
    SURVIVOR_CLASSES,
    UNDETECTED,
    MutantRow,
    as_records,
)
from simulator.mutate.page import PAGE, write_page

TABLE = "mutants.parquet"
RATES = "kill_rates.parquet"


def judged(rows: Sequence[MutantRow]) -> list[MutantRow]:
    """The mutants the lab could have caught: they compile, a run reached
    the mutated line, and not every run was the base's (a run that hung or
    raised is as different as it gets)."""
    return [row for row in rows
            if row.detected or row.survived_as not in ("stillborn", NOT_REACHED, EQUIVALENT)]


def compiling(rows: Sequence[MutantRow]) -> list[MutantRow]:
    return [row for row in rows if row.survived_as != "stillborn"]


def kill_rates(rows: Sequence[MutantRow]) -> list[dict[str, Any]]:
    """Per operator class: judged, detected, the rate; and per invariant, how
    many of the judged it detected (its share of all detections)."""
    rates = []
    by_operator = Counter(row.operator for row in judged(rows))
    killed = Counter(row.operator for row in judged(rows) if row.detected)
    for operator in sorted(by_operator):
        rates.append({"by": "operator", "name": operator, "judged": by_operator[operator],
                      "detected": killed[operator],
                      "kill_rate": killed[operator] / by_operator[operator]})
    total = len(judged(rows))
    by_invariant = Counter(name for row in judged(rows) if row.detected
                           for name in row.invariants.split(", ") if name)
    for invariant, count in sorted(by_invariant.items()):
        rates.append({"by": "invariant", "name": invariant, "judged": total,
                      "detected": count, "kill_rate": count / total if total else 0.0})
    return rates


def summary_line(rows: Sequence[MutantRow]) -> str:
    """One line: generated, each survivor class, detected of judged, blamed."""
    survivors = Counter(row.survived_as for row in rows if not row.detected)
    detected = [row for row in rows if row.detected]
    blamed = [row for row in detected if (row.store_logic_share or 0) >= 0.95]
    candidates = len(judged(rows))
    rate = f" ({len(detected) / candidates:.0%})" if candidates else ""
    compiled = len(compiling(rows))
    reached = compiled - survivors[NOT_REACHED]
    reach = f" ({reached / compiled:.0%})" if compiled else ""
    parts = [f"{len(rows)} mutant(s)",
             *(f"{survivors[name]} {name}" for name in SURVIVOR_CLASSES if name != UNDETECTED),
             f"{len(detected)} of {candidates} judged detected{rate}",
             f"{len(blamed)} of them blamed on the store (>= 95% store_logic)",
             f"{survivors[UNDETECTED]} survived undetected",
             f"reach: {reached} of {compiled} compiling mutants' lines reached{reach}"]
    return "mutate: " + ", ".join(parts)


def write_tables(rows: Sequence[MutantRow], out_dir: Path) -> list[Path]:
    """The table and the kill rates, as Parquet in ``out_dir``, and the page
    that shows both (``simulator.mutate.page``)."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    rates = kill_rates(rows)
    for name, records in ((TABLE, as_records(rows)), (RATES, rates)):
        path = out_dir / name
        pd.DataFrame.from_records(records).to_parquet(path, index=False)
        written.append(path)
    return [*written, write_page(rows, rates, summary_line(rows), out_dir / PAGE)]
