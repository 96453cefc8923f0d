"""Shared budget state in Redis: one cap enforced by the whole fleet.

Reserve and settle are each one Lua script, so the read-compare-write happens
atomically on the server: two replicas racing for the last of a budget cannot
both be admitted. Every hold carries its own deadline and the reserve script
reclaims expired holds before deciding, so a replica that dies mid-request
leaks its hold for at most the reservation TTL, with no sweeper.

Layout v1 (subject cap only): per ``(namespace, subject)`` a spend counter and
a hash of holds, both tagged ``{namespace|subject}`` so they share a cluster
slot.

Rules kept here:

* Awaits only its ports (``RedisPort``, ``Runtime``); scripts receive the
  replica's clock as an argument and never read the server's.
* A failed or ambiguous reserve falls back on ``on_unavailable``. The script
  may have run before the reply was lost; that hold then outlives the request
  by its TTL (the documented lost-reply posture).
* A failed settle is not retried: the hold expires on its own deadline.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

from redis.exceptions import RedisError

from stores.axond_budget.contract import (
    Admission,
    BudgetError,
    BudgetKey,
    ExceededScope,
    Reservation,
    SharedSettings,
)
from stores.ports import RedisPort, Runtime

BACKEND = "redis"
LAYOUT_V2 = "v2"
LAYOUT_MIGRATING = "v2-migrating"

# What a call to Redis can fail with, whoever raised it: redis-py's own errors,
# a socket error, or a caller-side timeout.
UNREACHABLE = (RedisError, OSError, TimeoutError)

logger = logging.getLogger(__name__)


def lua(name: str) -> str:
    """The source of a script shipped beside this module."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def layout_key(key_prefix: str) -> str:
    return f"{key_prefix}:layout"


def v1_keys(key_prefix: str, key: BudgetKey) -> list[str]:
    """The spend counter and the holds hash of one subject, in one hash slot."""
    scope = f"{key_prefix}:{{{key.namespace}|{key.subject}}}"
    return [f"{scope}:spent", f"{scope}:reservations"]


def parse_hold(hold: str) -> tuple[int, int]:
    """``"amount:deadline_ms"``, as the scripts write a hold, as two integers."""
    amount, _, deadline_ms = hold.partition(":")
    return int(float(amount)), int(float(deadline_ms))


def ledger_keys_v1(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
    """Which Redis keys hold ``key``'s ledger, and what each holds."""
    spent_key, holds_key = v1_keys(settings.key_prefix, key)
    return {spent_key: "spent", holds_key: "holds"}


def decode_ledger_value(role: str, value: Any) -> Any:
    """A ledger key's raw content (``None`` when absent) as the oracle reads it:
    ``spent`` as an integer, ``holds`` as ``{id: (amount, deadline_ms)}``."""
    if role == "spent":
        return int(value or 0)
    if isinstance(value, list):
        value = dict(zip(value[::2], value[1::2], strict=True))
    return {rid: parse_hold(hold) for rid, hold in (value or {}).items()}


class RedisBudget:
    """The v1 (subject-cap) Redis budget store."""

    name = "redis"

    def __init__(self, data: RedisPort, runtime: Runtime, settings: SharedSettings) -> None:
        if settings.enforces_namespace_cap:
            raise BudgetError(
                BACKEND,
                "`namespace_cap_microdollars` needs the v2 key layout, which this store "
                "version does not implement; leave it unset for the v1 subject cap.",
            )
        self.data = data
        self.runtime = runtime
        self.settings = settings
        self._reserve = data.register_script(lua("reserve_v1.lua"))
        self._settle = data.register_script(lua("settle_v1.lua"))

    @classmethod
    async def connect(
        cls, data: RedisPort, runtime: Runtime, settings: SharedSettings
    ) -> RedisBudget:
        """Prove the server answers and holds a layout this store can serve, so
        a wrong address or a migrated keyspace fails at boot, not per request."""
        store = cls(data, runtime, settings)
        try:
            await data.ping()
            marker = await data.get(layout_key(settings.key_prefix))
        except UNREACHABLE as error:
            raise BudgetError(BACKEND, f"the server did not answer at boot: {error}") from error
        if marker == LAYOUT_V2:
            raise BudgetError(
                BACKEND,
                f"`{layout_key(settings.key_prefix)}` says this keyspace was migrated to the "
                "v2 layout, so the namespace cap must stay configured: the v1 keys this "
                "configuration reads no longer hold the accumulated spend.",
            )
        if marker == LAYOUT_MIGRATING:
            raise BudgetError(
                BACKEND,
                f"`{layout_key(settings.key_prefix)}` says a migration to v2 did not finish: "
                "some subjects' spend is already in the v2 layout, so this configuration "
                "would read zero for them. Re-run the migration; it resumes where it stopped.",
            )
        return store

    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        reservation = Reservation(self.runtime.new_id(), estimated_microdollars)
        try:
            admitted = await self._reserve(
                keys=v1_keys(self.settings.key_prefix, key),
                args=[
                    self.runtime.now_ms(),
                    self.settings.reservation_ttl_ms,
                    self.settings.subject_cap_microdollars,
                    estimated_microdollars,
                    reservation.id,
                ],
            )
        except UNREACHABLE as error:
            logger.warning("budget reserve failed (%s); applying on_unavailable", error)
            return self.settings.on_unavailable.admission()
        if admitted == 1:
            return Admission.allowed(reservation)
        return Admission.exceeded(ExceededScope.SUBJECT)

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        if not reservation.is_held:
            return
        try:
            await self._settle(
                keys=v1_keys(self.settings.key_prefix, key),
                args=[reservation.id, actual_microdollars],
            )
        except UNREACHABLE as error:
            logger.error(
                "budget settlement lost (%s); the hold expires on its own deadline", error
            )

    async def release(self, key: BudgetKey, reservation: Reservation) -> None:
        await self.settle(key, reservation, 0)
