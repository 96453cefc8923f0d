"""Lease mutants: the fixed lease limiter with one fault-exposed bug each.

Each module is a plug-in: importing it registers one store kind,
``mutants.leases.<module>``, a ``LeaseLimiter`` subclass that breaks one
rule of the seed on a path only a fault takes (a retry, a compensation, a
refusal, a connection's recovery), and defines ``MUTANT``: what it breaks,
the seed lines it violates, and the schedule that exposes it on the
family's small fault-exposed scenario (``data/scenarios/leases-fault-exposed.toml``).
``tests/simulator/test_lease_mutants.py`` runs each one beside the fixed store
under its schedule: the damage it adds is at least 95% ``store_logic``, with
the exposing fault named, and the fixed store shows none.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from stores.axond_leases import LeaseLimiter, redis_kind
from stores.registry import StoreKind, load_plugins, register

SCENARIO = Path(__file__).resolve().parents[3] / "data" / "scenarios" / "leases-fault-exposed.toml"
"""The small scenario every lease mutant is shown on, with its own schedule."""

FIXED = "axond_leases.redis"

CATALOGUE = (
    "mismatch_refusal_keeps_lease",
    "ambiguous_outcome_not_compensated",
    "send_failure_not_compensated",
    "compensation_releases_wrong_id",
    "compensation_never_retried",
    "release_gives_up_after_one_retry",
    "timed_out_release_taken_as_done",
    "pair_reply_taken_as_release",
)
"""Every lease mutant module, in the order the docs list them."""


@dataclass(frozen=True)
class LeaseMutant:
    """One lease mutant: its bug, where the seed forbids it, and what exposes it."""

    name: str
    breaks: str
    """The bug, in a sentence (the kind's summary)."""
    seed: str
    """The seed lines it violates (``002_348438d99c360737.txt:first-last``)."""
    schedule: tuple[dict, ...]
    """The faults that expose it, as a scenario's ``[[faults.schedule]]``."""
    exposed_by: str
    """What the verdict must name as having exposed its damage."""
    changes: dict = field(default_factory=dict)
    """Scenario changes beside the schedule (none: the shared scenario as is)."""

    @property
    def kind(self) -> str:
        return f"mutants.leases.{self.name}"


def register_lease_mutant(mutant: LeaseMutant, store_class: type[LeaseLimiter]) -> StoreKind:
    """Register ``mutant`` as a kind of the Redis lease limiter running ``store_class``."""
    return register(redis_kind(mutant.kind, mutant.breaks, store_class=store_class))


def catalogue() -> list[LeaseMutant]:
    """Every lease mutant, its module loaded as a plug-in (so its kind is registered)."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]
