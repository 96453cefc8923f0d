"""Mutants: budget stores broken on purpose, to prove the oracle blames the store.

Each module of this package is a plug-in: importing it registers one store
kind, ``mutants.<module>``, that is a shipped kind with one bug, and defines
``MUTANT``, its catalogue entry: which kind it was derived from, what it
breaks, the committed scenario that shows it and the damage the lab must see.
``test_mutants.py`` runs every entry of ``CATALOGUE``; ``docs/metrics.md``
lists them.

None of this ships: the mutants live with the tests, and a mutant that no run
could tell from its fixed store (an equivalent mutant) has no place here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stores.axond_budget import SCRIPTS, redis_kind
from stores.axond_budget.contract import NamespaceCapSettings
from stores.registry import StoreKind, get, load_plugins, register

HERE = Path(__file__).resolve().parent
"""Where the mutants' ``.lua`` files are, beside their modules."""
SCENARIOS = HERE.parents[1] / "data" / "scenarios"

DAMAGE = ("overshoot", "drift", "leaks", "false_denials", "wrongful_admissions")
"""The kinds of damage the oracle measures and attributes to causes; a
namespace-scope one is written ``namespace_<damage>``."""

CATALOGUE = (
    "settle_forgets_hold",
    "settle_deletes_every_hold",
    "settle_charges_other_key",
    "settle_charges_twice",
    "settle_with_zero_actual_keeps_hold",
    "reserve_ignores_live_holds",
    "cap_check_off_by_one",
    "reclaims_live_holds",
    "hold_ttl_shorter_than_asked",
    "ids_collide",
    "namespace_total_not_incremented",
    "v2_writes_subject_hold_before_namespace_check",
    "caps_in_wrong_order",
    "migration_drops_a_key",
    "in_memory_evicts_live_hold",
)
"""Every mutant module, in the order the docs list them."""


@dataclass(frozen=True)
class Mutant:
    """One catalogue entry: a store with one bug, and how the lab catches it."""

    name: str
    derived_from: str
    """The shipped kind it breaks: the fixed store it is compared with."""
    breaks: str
    """What the bug is, in a sentence (the kind's summary, and the docs' table)."""
    scenario: str
    """The committed scenario that shows it, relative to ``data/scenarios``."""
    damage: tuple[str, ...]
    """The damage the scenario must show, each attributed to the store
    (``"drift"``, ``"namespace_overshoot"``...; see ``DAMAGE``)."""
    slot: str = "store"
    """The scenario field the kind goes in: ``"store"``, or
    ``"migrations.0.to"`` for a migration's target."""
    replaces: str | None = None
    """A Lua mutant: the family's script (or fragment) it replaces with its
    own file, ``<name>.lua`` beside its module. ``None``: the bug is Python."""

    @property
    def language(self) -> str:
        return "python" if self.replaces is None else "lua"

    @property
    def kind(self) -> str:
        return f"mutants.{self.name}"

    @property
    def scenario_path(self) -> Path:
        return SCENARIOS / self.scenario


def register_mutant(mutant: Mutant, **changes: Any) -> StoreKind:
    """Register ``mutant`` as its fixed kind with ``changes`` (a ``build``...):
    everything it does not change is the fixed kind's."""
    fixed = get(mutant.derived_from)
    return register(replace(fixed, name=mutant.kind, summary=mutant.breaks, **changes))


def register_redis_mutant(mutant: Mutant, **options: Any) -> StoreKind:
    """Register a mutant of a Redis kind, in its fixed kind's layout, through
    ``redis_kind`` (``options``: a ``store_class``, a ``migration``), running
    the family's scripts with the one it ``replaces`` swapped for its own, so
    its build, migration and scripts agree as the fixed kind's do."""
    fixed = get(mutant.derived_from)
    layout = "v2" if fixed.settings_model is NamespaceCapSettings else "v1"
    if mutant.replaces is not None:
        options["scripts"] = SCRIPTS.replacing(**{mutant.replaces: HERE / f"{mutant.name}.lua"})
    return register(redis_kind(mutant.kind, mutant.breaks, layout=layout, **options))


def catalogue() -> list[Mutant]:
    """Every mutant, its module loaded as a plug-in (so its kind is registered)."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]
