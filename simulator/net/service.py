"""The service node: a server that runs a service's transactions, not Redis commands.

A family whose store is a transactional service (a ledger on a database)
rather than Lua on Redis gets the same place in the simulation as a Redis
server: replicas reach it over the simulated network (``simulator.net.links``),
so a request lost on the way, a reply lost after the commit, a timeout, a
driver retry and a replica crash between two calls are the faults every
family already meets. What differs is what executes.

Rules kept here:

* One transaction executes at a time, atomically, in arrival order, at the
  virtual time it arrives: the node calls its ``ServiceBackend`` and nothing
  else runs meanwhile. The transaction commits before its reply leaves, so a
  lost reply is a commit the caller never hears of.
* A refusal is an answer, not a failure: the backend returns it as the reply's
  value and the caller's client raises it. Only transport faults travel as
  error messages (``REFUSED`` while the node is down).
* A restart keeps every committed transaction: a database's log makes a
  commit durable before it answers, so what a restart loses is what had not
  committed -- the transactions that arrive while the node is down are
  refused, never executed -- and never an acknowledged one (unlike a Redis
  restart, whose persistence model decides what survives).
* With an ``observer``, every transaction reports what it observed of the
  service's state to the family's oracle (``Outcome.observed``), as the Redis
  server reports post-states.
"""

from __future__ import annotations

from typing import Any, Protocol

from simulator.backends import Outcome
from simulator.engine.kernel import Kernel
from simulator.engine.trace import SERVER, Trace
from simulator.net.node import OneNode


class ServiceBackend(Protocol):
    """Where a service node's transactions run (in memory, or on a real database)."""

    namespace: str
    """A prefix to strip from replies in the trace (none for a service: ``""``)."""

    def execute(self, verb: str, args: tuple[Any, ...], now_us: int) -> Outcome:
        """Run transaction ``verb`` with ``args`` at virtual time ``now_us``, to its
        commit or refusal: a refusal is ``Outcome.ok`` of the refusal itself."""
        ...

    def read(self, coroutine: Any) -> Any:
        """Run a read of the lab's own (the observer's) to its end."""
        ...

    def close(self) -> None:
        """Release what the backend holds (a connection, its schema)."""
        ...


class ServiceNode(OneNode):
    """A service in the simulation: the network's ``server`` for a service family."""

    def __init__(self, kernel: Kernel, backend: ServiceBackend, trace: Trace,
                 observer: Any = None) -> None:
        self.kernel = kernel
        self.backend = backend
        self.trace = trace
        self.observer = observer
        self.down = False
        self.extra_latency_us = 0
        self.spike_ends: list[int] = []
        self.transactions = 0

    def execute(self, command: Any, tag: int = -1) -> Outcome:
        """Run one transaction now; the observer hears what it saw."""
        now_us = self.kernel.now
        outcome = self.backend.execute(command.verb, command.args, now_us)
        self.transactions += 1
        if self.observer is not None:
            self.observer.executed(outcome.observed, now_us, tag)
        return outcome

    @property
    def service(self) -> Any:
        """The service the node runs (what its observer reads the books of)."""
        return self.backend.service

    def read(self, coroutine: Any) -> Any:
        """Run one of the service's reads to its end, outside virtual time."""
        return self.backend.read(coroutine)

    def flush(self) -> None:
        """Nothing is ever queued: a transaction's reply is its commit."""

    def expire_due(self, now_us: int) -> None:
        """A service expires nothing by itself: its own sweeps are transactions."""

    def restart(self, keep_until_us: int | None, how: str) -> None:
        """Come back with every committed transaction (see the module docstring);
        ``keep_until_us`` and ``how``, a Redis persistence model's terms, do not apply."""
        self.trace.record(self.kernel.now, SERVER, 0, -1, "server_state_restored",
                          amount=0, outcome="durable")
