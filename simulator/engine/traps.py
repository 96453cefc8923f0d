"""The trap vocabulary: the only things a simulated process ever yields.

A process is a plain coroutine. When it awaits one of these objects, the
object is handed to the kernel, which decides when and with what the process
resumes. Nothing else may reach the kernel: an asyncio future, a ``sleep`` from
another library or a bare ``yield`` is refused loudly (see ``Kernel``), because
it means code inside the simulation is waiting on something virtual time does
not control.

Starting and cancelling processes need no trap: they do not suspend the
caller, so the simulated runtime calls ``Kernel.spawn`` and ``Kernel.cancel``
directly.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any


class Trap:
    """Base of every trap: awaiting one yields it to the kernel."""

    __slots__ = ()

    def __await__(self) -> Generator[Trap, Any, Any]:
        return (yield self)


class Sleep(Trap):
    """Resume after ``delay_us`` of virtual time."""

    __slots__ = ("delay_us",)

    def __init__(self, delay_us: int) -> None:
        self.delay_us = delay_us

    def __repr__(self) -> str:
        return f"Sleep({self.delay_us!r})"


class Send(Trap):
    """Send ``command`` over ``link`` and resume with the reply, or with the
    error the caller's driver would raise (timeout, connection refused...)."""

    __slots__ = ("link", "command")

    def __init__(self, link: Any, command: Any) -> None:
        self.link = link
        self.command = command

    def __repr__(self) -> str:
        return f"Send({self.link!r}, {self.command!r})"


class Join(Trap):
    """Resume when ``process`` (a kernel ``Process``; not imported here, the kernel
    imports the traps) finishes, with its result or its exception; or
    with ``TimeoutError`` once ``timeout_us`` passes (the process runs on)."""

    __slots__ = ("process", "timeout_us")

    def __init__(self, process: Any, timeout_us: int | None = None) -> None:
        self.process = process
        self.timeout_us = timeout_us

    def __repr__(self) -> str:
        return f"Join({self.process!r}, timeout_us={self.timeout_us!r})"
