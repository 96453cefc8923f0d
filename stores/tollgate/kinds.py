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
from stores.tollgate.service import LedgerService, open_service
from stores.tollgate.settings import TollgateSettings

PROTOCOL = "ledger"
"""The request lifecycle a gateway runs against these kinds: spends funded by
leases, usage billed in batches (``simulator/families/tollgate``)."""

OpenService = Callable[[str | None, TollgateSettings, list[Any], str],
                      Awaitable[LedgerService]]


def ledger_kind(name: str, summary: str, *, holder_class: type[LeaseHolder] = LeaseHolder,
                service: OpenService = open_service) -> StoreKind:
    """A kind of the tollgate ledger: ``service`` opens the ledger the lab's
    service node runs (a variant wraps it); every replica runs a
    ``holder_class`` against it (a variant may change the holder instead)."""

    async def build(port: ServicePort, runtime: Runtime,
                    settings: TollgateSettings) -> LeaseHolder:
        holder = holder_class(LedgerClient(port), runtime, settings)
        runtime.spawn(holder.run_background())
        return holder

    return StoreKind(name=name, summary=summary, protocol=PROTOCOL,
                     settings_model=TollgateSettings, backends=("memory", "postgresql"),
                     build=build, contract=domain, ledger_keys=None, decode=None,
                     read_ledgers=None, service=service)


LEDGER = ledger_kind(
    "tollgate.ledger",
    "tollgate's lease ledger as a service (in memory, or on PostgreSQL), with holders "
    "that consolidate and bill usage idempotently")
