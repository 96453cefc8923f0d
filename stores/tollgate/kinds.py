"""How a kind of the tollgate ledger is made: the ledger the service node runs
and the holder each replica runs against it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from stores.ports import Runtime, ServicePort
from stores.registry import StoreKind
from stores.tollgate import domain
from stores.tollgate.client import LedgerClient
from stores.tollgate.holder import LeaseHolder
from stores.tollgate.memory import MemoryLedger
from stores.tollgate.service import LedgerService, with_rules
from stores.tollgate.settings import TollgateSettings

PROTOCOL = "ledger"
"""The request lifecycle a gateway runs against these kinds: spends funded by
leases, usage billed in batches (``simulator/families/tollgate``)."""

OpenService = Callable[[str | None, TollgateSettings, list[Any], str],
                      Awaitable[LedgerService]]


def ledger_kind(name: str, summary: str, *, holder_class: type[LeaseHolder] = LeaseHolder,
                rules: type[MemoryLedger] = MemoryLedger,
                service: OpenService | None = None) -> StoreKind:
    """A kind of the tollgate ledger: the service node runs a ledger whose
    calls ``rules`` (``MemoryLedger`` or a subclass changing one rule, on
    PostgreSQL too) answers, unless ``service`` opens another (a variant
    wrapping the ledger); every replica runs a ``holder_class`` against it
    (a variant may change the holder instead)."""

    async def build(port: ServicePort, runtime: Runtime,
                    settings: TollgateSettings) -> LeaseHolder:
        holder = holder_class(LedgerClient(port), runtime, settings)
        runtime.spawn(holder.run_background())
        return holder

    # A service of its own hides which rules it runs: only the holder is the kind's to swap.
    classes = (holder_class,) if service is not None else (holder_class, rules)
    return StoreKind(name=name, summary=summary, protocol=PROTOCOL,
                     settings_model=TollgateSettings, backends=("memory", "postgresql"),
                     build=build, contract=domain, ledger_keys=None, decode=None,
                     read_ledgers=None, service=service or with_rules(rules),
                     classes=classes,
                     with_classes=lambda other, swaps: ledger_kind(
                         other, summary, holder_class=swaps.get(holder_class, holder_class),
                         rules=swaps.get(rules, rules), service=service))


LEDGER = ledger_kind(
    "tollgate.ledger",
    "tollgate's lease ledger as a service (in memory, or on PostgreSQL), with holders "
    "that consolidate and bill usage idempotently")
