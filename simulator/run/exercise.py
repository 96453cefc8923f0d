"""Whether a run exercised the store at all: no vacuous pass.

A run whose replicas never booted, in which the store answered no request
(served or refused), or in which a store call raised outside its contract
(``simulator.world.findings``) says nothing about the store's invariants:
its verdict is INCONCLUSIVE, not HELD, with the reason in one line
(``INCONCLUSIVE`` in the summary; ``run`` exits with ``INCONCLUSIVE_EXIT``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.run.summary import STORE_ANSWERS, STORE_RAISED

INCONCLUSIVE_EXIT = 4
"""``run``'s exit status for an inconclusive run."""


def store_answers(counts: Mapping[str, int], served: str, refused: str) -> int:
    """The requests the store answered: served (the family's ``served`` event)
    or refused (its ``refused`` one)."""
    return counts.get(served, 0) + counts.get(refused, 0)


def inconclusive_reason(summary: Mapping[str, Any], first_boot_error: str | None) -> str | None:
    """Why a run with ``summary`` cannot judge the store, in one line, or None."""
    raised = summary.get(STORE_RAISED)
    if raised:
        return f"the store raised outside its contract: {raised}"
    if summary.get("replica_started_count", 0) == 0:
        why = f": {first_boot_error}" if first_boot_error else ""
        return f"no replica booted its store{why}"
    if summary.get(STORE_ANSWERS, 0) == 0:
        return ("the store answered no request (none served or refused): nothing of it "
                "was exercised")
    return None


def first_boot_error(trace_columns: Mapping[str, list]) -> str | None:
    """The first boot refusal in a trace, as ``ValueError: why``."""
    for index, kind in enumerate(trace_columns["kind"]):
        if kind == "replica_boot_failed":
            return f"{trace_columns['outcome'][index]}: {trace_columns['detail'][index]}"
    return None
