"""Tollgate mutants: ledgers and holders broken on purpose on a path only a
fault takes -- a retry, a consolidation, a release, a reclaim, a recovery --
to prove the oracle's fault contract blames the store for them (issue 24).

Each module is a plug-in: importing it registers one store kind,
``mutants.tollgate.<module>``, the fixed ``tollgate.ledger`` with one bug (a
holder class, or a wrapper of the ledger the service node runs), and defines
``MUTANT``: what it breaks, the seed lines it violates, and the schedule that
exposes it on the family's small fleet (``data/scenarios/tollgate-mutants.toml``).
Without that schedule the mutant does what the fixed kind does; with it, its
damage must be at least 95% ``store_logic``, the exposing fault named, and
the fixed kind under the same schedule blamed for nothing
(``tests/simulator/test_tollgate_mutants.py``).

The ledger-side mutants reach into ``MemoryLedger``'s books: they run on the
memory backend only.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stores.registry import StoreKind, load_plugins, register
from stores.tollgate.holder import LeaseHolder
from stores.tollgate.kinds import ledger_kind
from stores.tollgate.variants import LedgerWrapper, wrapped

SCENARIO = Path(__file__).resolve().parents[3] / "data" / "scenarios" / "tollgate-mutants.toml"
"""The small fleet every tollgate mutant runs on, its schedule added."""

CATALOGUE = (
    "flush_drops_unanswered_batch",
    "flush_resends_with_fresh_ids",
    "ingest_skips_batch_with_a_duplicate",
    "release_credits_again_when_not_active",
    "consolidate_replays_the_exchange",
    "late_usage_refused_after_reclaim",
    "late_usage_billed_without_converting_loss",
    "reclaim_counts_billed_usage_as_loss",
    "release_in_grace_credits_nothing",
)
"""Every tollgate mutant module, in the order the docs list them."""


@dataclass(frozen=True)
class LedgerMutant:
    """One tollgate mutant: the bug, the seed lines it violates, and what exposes it."""

    name: str
    breaks: str
    seed: tuple[str, ...]
    """The seed lines it violates (``003_fa119f058ec0ffc5.txt:<first>-<last>``)."""
    exposed_by: dict[str, Any]
    """The scenario change (a fault schedule, settings) that exposes it."""
    damage: tuple[str, ...]
    """The invariants it must break, filed under ``store_logic``."""
    fault: str
    """The fault class that must be named as what exposed it (``reply_lost``...)."""
    derived_from: str = "tollgate.ledger"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return f"mutants.tollgate.{self.name}"

    def scenario(self) -> dict[str, Any]:
        """The small fleet with this mutant's kind and its exposing change."""
        return merged(merged(base_scenario(), self.exposed_by), {"store": self.kind})

    def fixed_scenario(self) -> dict[str, Any]:
        """The same scenario and schedule on the fixed kind."""
        return merged(merged(base_scenario(), self.exposed_by), {"store": self.derived_from})


def base_scenario() -> dict[str, Any]:
    with SCENARIO.open("rb") as file:
        return tomllib.load(file)


def merged(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``change`` merged in, table by table."""
    out = dict(base)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def register_ledger_mutant(mutant: LedgerMutant, *,
                           holder_class: type[LeaseHolder] = LeaseHolder,
                           wrapper: type[LedgerWrapper] | None = None) -> StoreKind:
    """Register ``mutant``: the fixed ledger kind with its holder class, or its
    ledger wrapped (everything else the fixed kind's)."""
    options: dict[str, Callable[..., Any]] = {}
    if wrapper is not None:
        options["service"] = wrapped(wrapper)
    return register(ledger_kind(mutant.kind, mutant.breaks, holder_class=holder_class,
                                **options))


def catalogue() -> list[LedgerMutant]:
    """Every tollgate mutant, its module loaded as a plug-in (its kind registered)."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]
