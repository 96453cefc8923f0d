"""Mutants of the session-counter family: av_state stores broken on purpose
on a path a fault-free run rarely takes (a retry, a refund or its
compensation, a refusal, a cleanup, the recovery from a failed call), to
prove the oracle blames the store, and names what exposed the bug.

Each module of this package is a plug-in: importing it registers one store
kind, ``mutants.av_state.<module>``: the shipped Redis store with one bug (a
patched script, or a subclass changing one method), and defines ``MUTANT``:
what it breaks, the seed lines it violates, the small scenario (and fault
schedule) that exposes it, the invariants it must break and the exposure
the verdict must name. ``tests/mutants/av_state/test_av_state_mutants.py``
runs each beside the fixed store (``av_state.redis``) under the same
scenario and seed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from stores.av_state import redis_kind
from stores.av_state.redis_store import RedisStateStore
from stores.registry import StoreKind, load_plugins, register
from stores.scripts import ScriptSet

FIXED = "av_state.redis"

CATALOGUE = (
    "refusal_skips_ttl_refresh",
    "refusal_charges_earlier_keys",
    "refund_marker_without_ttl",
    "refund_clamp_without_ttl",
    "refund_resurrects_cleared_counter",
    "refund_retried_with_a_fresh_marker",
    "spend_re_sent_by_the_store",
    "failed_spend_reported_committed",
    "cleanup_over_matches",
    "remaining_before_the_charge",
    "charge_ttl_halved",
    "commit_without_charge",
)
"""Every mutant module, in the order the docs list them."""

SESSIONS = {"lifetime": "uniform(2m, 6m)", "call_every": "exponential(30s)",
            "call_duration": "lognormal(1s, 0.5)",
            "counters": {"tokens": {"amount": "uniform(100, 4000)", "limit": 20_000},
                         "total_calls": {"amount": 1, "limit": 6}},
            "refunds": {"chance": 0.6, "share": 0.5, "counters": ["tokens"]},
            "retries": 1, "retry_after": "1s"}

BASE: dict[str, Any] = {
    "name": "av-state-mutant", "duration": "15m", "drain": "8m", "store": FIXED,
    "fleet": {"replicas": 2},
    "network": {"latency": "lognormal(1ms, 0.5)", "timeout": "200ms"},
    "workload": {"arrivals": "poisson(120/h)", "keys": {"subjects": 6}, "sessions": SESSIONS},
}
"""About thirty sessions of a few calls each, budgets reached, refunds given,
every session's counters cleared at its end: a mutant's scenario changes it."""


@dataclass(frozen=True)
class Mutant:
    """One catalogue entry: an av_state store with one bug, and how the lab catches it."""

    name: str
    breaks: str
    """What the bug is, in a sentence (the kind's summary)."""
    violates: str
    """The seed lines it goes against (``004_3d0b2b7832cd8f83.txt:<first>-<last>``)."""
    scenario: dict[str, Any]
    """The change to ``BASE`` that exposes it: workload, network, a fault schedule."""
    damage: tuple[str, ...]
    """The invariants it must break, each at least 95% ``store_logic``."""
    exposed_by: str
    """What the verdict must name as having exposed it (a part of ``<metric>_exposed_by``)."""
    seed: int = 1
    counterfactual_differs: str = ""
    """Why the counterfactual view (the fixed store under the same schedule)
    sees less damage added than the mechanistic one files under
    ``store_logic``, when it does; empty when the two agree."""

    @property
    def kind(self) -> str:
        return f"mutants.av_state.{self.name}"


def register_mutant(mutant: Mutant, *, scripts: ScriptSet | None = None,
                    store_class: type[RedisStateStore] = RedisStateStore) -> StoreKind:
    """Register ``mutant`` as the shipped Redis store running ``scripts`` (a
    patched set) or ``store_class`` (a subclass changing one method)."""
    return register(redis_kind(mutant.kind, mutant.breaks, scripts=scripts,
                               store_class=store_class))


def catalogue() -> list[Mutant]:
    """Every mutant, its module loaded as a plug-in (so its kind is registered)."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]
