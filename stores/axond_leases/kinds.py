"""How a kind of the lease limiter is made: shipped, a variant, or a plugin's."""

from __future__ import annotations

from typing import Any

from stores.axond_leases import contract
from stores.axond_leases.keys import lease_key
from stores.axond_leases.limiter import LeaseLimiter
from stores.axond_leases.settings import LeaseSettings
from stores.ports import Connector, Runtime
from stores.registry import StoreKind
from stores.scripts import ScriptSet

PROTOCOL = "leases"
"""The request lifecycle a gateway runs against these kinds: acquire, work,
release (``simulator/families/axond_leases``)."""

LEASES_ROLE = "leases"


def ledger_keys(settings: LeaseSettings, key: contract.LeaseKey) -> dict[str, str]:
    """The Redis key holding ``key``'s leases, with its role."""
    return {lease_key(settings.key_prefix, key): LEASES_ROLE}


def decode(role: str, raw: Any) -> dict[str, int]:
    """A leases hash's raw content (``None`` when absent; a flat ``HGETALL``
    list is read too) as lease id -> deadline in ms."""
    if role != LEASES_ROLE:
        raise ValueError(f"unknown ledger role {role!r}")
    if isinstance(raw, list):
        raw = dict(zip(raw[::2], raw[1::2], strict=True))
    return {lease_id: int(float(deadline_ms)) for lease_id, deadline_ms in (raw or {}).items()}


def redis_kind(name: str, summary: str, *, store_class: type[LeaseLimiter] = LeaseLimiter,
               scripts: ScriptSet | None = None) -> StoreKind:
    """A kind of the Redis lease limiter: ``store_class`` (``LeaseLimiter`` or
    a subclass changing one thing) running ``scripts`` (default: the class's
    own, with some of ``SCRIPTS`` replaced if a variant says so). ``build``
    gets a ``Connector``: the limiter opens its own connections."""
    sources = store_class.scripts if scripts is None else scripts

    async def build(connector: Connector, runtime: Runtime,
                    settings: LeaseSettings) -> LeaseLimiter:
        return await store_class.connect(connector, runtime, settings, sources)

    return StoreKind(name=name, summary=summary, protocol=PROTOCOL,
                     settings_model=LeaseSettings, backends=("redis",), build=build,
                     contract=contract, ledger_keys=ledger_keys, decode=decode,
                     read_ledgers=None, scripts=sources,
                     with_scripts=lambda other, scripts: redis_kind(
                         other, summary, store_class=store_class, scripts=scripts),
                     classes=(store_class,),
                     with_classes=lambda other, swaps: redis_kind(
                         other, summary, store_class=swaps.get(store_class, store_class),
                         scripts=sources))
