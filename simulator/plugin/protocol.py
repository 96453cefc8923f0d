"""The oracle as the core sees it: what it calls, and nothing a family adds.

The core (the world, the fleet, the server, the sampler, the run) never knows
which family's oracle it holds. It reports what it did to the oracle (a
request in flight cut short by a crash, a replica's memory lost), asks it for
samples and the summary, and hands the store's record to the family's
observers; everything else an oracle hears comes from its family's own
request lifecycle, which the core never reads.

Rules kept here:

* A method that records a fact answers nothing (``simulator.net.pipeline`` may
  queue it behind the server's commands); a method that answers records nothing.
* ``tag`` is the request number a command was sent for, ``-1`` for none
  (expiry, eviction, a restore), ``MIGRATION`` for an operator's migration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from simulator.engine.kernel import Kernel
    from simulator.net.server import Server
    from stores.registry import StoreKind

MIGRATION = -2
"""The tag of an operator's migration: its commands belong to no request."""


CORE_FACTS = frozenset({"aborted", "source_lost", "message_fault", "settings_in_force"})
"""The facts the core itself reports (below); a family adds its lifecycle's
(``Family.oracle_facts``)."""


class Replica(Protocol):
    """What a family's lifecycle and observers are given of one incarnation of a
    replica (``simulator.world.fleet.Replica`` is the one the world runs)."""

    index: int
    incarnation: int
    kernel: Kernel
    oracle: Oracle
    kind: StoreKind
    store: Any
    """The replica's store, as its kind built it."""
    settings: Any
    """The settings the store was built with."""
    call_timeout_us: int
    """How long a caller on this replica waits for a reply (0 without a port)."""
    port: Any
    """The store's data port (``simulator.net.redis_port.SimRedis`` or
    ``simulator.net.service_port.SimServicePort``), None for a store kept in
    the replica."""

    @property
    def source(self) -> tuple[int, int]:
        """This incarnation as a source of record: ``(index, incarnation)``."""

    def record(self, kind: str, request: Any, amount: int = 0, outcome: str = "") -> None:
        """Add an event of ``request`` to the trace."""

    def finished(self, number: int) -> None:
        """Request ``number`` is no longer in flight."""

    def observe_store(self, tag: int, touched: Any) -> None:
        """A call of request ``tag`` naming ``touched`` returned (stores kept in
        the replica: the family's replica observer reads what changed)."""


class Oracle(Protocol):
    """What the core calls on a family's oracle."""

    def replica_clocks(self, clocks: list[Any]) -> None:
        """The fleet's clocks by replica index (``ReplicaClock``), told once
        before the run starts: a store's deadlines are judged by them."""

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        """The network lost, refused, timed out or duplicated a message of
        request ``number`` (``MIGRATION``: of the operator's migration), or
        the lab killed the migration; ``what`` names the fault
        (``simulator.net.links.MESSAGE_FAULTS``, ``migration_killed``) and
        ``call`` the command it hit: its label (a script's name, a verb;
        ``connect`` for a connection that failed to open), empty when none;
        for a ``misaligned_reply``, ``RECEIVER<-ANSWERED``, the call that read
        the reply and the one it belonged to (``simulator.net.links.misread``)."""

    def aborted(self, number: int, now_us: int) -> None:
        """Request ``number`` ended without finishing (its replica crashed)."""

    def source_lost(self, source: Any, now_us: int) -> None:
        """A source of record vanished with its state (a crashed replica's memory)."""

    def settings_in_force(self, replica: int, changes: dict[str, Any], now_us: int) -> None:
        """Replica ``replica`` booted an incarnation whose settings differ from
        the scenario's by ``changes`` (field name to value; empty: back to the
        scenario's), an operator's ``reconfigure``: the requests it serves from
        now on are judged by them. Never told in a run without one."""

    def sample(self, now_us: int, per_key: bool) -> list[dict[str, Any]]:
        """The metrics at ``now_us``: one aggregate row and, with ``per_key``, one per key."""

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        """The flat metrics of the run, for ``summary.json``."""


class ServerObserver(Protocol):
    """Follows a shared store's record on the server (for its family's oracle)."""

    def attach(self, server: Any) -> None:
        """Told once, before anything executes, the server it follows: what it
        may read besides post-states (a Redis node's virtual deadlines,
        ``Server.deadline_us``; a service node's own books, ``ServiceNode.read``)."""

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        """A command ran; ``observed`` holds the post-states of its keys."""

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        """Keys vanished without a command: ``how`` is ``key_expired``, ``evicted``..."""

    def ledger_keys(self) -> list[str]:
        """Every key it follows (read afresh after a restore)."""

    def resync(self, read: dict[str, Any], now_us: int, how: str) -> None:
        """After a restore: every followed key's content as read afresh."""

    def check(self, server: Server) -> None:
        """At the end of a run: the oracle's books must be what the server holds;
        a difference is a lab bug (``SimulationError``)."""


class ReplicaObserver(Protocol):
    """Follows in-process stores' record, replica by replica (for its family's oracle)."""

    def after_call(self, replica: Replica, tag: int, touched: Any) -> None:
        """A call of request ``tag`` to ``replica``'s store returned: report what
        changed in the store (``touched``: what the call named, reported even
        if unchanged, as a command that only read is)."""

    def check(self, replicas: list[Replica]) -> None:
        """At the end of a run: the oracle's books must be what every live
        replica's store holds; a difference is a lab bug (``SimulationError``)."""
