"""av_state's Redis ``StateStore``: session counters shared by every replica
(seed 004, ``redis_store.rs``).

Each operation that changes a counter is one Lua script (``*.lua`` beside this
module), so check-and-spend is atomic across clients. The scripts are written
with the TTLs as ``${COUNTER_TTL_SECONDS}`` / ``${REFUND_MARKER_TTL_SECONDS}``
placeholders, which the store substitutes once, at load (``with_ttls``), as
the seed formats its constants in: one constant, no literal to drift.

Rules kept here:

* Awaits only its ports (``RedisPort``, ``Runtime``); refund markers take their
  ids from ``Runtime.new_id``.
* Every path that touches a counter leaves it with the 24 h TTL, the refusal
  paths included (see ``try_spend.lua``).
* EVAL uncertainty: when the connection breaks between the server's commit and
  the reply, ``try_spend_many``/``add`` raise ``BackendError`` and the caller
  cannot tell whether the charge happened. A retry with the same intent then
  charges twice: conservative (over-charges, never mints budget), and left so
  by the seed, which defers a request nonce as a design change. Refunds carry
  a one-shot marker instead, because their replay would mint budget.
* ``refund``, ``refund_many``, ``remove`` and ``remove_prefix`` are best effort:
  a failure is logged on ``stores.av_state`` and never raised.
* Connections: the seed pools them (r2d2, at most 32, a 2 s wait for one,
  one verified at start-up, each checked with PING when handed out).
  ``from_url`` builds the same pool on redis-py's ``BlockingConnectionPool``
  (``CheckedPool``); the store itself sees only its ``RedisPort``, and the
  lab's simulated port models no pool. Redis Cluster (a comma list of
  seeds) is validated as the seed validates it, then refused: this port drives
  one server.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from string import Template
from typing import Any, ClassVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from stores.av_state.contract import (
    COUNTER_TTL_SECONDS,
    EMPTY_BATCH_REMAINING,
    JCS_SAFE_MAX,
    REFUND_MARKER_TTL_SECONDS,
    BackendError,
    Committed,
    CounterOverflow,
    Refund,
    Refused,
    Spend,
    TrySpendOutcome,
    check_spends,
    read_counter,
    refund_amount,
    require_safe,
)
from stores.av_state.keys import prefix_pattern, refund_marker_key
from stores.av_state.transports import split_urls, validate_transports
from stores.axond_budget.redis_budget import UNREACHABLE
from stores.ports import RedisPort, Runtime
from stores.scripts import ScriptSet

logger = logging.getLogger("stores.av_state")

SCRIPTS = ScriptSet.shipped(__package__)
"""The Lua files beside this module, by script name, placeholders unsubstituted."""

TTL_PLACEHOLDERS = {
    "COUNTER_TTL_SECONDS": COUNTER_TTL_SECONDS,
    "REFUND_MARKER_TTL_SECONDS": REFUND_MARKER_TTL_SECONDS,
}

SCAN_COUNT = 500
"""Keys one ``SCAN`` step of ``remove_prefix`` asks for, and so at most one ``DEL``."""

POOL_MAX_CONNECTIONS = 32
POOL_WAIT_SECONDS = 2
"""The seed's pool: at most 32 connections; a caller waits 2 s for one (and
each connect, read and write is bounded by the same 2 s)."""


class CheckedPool(aioredis.BlockingConnectionPool):
    """The seed's pool checks each connection with ``PING`` before handing it
    out (r2d2's ``test_on_check_out``, on by default; ``is_valid`` pings): a
    connection the server closed (a restart) is replaced by a new one, not
    handed to a spend that then fails. redis-py's pool only looks for unread
    data, which a closed socket need not show yet."""

    async def ensure_connection(self, connection: Any) -> None:
        await super().ensure_connection(connection)
        try:
            await connection.send_command("PING", check_health=False)
            await connection.read_response()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            await connection.disconnect()
            await connection.connect()


def with_ttls(scripts: ScriptSet) -> ScriptSet:
    """``scripts`` with the TTL placeholders substituted: the text the store
    runs. A placeholder it does not know fails here, at load, never in Redis;
    substituting a set twice changes nothing."""
    return ScriptSet({name: Template(text).substitute(TTL_PLACEHOLDERS)
                      for name, text in scripts.items()})


def decode_try_spend(reply: Any) -> TrySpendOutcome:
    """``try_spend.lua``'s reply: ``{-1, index}`` (1-based) or ``{min_remaining, 0}``.
    Any other reply (another command's, on a connection that lost its place)
    is a ``BackendError``, as the seed's typed decode fails into one."""
    try:
        first, second = (int(part) for part in reply)
    except (TypeError, ValueError):
        raise BackendError(f"try_spend.lua returned unrecognised reply {reply!r}") from None
    if first == -1:
        # The seed matches the refusal first, so the empty-KEYS sentinel
        # {-1, 0} reads as an invalid index; the empty batch never reaches
        # the script.
        if second < 1:
            raise BackendError(f"invalid Lua failure index {second}")
        return Refused(second - 1)
    if second == 0:
        return Committed(EMPTY_BATCH_REMAINING if first < 0 else first)
    raise BackendError(f"try_spend.lua returned unrecognised shape [{first}, {second}]")


def decode_integer(script: str, reply: Any) -> int:
    """An integer script's reply (``add.lua``, ``fetch_max.lua``). Any other
    (another command's, on a connection that lost its place) is a
    ``BackendError``, as the seed's typed decode into an ``i64`` fails into one."""
    try:
        return int(reply)
    except (TypeError, ValueError):
        raise BackendError(f"{script} returned unrecognised reply {reply!r}") from None


class RedisStateStore:
    """Session counters in one Redis, behind the seed's ``StateStore`` contract."""

    scripts: ClassVar[ScriptSet] = SCRIPTS
    """The scripts this class runs unless given others: a variant patches one
    (``SCRIPTS.patching(refund=Patch(...))``) or replaces it
    (``SCRIPTS.replacing(refund=...)``) without copying the rest."""

    def __init__(self, data: RedisPort, runtime: Runtime,
                 scripts: ScriptSet | None = None) -> None:
        self.data = data
        self.runtime = runtime
        sources = with_ttls(type(self).scripts if scripts is None else scripts)
        self._try_spend = data.register_script(sources.source("try_spend"))
        self._add = data.register_script(sources.source("add"))
        self._fetch_max = data.register_script(sources.source("fetch_max"))
        self._refund = data.register_script(sources.source("refund"))
        self._refund_many = data.register_script(sources.source("refund_many"))

    @classmethod
    async def connect(cls, data: RedisPort, runtime: Runtime,
                      scripts: ScriptSet | None = None) -> RedisStateStore:
        """A store whose server answered a ``PING``: a wrong address or a
        server that is down fails at start-up, not on the first spend."""
        store = cls(data, runtime, scripts)
        try:
            await data.ping()
        except UNREACHABLE as error:
            raise BackendError(f"the Redis server did not answer at start-up: {error}") from error
        return store

    @classmethod
    async def from_url(cls, urls: str, runtime: Runtime) -> RedisStateStore:
        """Production start-up: a store on ``urls`` (one ``redis://`` or
        ``rediss://`` URL) over the seed's pool, its transport validated
        first. Several comma-separated URLs (a cluster's seeds) are validated,
        then refused: this port drives one server."""
        nodes = split_urls(urls)
        if not nodes:
            raise BackendError("no Redis URL given")
        validate_transports(nodes)
        if len(nodes) > 1:
            raise BackendError(f"Redis Cluster ({len(nodes)} comma-separated URLs) is not "
                               "supported by this store; give the URL of one server")
        # Retries off: the seed's single-node connections never re-send, and a
        # re-sent spend script is charged twice.
        pool = CheckedPool.from_url(
            nodes[0], max_connections=POOL_MAX_CONNECTIONS, timeout=POOL_WAIT_SECONDS,
            socket_connect_timeout=POOL_WAIT_SECONDS, socket_timeout=POOL_WAIT_SECONDS,
            decode_responses=True, retry=Retry(NoBackoff(), 0))
        client = aioredis.Redis.from_pool(pool)
        try:
            return await cls.connect(client, runtime)
        except BackendError:
            await client.aclose()
            raise

    @property
    def counter_ttl_seconds(self) -> int | None:
        return COUNTER_TTL_SECONDS

    # -- spending: failures raise BackendError ---------------------------------

    async def try_spend_many(self, spends: Sequence[Spend]) -> TrySpendOutcome:
        spends = tuple(spends)
        check_spends(spends)
        if not spends:
            # Nothing to spend: answered here, with no round trip, as the
            # in-memory store answers it.
            return Committed(EMPTY_BATCH_REMAINING)
        keys = [spend.key for spend in spends]
        args = [number for spend in spends for number in (spend.amount, spend.limit)]
        return decode_try_spend(await self._call("try_spend", self._try_spend, keys, args))

    async def try_spend(self, spend: Spend) -> TrySpendOutcome:
        return await self.try_spend_many((spend,))

    async def add(self, key: str, delta: int) -> int:
        require_safe(key, delta)
        value = decode_integer("add.lua", await self._call("add", self._add, [key],
                                                           [delta, JCS_SAFE_MAX]))
        if value < 0:
            raise CounterOverflow(key)
        return value

    async def get(self, key: str) -> int:
        try:
            raw = await self.data.get(key)
        except UNREACHABLE as error:
            raise BackendError(f"get of {key!r} failed: {error}") from error
        if raw is None:
            return 0
        try:
            value = int(raw)
        except ValueError:
            raise BackendError(f"counter {key!r} holds {raw!r}, not an integer") from None
        return read_counter(key, value)

    async def fetch_max(self, key: str, value: int) -> int:
        require_safe(key, value)
        current = decode_integer("fetch_max.lua", await self._call(
            "fetch_max", self._fetch_max, [key], [value, JCS_SAFE_MAX]))
        if current < 0:
            raise CounterOverflow(key)
        return current

    async def _call(self, name: str, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except UNREACHABLE as error:
            raise BackendError(f"{name} failed: {error}") from error

    # -- compensation and cleanup: best effort, failures logged ----------------

    def refund_marker(self, key: str) -> str:
        """A fresh one-shot marker for a refund against counter ``key``: a
        suffix on it, so it shares its ``{hash-tag}`` and slot (a seam, so a
        variant states only how it names markers)."""
        return refund_marker_key(key, self.runtime.new_id())

    async def refund(self, key: str, amount: int) -> None:
        # A fresh marker per logical refund; a driver's retry re-sends the
        # same one and is a no-op (refund.lua). The amount goes as an exact
        # integer string: DECRBY parses it as an i64, no double in between.
        marker = self.refund_marker(key)
        try:
            await self._refund(keys=[key, marker], args=[str(refund_amount(amount))])
        except UNREACHABLE as error:
            # Logged, so an operator seeing budgets deplete during an outage
            # learns that compensation was failing; the caller never hears it.
            logger.warning("Redis refund of %r failed (%s); the counter may stay "
                           "over-charged until its TTL expires or a later refund lands",
                           key, error)

    async def refund_many(self, refunds: Sequence[Refund]) -> None:
        refunds = tuple(refunds)
        if not refunds:
            return
        amounts = [str(refund_amount(refund.amount)) for refund in refunds]
        # One marker for the batch, beside its first key (same hash tag).
        marker = self.refund_marker(refunds[0].key)
        try:
            await self._refund_many(keys=[*(refund.key for refund in refunds), marker],
                                    args=amounts)
        except UNREACHABLE as error:
            logger.warning("Redis refund_many of %d counters failed (%s); they may stay "
                           "over-charged until their TTL expires or a later refund lands",
                           len(refunds), error)

    async def remove(self, key: str) -> None:
        try:
            await self.data.delete(key)
        except UNREACHABLE as error:
            logger.warning("Redis remove of %r failed (%s); a session recycling this key "
                           "may inherit its counter until the TTL expires", key, error)

    async def remove_prefix(self, prefix: str) -> None:
        """Delete every key starting with ``prefix``: ``SCAN`` (never ``KEYS``,
        which blocks the server for the whole keyspace) and one ``DEL`` per
        page, until the cursor comes back to 0."""
        pattern = prefix_pattern(prefix)
        cursor = 0
        while True:
            try:
                cursor, batch = await self.data.scan(cursor, match=pattern, count=SCAN_COUNT)
            except (*UNREACHABLE, TypeError, ValueError) as error:
                # Unreachable, or a reply that is no SCAN page (another
                # command's, on a connection that lost its place): the seed
                # gives up on an unparsable page too.
                logger.warning("Redis SCAN failed during remove_prefix of %r (%s); partial "
                               "cleanup: the surviving keys expire at their TTL or on the next "
                               "successful remove_prefix", prefix, error)
                return
            if batch:
                try:
                    await self.data.delete(*batch)
                except UNREACHABLE as error:
                    logger.warning("Redis DEL of %d keys failed during remove_prefix of %r "
                                   "(%s); they survive until their TTL expires",
                                   len(batch), prefix, error)
            if cursor == 0:
                return
