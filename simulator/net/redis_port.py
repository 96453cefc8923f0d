"""The data port a Redis store gets inside the simulation.

It speaks the ``redis.asyncio.Redis`` subset the stores use
(``stores.ports.RedisPort``), with ``decode_responses=True`` semantics, but
every call becomes a ``Send`` trap: a message over the replica's simulated
link. Arguments are encoded to strings as redis-py encodes them, so the
server sees byte-for-byte what a real driver would send.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from simulator.backends.redis_backend import sha1
from simulator.engine.traps import Send
from simulator.net.server import Command


def encode(value: Any) -> str:
    """A command argument as redis-py would send it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, bool):
        raise TypeError("redis-py refuses booleans as command arguments")
    if isinstance(value, int | float):
        return repr(value)
    raise TypeError(f"cannot send {type(value).__name__} to Redis")


def script_label(sha: str, names: dict[str, str]) -> str:
    """A script's name in traces and fault schedules: its kind's script name
    (``simulator.run.compose.script_names``), or ``script:<sha>`` for a script no kind
    of the run declares."""
    return names.get(sha) or f"script:{sha[:8]}"


class SimScript:
    """``register_script``'s result: EVALSHA, and on NOSCRIPT load then retry."""

    def __init__(self, port: SimRedis, source: str) -> None:
        self.port = port
        self.source = source
        self.sha = sha1(source)
        self.label = script_label(self.sha, port.script_names)

    async def __call__(self, keys: Sequence[str] = (), args: Sequence[Any] = ()) -> Any:
        command = Command.evalsha(self.sha, tuple(map(encode, keys)),
                                  tuple(map(encode, args)), self.label)
        try:
            return await Send(self.port.link, command)
        except NoScriptError:
            await self.port.script_load(self.source)
            return await Send(self.port.link, command)


class SimRedis:
    """``RedisPort`` over a simulated link; also a ``Connector``: ``connect``
    opens another connection of the same replica (``simulator.net.connections``)."""

    def __init__(self, link: Any, script_names: dict[str, str],
                 opener: Callable[[], Any] | None = None) -> None:
        self.link = link
        self.script_names = script_names
        self.opener = opener

    async def connect(self) -> SimRedis:
        """A new multiplexed connection of this replica, once it answered a
        PING: a round trip over the new connection, which may fail (lost,
        refused, reset) or hang (stalled) like any call; a failure is told to
        the oracle as ``connect_failed`` for the request that wanted it."""
        if self.opener is None:
            raise RedisConnectionError("this port cannot open connections")
        connection = SimRedis(self.opener(), self.script_names, self.opener)
        try:
            await connection.ping()
        except BaseException:
            link = connection.link
            current = link.kernel.current
            link.faults.hit(current.tag if current is not None else -1, "connect_failed", "connect")
            raise
        return connection

    async def aclose(self) -> None:
        self.link.close()

    def register_script(self, script: str) -> SimScript:
        return SimScript(self, script)

    async def _send(self, verb: str, *args: Any, keys: Sequence[str] = ()) -> Any:
        command = Command.plain(verb, *map(encode, args), keys=tuple(keys))
        return await Send(self.link, command)

    async def script_load(self, source: str) -> str:
        return await Send(self.link, Command.script_load(source))

    async def ping(self) -> bool:
        return await self._send("PING") == "PONG"

    async def get(self, name: str) -> str | None:
        return await self._send("GET", name, keys=(name,))

    async def set(self, name: str, value: Any, ex: int | None = None, px: int | None = None,
                  nx: bool = False, xx: bool = False) -> bool | None:
        options: list[Any] = []
        if ex is not None:
            options += ["EX", ex]
        if px is not None:
            options += ["PX", px]
        if nx:
            options.append("NX")
        if xx:
            options.append("XX")
        reply = await self._send("SET", name, value, *options, keys=(name,))
        return True if reply == "OK" else None

    async def delete(self, *names: str) -> int:
        return await self._send("DEL", *names, keys=names)

    async def hdel(self, name: str, *keys: str) -> int:
        return await self._send("HDEL", name, *keys, keys=(name,))

    async def incrby(self, name: str, amount: int = 1) -> int:
        return await self._send("INCRBY", name, amount, keys=(name,))

    async def hgetall(self, name: str) -> dict[str, str]:
        flat = await self._send("HGETALL", name, keys=(name,))
        return dict(zip(flat[::2], flat[1::2], strict=True))

    async def scan(self, cursor: int = 0, match: str | None = None,
                   count: int | None = None) -> tuple[int, list[str]]:
        options: list[Any] = []
        if match is not None:
            options += ["MATCH", match]
        if count is not None:
            options += ["COUNT", count]
        next_cursor, keys = await self._send("SCAN", cursor, *options)
        return int(next_cursor), list(keys)
