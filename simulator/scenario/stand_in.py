"""Where a reference store kind stands in for the store under test.

``--reference`` (``run``, ``hunt``) and a race report's ``[invariant]
reference`` run the same scenario, seed and schedule on another kind of the
same family. Written ``KIND``, it replaces the scenario's ``store``; written
``PATH=KIND``, the kind at that dotted path instead, such as a migration's
target (``migrations.0.to=KIND``): the kind under test is then the one the
operator migrates to, and the fleet's first kind stays.
Several paths are joined by commas (a scenario migrating twice).

A bare ``KIND`` given to a scenario is first *placed* (``placed``): it stands
in at every place the scenario names a kind (the store, each migration's
target) that takes the same settings as ``KIND`` and is not ``KIND`` already,
so a reference that takes a migration's target settings, given to a fleet
whose own store takes others, compares the migration's target and leaves the
fleet's store, and
the hunt and its report say which places it took.
"""

from __future__ import annotations

import copy
from typing import Any

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


def kind_places(data: dict[str, Any]) -> dict[str, str]:
    """Every place scenario ``data`` names a store kind: ``{path: kind}``."""
    places = {STORE: str(data.get(STORE, ""))}
    for index, step in enumerate(data.get("migrations") or []):
        if isinstance(step, dict) and "to" in step:
            places[f"migrations.{index}.to"] = str(step["to"])
    return places


def placed(reference: str, data: dict[str, Any]) -> str:
    """``reference`` with its places written out (``PATH=KIND[,...]``): a
    ``PATH=KIND`` as given; a bare ``KIND`` at every place of ``data`` naming
    another kind with ``KIND``'s settings model (where ``KIND`` can stand in:
    the same layout, the same settings), or at the store when none does (the
    scenario then says what does not fit)."""
    if "=" in reference:
        return reference
    from stores import registry  # the registry imports no scenario code

    kind = reference.strip()
    settings = registry.get(kind).settings_model
    paths = [path for path, named in kind_places(data).items()
             if named != kind and named in registry.kinds()
             and registry.get(named).settings_model is settings]
    return ",".join(f"{path}={kind}" for path in paths or [STORE])


def shown(reference: str) -> str:
    """``reference`` as verdicts and reports write it: the bare kind when it
    stands in for the store alone, else its places."""
    changes = stand_in(reference)
    return changes[STORE] if list(changes) == [STORE] else reference


def reference_kind(reference: str) -> str:
    """The kind ``reference`` names, wherever it stands in; one kind only."""
    kinds = set(stand_in(reference).values())
    if len(kinds) != 1:
        raise ValueError(f"a reference is one store kind, got {sorted(kinds)} in "
                         f"{reference!r}")
    return kinds.pop()


def with_stand_in(data: dict[str, Any], reference: str) -> dict[str, Any]:
    """A copy of scenario ``data`` with ``reference`` in place."""
    from simulator.scenario.model import set_dotted  # the model imports nothing of this

    data = copy.deepcopy(data)
    for path, kind in stand_in(reference).items():
        set_dotted(data, path, kind)
    return data


def stood_for(data: dict[str, Any], reference: str) -> list[str]:
    """The kinds in scenario ``data`` that ``reference`` would replace."""
    found = []
    for path in stand_in(reference):
        node: Any = data
        for part in path.split("."):
            node = node[int(part)] if isinstance(node, list) else node.get(part)
        found.append(str(node))
    return list(dict.fromkeys(found))
