"""Where a reference store kind stands in for the store under test.

``--reference`` (``run``, ``hunt``) and a race report's ``[invariant]
reference`` run the same scenario, seed and schedule on another kind of the
same family. Written ``KIND``, it replaces the scenario's ``store``; written
``PATH=KIND``, the kind at that dotted path instead, such as a migration's
target (``migrations.0.to=KIND``): the kind under test is then the one the
operator migrates to, and the fleet's first kind stays.
Several paths are joined by commas (a scenario migrating twice).
"""

from __future__ import annotations

STORE = "store"
FORM = "KIND or PATH=KIND[,PATH=KIND...] (e.g. migrations.0.to=KIND)"


def stand_in(reference: str) -> dict[str, str]:
    """The scenario changes that put ``reference`` in place: ``{path: kind}``."""
    if "=" not in reference:
        return {STORE: reference.strip()}
    changes = {}
    for part in reference.split(","):
        path, separator, kind = (text.strip() for text in part.partition("="))
        if not (separator and path and kind):
            raise ValueError(f"expected {FORM}, got {reference!r}")
        changes[path] = kind
    return changes


def reference_kind(reference: str) -> str:
    """The kind ``reference`` names, wherever it stands in; one kind only."""
    kinds = set(stand_in(reference).values())
    if len(kinds) != 1:
        raise ValueError(f"a reference is one store kind, got {sorted(kinds)} in "
                         f"{reference!r}")
    return kinds.pop()
