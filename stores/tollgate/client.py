"""A holder's client of the ledger service: each trait call is one transaction.

The ledger runs where the lab's service node runs it (in memory, or on a real
PostgreSQL); a holder reaches it through a ``ServicePort``, as a gateway
reaches its database through a driver. The ledger's clock decides every
instant (``now`` is the transaction's), so the calls here take no ``now``.

What the client adds is what a driver adds: a refusal comes back as the
ledger's own exception and is raised as is; a call that failed in transit --
refused, reset or timed out -- is a storage failure (``AllocateStorage``,
``StoreError``, ``IngestUnavailable``), because the holder cannot tell
whether the transaction committed. Domain refusals and storage failures are
never conflated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ConnectionError as TransportError
from redis.exceptions import TimeoutError as TransportTimeout

from stores.ports import ServicePort
from stores.tollgate.domain import (
    Allocation,
    IngestReport,
    ReclaimBatch,
    RolloverBatch,
    UsageEvent,
)
from stores.tollgate.errors import AllocateStorage, IngestUnavailable, StoreError

IN_TRANSIT = (TransportError, TransportTimeout)
"""What a call that never got its answer raises on the port."""


class LedgerClient:
    """``LeaseAllocator``, ``UsageSink`` and the rollover pass over a ``ServicePort``."""

    def __init__(self, port: ServicePort) -> None:
        self.port = port

    async def _call(self, verb: str, *args: Any) -> Any:
        reply = await self.port.call(verb, *args)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def acquire(self, account: int, requested: int, ttl_ms: int) -> Allocation:
        try:
            return await self._call("acquire", account, requested, ttl_ms)
        except IN_TRANSIT as error:
            raise AllocateStorage(StoreError(f"acquire: {error}")) from error

    async def release(self, lease_id: int, fencing_token: int, unspent: int) -> None:
        try:
            await self._call("release", lease_id, fencing_token, unspent)
        except IN_TRANSIT as error:
            raise AllocateStorage(StoreError(f"release: {error}")) from error

    async def consolidate(self, lease_id: int, fencing_token: int, unspent: int,
                          requested: int, needed: int, ttl_ms: int) -> Allocation:
        try:
            return await self._call("consolidate", lease_id, fencing_token, unspent,
                                    requested, needed, ttl_ms)
        except IN_TRANSIT as error:
            raise AllocateStorage(StoreError(f"consolidate: {error}")) from error

    async def reclaim_expired_batch(self, limit: int) -> ReclaimBatch:
        try:
            return await self._call("reclaim_expired_batch", limit)
        except IN_TRANSIT as error:
            raise StoreError(f"reclaim: {error}") from error

    async def roll_due_periods(self, limit: int) -> RolloverBatch:
        try:
            return await self._call("roll_due_periods", limit)
        except IN_TRANSIT as error:
            raise StoreError(f"rollover: {error}") from error

    async def ingest(self, events: Sequence[UsageEvent]) -> IngestReport:
        try:
            return await self._call("ingest", tuple(events))
        except IN_TRANSIT as error:
            raise IngestUnavailable(str(StoreError(f"ingest: {error}"))) from error
