"""How a kind of the av_state counter store is made: the Redis store (shipped,
a variant, or a plugin's) and the in-memory twin."""

from __future__ import annotations

from typing import Any

from stores.av_state import contract
from stores.av_state.in_memory import InMemoryStateStore, read_ledgers
from stores.av_state.redis_store import RedisStateStore, with_ttls
from stores.av_state.settings import StateSettings
from stores.ports import RedisPort, Runtime
from stores.registry import StoreKind
from stores.scripts import ScriptSet

PROTOCOL = "counters"
"""The request lifecycle a gateway runs against these kinds: a session's
multi-key spends, refunds and cleanup (``simulator/families/av_state``)."""

COUNTER_ROLE = "counter"


def ledger_keys(settings: StateSettings, key: str) -> dict[str, str]:
    """The Redis key holding counter ``key``, with its role: the store writes
    a counter under the very key its caller names."""
    return {key: COUNTER_ROLE}


def decode(role: str, raw: Any) -> int | None:
    """A counter key's raw content as an integer; ``None`` when the key is
    absent (which the lab must tell apart from a counter at 0)."""
    if role != COUNTER_ROLE:
        raise ValueError(f"unknown ledger role {role!r}")
    return None if raw is None else int(raw)


def redis_kind(name: str, summary: str, *, store_class: type[RedisStateStore] = RedisStateStore,
               scripts: ScriptSet | None = None) -> StoreKind:
    """A kind of the Redis state store: ``store_class`` (``RedisStateStore``
    or a subclass changing one thing) running ``scripts`` (default: the
    class's own, with some of ``SCRIPTS`` replaced if a variant says so). The
    kind carries the scripts with their TTLs substituted, the text the store
    runs, so the lab names every call by its script."""
    sources = with_ttls(store_class.scripts if scripts is None else scripts)

    async def build(data: RedisPort, runtime: Runtime,
                    settings: StateSettings) -> RedisStateStore:
        return await store_class.connect(data, runtime, sources)

    return StoreKind(name=name, summary=summary, protocol=PROTOCOL,
                     settings_model=StateSettings, backends=("redis",), build=build,
                     contract=contract, ledger_keys=ledger_keys, decode=decode,
                     read_ledgers=None, scripts=sources,
                     with_scripts=lambda other, scripts: redis_kind(
                         other, summary, store_class=store_class, scripts=scripts),
                     classes=(store_class,),
                     with_classes=lambda other, swaps: redis_kind(
                         other, summary, store_class=swaps.get(store_class, store_class),
                         scripts=scripts))


async def _build_in_memory(data: Any, runtime: Runtime,
                           settings: StateSettings) -> InMemoryStateStore:
    return InMemoryStateStore()


IN_MEMORY = StoreKind(
    name="av_state.in_memory",
    summary="the in-memory twin: one process's counters, never expiring (the seed's "
            "stated divergence from Redis)",
    protocol=PROTOCOL,
    settings_model=StateSettings,
    backends=("memory",),
    build=_build_in_memory,
    contract=contract,
    ledger_keys=None,
    decode=None,
    read_ledgers=read_ledgers,
)
