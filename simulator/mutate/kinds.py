"""Mutants as store kinds, registered through the plug-in route.

A campaign writes its mutants down as a plugin module in its output directory
(``lab_mutants_<digest>.py``: the base kind and, per mutant, its name and its
one change, as data) and imports it like any ``--plugin`` module: the module
calls ``register_mutants``, which registers each mutant as the base kind under
the mutant's name with its one script changed (``StoreKind.with_scripts``) or
one of its classes replaced by a mutant subclass (``StoreKind.with_classes``).
So a hunt's workers, a sweep task or a later ``replay`` of a mutant's race
report import the same module and get the same kinds, and traces name the
mutant's scripts as they name the base kind's.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from simulator.mutate.lua import Mutation
from simulator.mutate.python import PythonMutation, class_path, mutant_class
from stores import registry
from stores.registry import StoreKind

MUTANT = ".mutant."
"""What a mutant kind's name has between its base kind's name and its number."""


def mutant_name(base: str, mutation: Mutation) -> str:
    """``BASE.mutant.3f9a1c20``: the mutant of ``base`` that makes ``mutation``,
    named by what it changes, so the same change has the same name in every
    campaign and two campaigns in one process (a notebook, a test run) never
    give one name to two different changes."""
    change = json.dumps(row_of("", mutation), sort_keys=True)
    return f"{base}{MUTANT}{hashlib.sha256(change.encode()).hexdigest()[:8]}"


def mutant_kind(base: StoreKind, name: str, mutation: Mutation) -> StoreKind:
    """``base`` under ``name``, its script ``mutation.script`` (or, for a
    ``PythonMutation``, its class) changed by ``mutation``."""
    if isinstance(mutation, PythonMutation):
        original = own_class(base, mutation.script)
        assert base.with_classes is not None  # own_class found one
        return base.with_classes(name, {original: mutant_class(original, mutation)})
    if base.with_scripts is None:
        raise ValueError(f"{base.name} cannot run other scripts (it declares no "
                         f"with_scripts): its Lua cannot be mutated")
    mutated = mutation.apply(base.scripts[mutation.script])
    return base.with_scripts(name, base.scripts.replacing(**{mutation.script: mutated}))


def register_mutants(base: str, mutants: Sequence[dict]) -> None:
    """Register each of ``mutants`` (``{"name", "script", "operator",
    "offset", "old", "new", "line"}``, and ``"method"`` for a Python one) as
    a kind: what a campaign's plugin module calls when imported."""
    kind = registry.get(base)
    known = registry.kinds()
    for row in mutants:
        if row["name"] not in known:
            registry.register(mutant_kind(kind, row["name"], mutation_of(row)))


def own_class(base: StoreKind, path: str) -> type:
    """The class of ``base``'s own (``StoreKind.classes``) at dotted ``path``."""
    for cls in base.classes if base.with_classes is not None else ():
        if class_path(cls) == path:
            return cls
    raise ValueError(f"{base.name} has no class {path} of its own to mutate")


def mutation_of(row: dict) -> Mutation:
    fields = (row["script"], row["operator"], row["offset"], row["old"], row["new"], row["line"])
    return PythonMutation(*fields, row["method"]) if row.get("method") else Mutation(*fields)


def row_of(name: str, mutation: Mutation) -> dict:
    row = {"name": name, "script": mutation.script, "operator": mutation.operator,
           "offset": mutation.offset, "old": mutation.old, "new": mutation.new,
           "line": mutation.line}
    if isinstance(mutation, PythonMutation):
        row["method"] = mutation.method
    return row


def write_plugin(out_dir: Path, base: str, mutants: Sequence[tuple[str, Mutation]]) -> str:
    """Write the plugin module registering ``mutants`` of ``base`` into
    ``out_dir``, put ``out_dir`` on the import path (this process's and its
    future workers'), import it, and return its module name."""
    rows = [row_of(name, mutation) for name, mutation in mutants]
    data = json.dumps({"base": base, "mutants": rows}, indent=1, sort_keys=True)
    module = f"lab_mutants_{hashlib.sha256(data.encode()).hexdigest()[:12]}"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{module}.py").write_text(
        f'"""Mutants of {base}, written by `python -m simulator mutate`: importing\n'
        f'this module registers each as a store kind (simulator.mutate.kinds)."""\n\n'
        f"import json\n\nfrom simulator.mutate.kinds import register_mutants\n\n"
        f"MUTANTS = json.loads({data!r})\n\n"
        f'register_mutants(MUTANTS["base"], MUTANTS["mutants"])\n', encoding="utf-8")
    on_path(out_dir)
    registry.load_plugins([module])
    return module


def on_path(directory: Path) -> None:
    """``directory`` importable here and in processes started from here."""
    where = str(directory.resolve())
    if where not in sys.path:
        sys.path.insert(0, where)
    paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    if where not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([where, *paths])
