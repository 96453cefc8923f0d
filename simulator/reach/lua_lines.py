"""Which lines of a store's Lua script can run, and which did.

Redis runs Lua 5.1, and so does fakeredis (through lupa's ``lua51``): the
lines that can run are those the compiler gave an instruction, read from the
script's own bytecode (``string.dump``), in every function the script
defines. The compiler ends each function with a ``return`` of its own on the
line of its ``end``; that instruction is left out, so an ``end`` is never a
line "not reached" (a line the store's code put there is).

Which lines ran is told by a Lua line hook (``debug.sethook``) in a
fakeredis whose shim turns it on only while the store's script runs
(``LineHook``), its own lines numbered out of the script's way: only the
store's lines are counted, never the lab's shim around them. A real server has no
``debug`` library, so its runs are replayed here (``simulator.reach.replay``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import cache
from typing import Any

from simulator.backends.virtual_expiry import as_function

BODY_FIRST_LINE = 2
"""Where a store script's first line sits in the chunk a backend runs: the
chunk opens with ``... function(redis, KEYS, ARGV)`` on its first line
(``virtual_expiry.as_function``, in ``wrap`` and ``wrap_preloaded`` alike)."""

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


SHIM_LINES_FROM = 1_000_000
"""Where the replay's shim's own lines begin: its text is preceded by this
many line breaks, so a line number below it is a store script's."""
BODY_CALL = "local lab_ok, lab_reply = pcall(lab_body, lab_proxy, KEYS, ARGV)"
"""Where the shim runs the store's script (``virtual_expiry._SHIM_START``)."""


class LineHook:
    """A fakeredis server whose shim turns a Lua line hook on while a store
    script runs, and off after: the hook notes the lines of the script's
    chunk (``wrap_preloaded``'s, the script from its second line) and skips
    the shim's, numbered from ``SHIM_LINES_FROM``. ``take`` gives the lines
    the last script ran."""

    def __init__(self, client: Any, server: Any) -> None:
        from simulator.backends.virtual_expiry import PRELOADED_SHIM, shim_expression

        client.eval("return 1", 0)  # fakeredis builds its Lua runtime on first use
        runtime = getattr(server, "_lua_runtime", None)
        expected = getattr(server, "_lua_expected_globals", None)
        shim = shim_expression()
        if runtime is None or not isinstance(expected, set) or BODY_CALL not in shim:
            raise RuntimeError("this fakeredis keeps no Lua runtime the lab can hook: "
                               "store coverage needs fakeredis 2.3x or newer")
        hooked = shim.replace(BODY_CALL, "local lab_ok, lab_reply = "
                                         "lab_reach_run(lab_body, lab_proxy, KEYS, ARGV)")
        before = set(runtime.globals().keys())
        runtime.execute(
            "local seen = {}\n"
            f"local function hook(_, line) if line < {SHIM_LINES_FROM} then seen[line] = true "
            "end end\n"
            "local sethook = debug.sethook\n"
            "function lab_reach_run(body, proxy, keys, argv)\n"
            "  sethook(hook, 'l')\n"
            "  local ok, reply = pcall(body, proxy, keys, argv)\n"
            "  sethook()\n"
            "  return ok, reply\n"
            "end\n"
            "function lab_reach_take()\n"
            "  local taken = seen\n"
            "  seen = {}\n"
            "  return taken\n"
            "end\n"
            + f"{PRELOADED_SHIM} = " + "\n" * SHIM_LINES_FROM + hooked)
        expected.update(set(runtime.globals().keys()) - before)
        self._take = runtime.globals().lab_reach_take

    def take(self) -> set[int]:
        """The lines of the store script the last call ran (1 = its first)."""
        return {int(line) - BODY_FIRST_LINE + 1 for line in self._take().keys()}
