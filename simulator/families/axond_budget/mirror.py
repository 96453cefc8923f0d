"""The end-of-run check: the budget oracle's books against a store's record.

The oracle keeps, per source of record, the spend and the holds a store
recorded for each key, updated from every change the lab observed. At the end
of a run both observers (``observer`` for a server's keys, ``in_process`` for
the replicas' own stores) compare those books with what the stores hold, key
by key. A difference means the lab missed a change: its numbers cannot be
vouched for, so the run stops with a ``SimulationError`` instead.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.kernel import SimulationError
from simulator.families.axond_budget.oracle import BudgetOracle, Key


def compare(oracle: BudgetOracle, key: Key, source: Any, scope_name: str, part: str,
            held: Any, empty: Any, seed: int, what: str, where: str = "the backend") -> None:
    """Stop the run unless the oracle's record of ``part`` (``"spent"`` or
    ``"holds"``) of ``key`` at ``source`` in scope ``scope_name`` is ``held``
    (``empty``: what a ledger the oracle never saw reads as)."""
    scope = oracle.scopes.get(scope_name)
    book = scope.books.get(scope.scope_of(key)) if scope else None
    if book is None:
        mirrored = empty
    else:
        mirrored = book.spent.get(source, 0) if part == "spent" else book.holds.get(source, {})
    if held != mirrored:
        raise SimulationError(
            f"the oracle's record of {key} ({what}) is {mirrored!r} but {where} "
            f"holds {held!r} (seed {seed}): a lab bug, please report")
