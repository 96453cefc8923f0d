"""Gateway replicas: one store instance each, their own clock, link and streams.

A replica incarnation is a kernel ``Owner``: crashing it drops every process
it runs. Its streams are named by replica index and incarnation, so a
restarted replica gets a new identity (fresh ids, fresh jitter) while every
other replica's randomness stays put.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.engine.kernel import Kernel, Owner
from simulator.engine.runtime import ReplicaClock, SimRuntime
from simulator.engine.streams import Streams
from simulator.engine.trace import Trace
from simulator.engine.traps import Sleep
from simulator.net.connections import MultiplexedConnection
from simulator.net.links import FaultClock, Link, LinkSettings, ReplicaNetwork
from simulator.net.redis_port import SimRedis
from simulator.net.service_port import SimServicePort
from simulator.plugin.family import Family
from simulator.plugin.protocol import Oracle, ReplicaObserver
from simulator.world.requests import Request, RequestSource
from stores.registry import StoreKind


@dataclass
class Replica:
    """One incarnation of one gateway replica: it serves each request with
    its family's lifecycle (``Family.serve``)."""

    index: int
    incarnation: int
    owner: Owner
    kernel: Kernel
    trace: Trace
    oracle: Oracle
    family: Family
    kind: StoreKind
    runtime: SimRuntime
    port: SimRedis | SimServicePort | None
    store_observer: ReplicaObserver | None = None
    """Reads the replica's own store after each call (stores kept in the
    replica; a shared store is observed by the server)."""
    store: Any = None
    settings: Any = None
    """The settings its store was built with (a lifecycle may need them:
    where a store that takes whole keys puts them)."""
    in_flight: set[int] = field(default_factory=set)
    """Requests this incarnation is serving: a crash ends them."""
    stopping: bool = False
    """Told to stop (an operator's graceful stop): takes no new requests."""
    booted_us: int | None = None
    """When its store booted (``None`` until it has): a family's oracle may
    judge whether a sound store would have booted then."""
    boot_refused: Any = None
    """Told of each boot refusal (``World.boot_refused``), to keep the first's traceback."""
    as_embedded: Any = str
    """A store's message as the embedded backend would give it (``World.as_embedded``)."""

    @property
    def call_timeout_us(self) -> int:
        """How long a caller on this replica waits for a reply (0 without a port)."""
        return self.port.link.settings.timeout_us if self.port is not None else 0

    def finished(self, number: int) -> None:
        self.in_flight.discard(number)

    @property
    def source(self) -> tuple[int, int]:
        """This incarnation as a source of record (its own store's state)."""
        return (self.index, self.incarnation)

    def observe_store(self, tag: int, touched: Any) -> None:
        """A call of request ``tag`` naming ``touched`` returned: for a store kept
        in the replica, the family reports what changed in it to the oracle."""
        if self.store_observer is not None:
            self.store_observer.after_call(self, tag, touched)

    def record(self, kind: str, request: Request, amount: int = 0, outcome: str = "") -> None:
        self.trace.record(self.kernel.now, self.index, self.incarnation, request.number, kind,
                          request.namespace, request.subject, amount, outcome)

    async def main(self, settings: Any, source: RequestSource, until_us: int,
                   boot_retry_us: int) -> None:
        """Boot the store, then take this replica's share of the traffic.

        A store that refuses to boot (its server did not answer, or its
        keyspace is in a state it must not serve) makes the gateway exit; its
        orchestrator starts it again after ``boot_retry_us``, like a crash loop.
        """
        self.settings = settings
        while True:
            try:
                self.store = await self.kind.build(self.port, self.runtime, settings)
                break
            except Exception as refusal:  # noqa: BLE001 - any boot failure is a crash loop
                if self.boot_refused is not None:
                    self.boot_refused(refusal)
                self.trace.record(self.kernel.now, self.index, self.incarnation, -1,
                                  "replica_boot_failed", outcome=type(refusal).__name__,
                                  detail=self.as_embedded(str(refusal))[:200])
                await Sleep(boot_retry_us)
        self.booted_us = self.kernel.now
        self.trace.record(self.kernel.now, self.index, self.incarnation, -1, "replica_started")
        serve = self.family.serve
        while (arrival := source.next_arrival(self.kernel.now)) is not None:
            at_us, request = arrival
            await Sleep(at_us - self.kernel.now)
            if self.kernel.now >= until_us or self.stopping:
                return
            self.in_flight.add(request.number)
            self.kernel.spawn(serve(self, self.store, request), self.owner,
                              "request", tag=request.number)


def start_replica(index: int, incarnation: int, *, kernel: Kernel, streams: Streams,
                  trace: Trace, oracle: Oracle, family: Family, kind: StoreKind, server: Any,
                  link_settings: LinkSettings, clock: ReplicaClock,
                  script_names: dict[str, str], network: ReplicaNetwork | None = None,
                  faults: FaultClock | None = None,
                  store_observer: ReplicaObserver | None = None) -> Replica:
    """Create an incarnation of replica ``index`` (its boot is up to the caller)."""
    owner = kernel.new_owner(f"replica-{index}.{incarnation}")
    runtime = SimRuntime(kernel, owner, clock,
                         ids=streams.get("replica", index, incarnation, "ids"),
                         jitter=streams.get("replica", index, incarnation, "jitter"))
    port = None
    if server is not None:
        network = network or ReplicaNetwork()

        def open_connection() -> MultiplexedConnection:
            # Each connection draws from a stream of its own, named by its
            # place among the replica's connections: opening one more does
            # not reshuffle another's latencies.
            network.connections_opened += 1
            number = network.connections_opened
            current = kernel.current
            trace.record(kernel.now, index, incarnation,
                         current.tag if current is not None else -1, "connection_opened",
                         detail=str(number))
            return MultiplexedConnection(
                kernel, server, trace, owner, index, incarnation,
                streams.get("link", index, incarnation, "connection", number), link_settings,
                network, faults)

        link_class = MultiplexedConnection if link_settings.multiplexed else Link
        link = link_class(kernel, server, trace, owner, index, incarnation,
                          streams.get("link", index, incarnation), link_settings, network, faults)
        port = (SimServicePort(link) if kind.service is not None
                else SimRedis(link, script_names, open_connection))
    return Replica(index, incarnation, owner, kernel, trace, oracle, family, kind, runtime, port,
                   store_observer if kind.per_replica else None)
