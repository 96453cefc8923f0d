"""The contract a family implements: what the core holds of one ported system.

A ``Family`` says, in one value, everything the run needs of a family: the
request lifecycle a replica runs (``serve``), how to build its oracle, how
the store's record reaches that oracle (a server observer or a replica
observer, ``simulator.plugin.protocol``), how its summary reads, how its
timeline is drawn, and its invariants. The shipped families implement it in
``simulator.families.<family>``; a plugin may bring one of its own
(``simulator.families.register_family``). Everything below ``families/``
holds a ``Family`` and never names one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simulator.plugin.protocol import Oracle, Replica, ReplicaObserver, ServerObserver

if TYPE_CHECKING:
    from simulator.plugin.record_series import RecordSeries
    from simulator.scenario.model import Scenario
    from stores.registry import StoreKind


@dataclass(frozen=True)
class SummaryLayout:
    """How a family's metrics read in the console table (``simulator.present.report``)."""

    run_facts: Callable[[StoreKind], dict[str, Any]]
    """Facts about the run the family adds to the summary's ``run`` group
    (e.g. where a cap is enforced), ahead of the oracle's metrics."""
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    """Titled groups of metric names: a plain name, ``*_suffix`` or
    ``*prefix_`` (a wildcard shows only the metrics that are not zero)."""


@dataclass(frozen=True)
class TimelineLanes:
    """How a family's requests and record are drawn: ``replay --plot``
    (``simulator.present.timeline``) and the HTML report (``simulator.present.html_report``)."""

    served: str
    """The trace event that ends a served request's bar."""
    refused: str
    """The trace event that ends a refused request's bar."""
    served_label: str
    strayed_keys: Callable[[list[dict[str, Any]]], list[tuple[str, str]]]
    """``strayed_keys(samples)``: the keys whose record strays furthest from
    the truth, to show when no fault names a replica."""
    series: Callable[[list[dict[str, Any]], set[tuple[str, str]]], RecordSeries] | None = None
    """``series(samples, keys)``: the store's record of ``keys`` against the
    truth and the gap between them, from the per-key samples
    (``simulator.plugin.record_series``); both renderers draw it."""
    draw_record: Callable[[Any, list[dict[str, Any]], set[tuple[str, str]], int | None],
                          None] | None = None
    """``draw_record(axes, samples, keys, cap)``: a family's own matplotlib
    drawing of its record, for a plugin family with no ``series``."""
    cap: Callable[[Any], int | None] = lambda settings: None
    """``cap(settings)``: the line to draw across the record, if any."""
    violation_columns: tuple[str, ...] = ()
    """Columns of the aggregate sample row (``namespace == "*"``) that stay
    zero until the run's first damage: where ``replay --trace`` starts its story."""


@dataclass(frozen=True)
class Family:
    """One family, as the core uses it (see the module docstring)."""

    name: str
    protocol: str
    """The ``StoreKind.protocol`` its kinds declare."""
    serve: Callable[[Replica, Any, Any], Awaitable[None]]
    """``serve(replica, store, request)``: one request's lifecycle on a replica
    (``request``: a ``simulator.world.requests.Request``)."""
    oracle: Callable[[Scenario, StoreKind, Any], Oracle]
    """``oracle(scenario, kind, settings)``: a run's oracle."""
    server_observer: Callable[[Oracle, list[tuple[StoreKind, Any]], list[Any]],
                              ServerObserver]
    """``server_observer(oracle, layouts, keys)``: follows a server's keys for
    ``(kind, settings)`` layouts (several when a migration changes the kind)."""
    replica_observer: Callable[[Oracle], ReplicaObserver]
    """``replica_observer(oracle)``: follows every replica's in-process store."""
    summary: SummaryLayout
    timeline: TimelineLanes
    invariants: tuple[Any, ...]
    """The family's invariants (``simulator.families.<family>.invariants``)."""
    counted_events: tuple[str, ...] = ()
    """Trace events whose counts its summaries add to the core's
    (``simulator.run.summary.COUNTED_EVENTS``): those only its kind of store meets."""
    migration_totals: tuple[tuple[str, str], ...] = ()
    """``(summary key, attribute of the migration's report)``: what a finished
    operator migration of its kinds reports in the summary besides the core's
    ``migrations_completed`` and ``migration_reruns`` (the budget family: the
    spend it carried), summed over the run's migrations; 0 without one."""
    oracle_facts: frozenset[str] = frozenset()
    """Its oracle's methods its lifecycle calls to record a fact, answering
    nothing: while the server holds queued commands they wait behind them
    (``simulator.net.pipeline``); any other call flushes the queue first."""
