"""Fault-exposed budget mutants: stores wrong only when the lab does something.

Each store here is sound on a quiet network and breaks on a recovery path: a
retry, a compensation, a reclaim after a crash, a resumed migration. Each
module is a plug-in, as in ``tests/mutants``: importing it registers
``mutants.budget_exposed.<module>``, and its ``MUTANT`` names the fixed kind
it was derived from, the scenario (with the fault schedule that exposes it)
and the damage the lab must see. The fault contract
(``simulator.families.axond_budget.contract``) says why a sound store
suffers none of that damage from the same schedule, so all of it must be
filed under ``store_logic``, exposed by the fault
(``test_budget_exposed_mutants.py``).
"""

from __future__ import annotations

import sys
from typing import Any

from mutants import Mutant
from stores.axond_budget import SCRIPTS, redis_kind
from stores.axond_budget.contract import NamespaceCapSettings
from stores.registry import StoreKind, get, load_plugins, register
from stores.scripts import Patch

CATALOGUE = (
    "settle_resent_after_lost_reply",
    "lost_settle_reply_rewrites_the_hold",
    "retried_reserve_holds_twice",
    "hold_deadline_ignores_ttl",
    "reserve_error_admits_unheld",
    "v2_namespace_charged_in_a_second_call",
    "rerun_ignores_parked_claims",
    "apply_without_applied_record",
    "claim_dropped_before_apply",
    "in_memory_refusal_does_not_touch",
)
"""Every fault-exposed mutant module, in the order the docs list them."""

QUIET = {"faults.schedule": [], "network.retries": 0}
"""The overrides that take a scenario's exposing faults away: a module whose
exposure is something else (a migration's kill, the lab's idle eviction)
defines its own ``QUIET``."""


def register_exposed(mutant: Mutant, patch: Patch | None = None, **options: Any) -> StoreKind:
    """Register ``mutant`` as a Redis kind in its fixed kind's layout (see
    ``mutants.register_redis_mutant``); a Lua mutant is the seam ``patch``
    changes in the shipped script it ``replaces``, not a copy of it."""
    fixed = get(mutant.derived_from)
    layout = "v2" if fixed.settings_model is NamespaceCapSettings else "v1"
    if patch is not None:
        options["scripts"] = SCRIPTS.patching(**{mutant.replaces: patch})
    return register(redis_kind(mutant.kind, mutant.breaks, layout=layout, **options))


def quiet(mutant: Mutant) -> dict[str, Any]:
    """The scenario overrides under which ``mutant`` is not exposed."""
    return getattr(sys.modules[f"{__name__}.{mutant.name}"], "QUIET", QUIET)


def catalogue() -> list[Mutant]:
    """Every fault-exposed mutant, its module loaded as a plug-in."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]
