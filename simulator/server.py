"""The server node: where commands arrive and execute, one at a time.

Rules kept here:

* A command executes atomically, in arrival order, at the virtual time it
  arrives; nothing else runs on the server meanwhile.
* The server owns the *modelled* script cache: ``EVALSHA`` of a script this
  server has not loaded answers ``NOSCRIPT`` (after a restart, say), whatever
  the backend happens to have cached. The backend runs the script body.
* Keys whose virtual TTL has run out are gone before the next command runs.
* Replies are values or error messages; the network turns error messages into
  the exceptions redis-py would raise.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.backends import Outcome, RedisBackend
from simulator.backends.redis_backend import sha1
from simulator.kernel import Kernel
from simulator.trace import SERVER, Trace

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."


@dataclass(frozen=True, slots=True)
class Command:
    """One message to the server: ``verb``, the keys it touches, its arguments
    (already encoded as strings, as a driver sends them) and a trace label."""

    verb: str
    keys: tuple[str, ...]
    args: tuple[str, ...]
    label: str

    @classmethod
    def evalsha(cls, sha: str, keys: tuple[str, ...], args: tuple[str, ...],
                label: str) -> Command:
        return cls("EVALSHA", keys, (sha, *args), label)

    @classmethod
    def script_load(cls, source: str) -> Command:
        return cls("SCRIPT LOAD", (), (source,), "SCRIPT LOAD")

    @classmethod
    def plain(cls, verb: str, *args: str, keys: tuple[str, ...] = ()) -> Command:
        return cls(verb, keys, args, verb)


class Server:
    """A Redis server node in the simulation, executing on a backend."""

    def __init__(self, kernel: Kernel, backend: RedisBackend, trace: Trace) -> None:
        self.kernel = kernel
        self.backend = backend
        self.trace = trace
        self.script_cache: dict[str, str] = {}
        self.keys_expired = 0

    def execute(self, command: Command) -> Outcome:
        now_us = self.kernel.now
        self.expire_due(now_us)
        verb = command.verb
        if verb == "EVALSHA":
            body = self.script_cache.get(command.args[0])
            if body is None:
                return Outcome.failed(NOSCRIPT)
            return self.backend.run_script(body, command.keys, command.args[1:], now_us)
        if verb == "SCRIPT LOAD":
            source = command.args[0]
            sha = sha1(source)
            self.script_cache[sha] = source
            return Outcome.ok(sha)
        return self.backend.run_command((verb, *command.args), command.keys, now_us)

    def expire_due(self, now_us: int) -> None:
        """Drop keys whose virtual deadline has come (also before oracle reads)."""
        for key in self.backend.expire_due(now_us):
            self.keys_expired += 1
            self.trace.record(now_us, SERVER, 0, -1, "key_expired",
                              detail=key.removeprefix(self.backend.namespace))
