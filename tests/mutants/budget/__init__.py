"""Fault-exposed budget mutants (issue 24): each a shipped budget store with one
bug on a path only a fault takes -- a retry, a compensation, a refusal, a
recovery, a migration's re-run -- so that, with no fault injected, it cannot
be told from its fixed store.

Each module is a plug-in: importing it registers one store kind,
``mutants.budget.<module>``, and defines ``MUTANT``: the fixed kind it breaks,
the bug and the seed lines it violates, and the small scenario (with the
schedule that exposes it) the test runs it under. ``test_fault_exposed.py``
runs every entry of ``CATALOGUE`` beside its fixed store under the same
schedule, and once with the fault removed.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from stores.axond_budget.contract import Admission, BudgetKey, ExceededScope, Reservation
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget
from stores.registry import load_plugins

CATALOGUE = (
    "reserve_timeout_refunds_estimate",
    "reserve_timeout_fails_open",
    "reserve_timeout_drops_every_hold",
    "settle_retried_after_lost_reply",
    "settle_v2_timeout_recharges_subject",
    "settle_skips_charge_for_expired_hold",
    "migration_rerun_reapplies_claim",
    "migration_rerun_discards_parked_claim",
)
"""Every fault-exposed mutant module."""

V1 = {
    "name": "fault-exposed", "duration": "2s", "drain": "1500ms",
    "store": "axond_budget.redis_v1",
    "store_settings": {"subject_cap_microdollars": 20_000, "reservation_ttl": "500ms"},
    "fleet": {"replicas": 10},
    "network": {"latency": "lognormal(1ms, 0.3)", "timeout": "100ms"},
    "workload": {"arrivals": "poisson(300/s)", "keys": {"subjects": 4},
                 "estimate_microdollars": 1000, "actual_microdollars": "uniform(200, 1000)",
                 "duration": "lognormal(30ms, 0.3)"},
}
"""A small v1 run whose subject caps bind within its two seconds."""

V2 = {**V1, "store": "axond_budget.redis_v2",
      "store_settings": {"subject_cap_microdollars": 20_000,
                         "namespace_cap_microdollars": 60_000, "reservation_ttl": "500ms"},
      "workload": {**V1["workload"], "keys": {"subjects": 6, "namespaces": 2}}}
"""The same on the v2 layout, both caps binding."""


def lose(fault: str, call: str, replicas: range = range(10), at: str = "500ms",
         count: int = 3) -> list[dict[str, Any]]:
    """A schedule: ``fault`` on the first ``count`` ``call``s of each replica after ``at``."""
    return [{"at": at, "fault": fault, "replica": replica, "call": call, "count": count}
            for replica in replicas]


@dataclass(frozen=True)
class FaultExposed:
    """One fault-exposed mutant and the schedule that exposes it."""

    name: str
    derived_from: str
    """The shipped kind it breaks, the fixed store it is compared with."""
    breaks: str
    """The bug, in a sentence."""
    seed: str
    """The seed lines it violates (``<seedfile>:<first>-<last>``)."""
    scenario: dict[str, Any]
    """The scenario it runs under, its exposing faults included."""
    exposing: tuple[str, ...]
    """The top-level scenario sections that hold the exposing faults: removed,
    the mutant must do no harm (``faults``, ``network``...)."""
    exposed_by: str
    """What the verdict must name as having exposed it (a substring)."""
    slot: str = "store"
    """Where the kind goes: ``store``, or ``migrations.0.to``."""
    unexposed: dict[str, Any] = field(default_factory=dict)
    """Changes that remove the exposing faults (when more than dropping ``exposing``)."""

    @property
    def kind(self) -> str:
        return f"{__name__}.{self.name}"


def catalogue() -> list[FaultExposed]:
    """Every entry, its module loaded as a plug-in (so its kind is registered)."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]


OnUnreachable = Callable[[BudgetKey, Reservation], Awaitable[Admission]]


async def reserve_then(store: RedisBudget, key: BudgetKey, estimate: int,
                       on_unreachable: OnUnreachable) -> Admission:
    """``RedisBudget.reserve`` with its recovery path (the reserve's reply or
    request lost, the server unreachable) handed to ``on_unreachable``: where
    a reserve mutant puts its bug."""
    reservation = Reservation(store.runtime.new_id(), estimate)
    try:
        admitted = await store._reserve(  # noqa: SLF001 - a mutant is the store's own code
            keys=store._keys(key),  # noqa: SLF001
            args=[store.runtime.now_ms(), store.settings.reservation_ttl_ms,
                  *store._caps, estimate, reservation.id])  # noqa: SLF001
    except UNREACHABLE:
        return await on_unreachable(key, reservation)
    if admitted == 1:
        return Admission.allowed(reservation)
    if admitted == 2:
        return Admission.exceeded(ExceededScope.NAMESPACE)
    return Admission.exceeded(ExceededScope.SUBJECT)
