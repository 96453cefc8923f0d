"""Which lines of a store's Lua script can run, and which did.

Redis runs Lua 5.1, and so does fakeredis (through lupa's ``lua51``): the
lines that can run are those the compiler gave an instruction, read from the
script's own bytecode (``string.dump``), in every function the script
defines. The compiler ends each function with a ``return`` of its own on the
line of its ``end``; that instruction is left out, so an ``end`` is never a
line "not reached" (a line the store's code put there is).

Which lines ran is told by a Lua line hook (``debug.sethook``), in a
fakeredis whose runtime names the chunk of each store script it runs
(``LineHook``; the chunk is ``wrap_preloaded``'s): only a script of the
store is counted, never the lab's shim around it. A real server has no
``debug`` library, so its runs are replayed here (``simulator.reach.replay``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import cache
from typing import Any

from simulator.backends.virtual_expiry import as_function, wrap_preloaded

BODY_FIRST_LINE = 2
"""Where a store script's first line sits in the chunk a backend runs: the
chunk opens with ``... function(redis, KEYS, ARGV)`` on its first line
(``virtual_expiry.as_function``, in ``wrap`` and ``wrap_preloaded`` alike)."""
CHUNK_PREFIX = "=lab-store:"
"""What the line hook's chunks are named: this, then the script's number."""

_HEADER = b"\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00"
"""Lua 5.1's bytecode header on the platforms the lab runs on: little
endian, 4-byte int and instruction, 8-byte size_t and number."""


@cache
def _dumper() -> Any:
    from lupa import lua51

    runtime = lua51.LuaRuntime(encoding=None)
    return runtime.eval("function(source) return string.dump(assert(loadstring(source))) end")


def runnable_lines(body: str) -> frozenset[int]:
    """The lines of ``body`` (1 = its first) that hold an instruction, in any
    of its functions, besides each function's closing ``return``."""
    chunk = f"return {as_function(body)}"
    code = _dumper()(chunk.encode())
    if not code.startswith(_HEADER):
        raise ValueError("unexpected Lua bytecode header: the lab reads Lua 5.1's, "
                         "little endian, 64-bit")
    lines = set(_Reader(code, len(_HEADER)).function_lines())
    last = len(body.splitlines())
    return frozenset(line - BODY_FIRST_LINE + 1 for line in lines
                     if BODY_FIRST_LINE <= line < BODY_FIRST_LINE + last)


class _Reader:
    """Lua 5.1's dump of one function, read for its line information."""

    def __init__(self, code: bytes, at: int) -> None:
        self.code, self.at = code, at

    def _int(self) -> int:
        (value,) = struct.unpack_from("<i", self.code, self.at)
        self.at += 4
        return value

    def _skip_string(self) -> None:
        (size,) = struct.unpack_from("<Q", self.code, self.at)
        self.at += 8 + size

    def function_lines(self) -> Iterator[int]:
        """The lines of this function's instructions (its last, the
        compiler's own ``return``, left out) and of every function inside."""
        self._skip_string()  # source
        self.at += 4 + 4 + 4  # first and last line; upvalues, parameters, vararg, stack
        instructions = self._int()
        self.at += 4 * instructions
        for _ in range(self._int()):  # constants
            tag = self.code[self.at]
            self.at += 1
            if tag == 1:
                self.at += 1
            elif tag == 3:
                self.at += 8
            elif tag == 4:
                self._skip_string()
        nested = [list(self.function_lines()) for _ in range(self._int())]
        count = self._int()
        lines = struct.unpack_from(f"<{count}i", self.code, self.at)
        self.at += 4 * count
        for _ in range(self._int()):  # locals
            self._skip_string()
            self.at += 8
        for _ in range(self._int()):  # upvalue names
            self._skip_string()
        yield from lines[:-1]
        for inner in nested:
            yield from inner


class LineHook:
    """A fakeredis server's Lua runtime, counting the lines each store script
    runs: every chunk holding one of ``bodies`` is named after it, and a
    line hook notes the lines of chunks so named."""

    def __init__(self, server: Any, bodies: list[str]) -> None:
        runtime = server._lua_runtime
        self._numbers = {body: number for number, body in enumerate(bodies)}
        self._names = {wrap_preloaded(body).encode(): f"{CHUNK_PREFIX}{number}".encode()
                       for body, number in self._numbers.items()}
        self._seen = runtime.execute(
            "local seen = {}\n"
            "local getinfo = debug.getinfo\n"
            "debug.sethook(function(_, line)\n"
            "  local source = getinfo(2, 'S').source\n"
            f"  if source:sub(1, {len(CHUNK_PREFIX)}) == '{CHUNK_PREFIX}' then\n"
            "    local lines = seen[source]\n"
            "    if lines == nil then lines = {}; seen[source] = lines end\n"
            "    lines[line] = true\n"
            "  end\n"
            "end, 'l')\n"
            "return seen")
        server._lua_runtime = _Naming(runtime, self._names)

    def reached(self) -> dict[str, set[int]]:
        """The lines of each body run so far (1 = its first)."""
        found: dict[str, set[int]] = {}
        for body, number in self._numbers.items():
            lines = self._seen[f"{CHUNK_PREFIX}{number}".encode()]
            if lines is not None:
                found[body] = {int(line) - BODY_FIRST_LINE + 1 for line in lines.keys()}
        return found


class _Naming:
    """A Lua runtime that names a store script's chunk when fakeredis runs it
    (fakeredis calls ``execute`` with the whole chunk); the rest as the runtime."""

    def __init__(self, runtime: Any, names: dict[bytes, bytes]) -> None:
        self._runtime, self._names = runtime, names

    def execute(self, chunk: bytes, *args: Any) -> Any:
        name = self._names.get(chunk)
        if name is None:
            return self._runtime.execute(chunk, *args)
        return self._runtime.execute(chunk, *args, name=name)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._runtime, attribute)
