"""Families: everything the lab knows about one ported system, as a plug-in.

A family is its store package under ``stores/`` plus one lab-side package,
``simulator.families.<family>``, whose ``FAMILY`` says, in one value:

* the request lifecycle a replica runs for each request (``serve``), which
  reports the truth to the oracle as it happens;
* how to build its oracle for a run (``oracle``);
* how the store's record reaches that oracle: for kinds kept on a server, an
  observer of the post-state of every command (``server_observer``); for
  kinds kept in the replica, an observer that reads the replica's store after
  each call (``replica_observer``); each compares the oracle's books with the
  stores at the end of the run;
* how its summary reads (``summary``), how ``replay --plot`` draws it
  (``timeline``), and its invariants (``invariants``: what ``hunt
  --reference`` and the counterfactual mode compare).

The core (kernel, network, server, faults, arrivals, run, trace, sweeps,
races, hunt, CLI) holds a ``Family`` and an ``Oracle``
(``simulator.oracle.protocol``) and names no family;
``tests/simulator/test_core_names_no_family.py`` keeps it so.

A store kind belongs to the family that speaks its ``protocol`` (the request
lifecycle it answers): a plugin's kind derived from a shipped one keeps the
shipped one's family, and a plugin may bring a whole family of its own with
``register_family``.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simulator.oracle.protocol import Oracle, ReplicaObserver, ServerObserver

if TYPE_CHECKING:
    from simulator.families.record_series import RecordSeries
    from simulator.fleet import Replica
    from simulator.scenario import Scenario
    from simulator.workload import Request
    from stores.registry import StoreKind

SHIPPED = ("axond_budget", "axond_leases", "av_state", "tollgate")
"""The families shipped with the lab, by package name under ``simulator.families``."""


@dataclass(frozen=True)
class SummaryLayout:
    """How a family's metrics read in the console table (``simulator.report``)."""

    run_facts: Callable[[StoreKind], dict[str, Any]]
    """Facts about the run the family adds to the summary's ``run`` group
    (e.g. where a cap is enforced), ahead of the oracle's metrics."""
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    """Titled groups of metric names: a plain name, ``*_suffix`` or
    ``*prefix_`` (a wildcard shows only the metrics that are not zero)."""


@dataclass(frozen=True)
class TimelineLanes:
    """How a family's requests and record are drawn: ``replay --plot``
    (``simulator.timeline``) and the HTML report (``simulator.html_report``)."""

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
    (``simulator.families.record_series``); both renderers draw it."""
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
    serve: Callable[[Replica, Any, Request], Awaitable[None]]
    """``serve(replica, store, request)``: one request's lifecycle on a replica."""
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
    (``simulator.run.COUNTED_EVENTS``): those only its kind of store meets."""
    oracle_facts: frozenset[str] = frozenset()
    """Its oracle's methods its lifecycle calls to record a fact, answering
    nothing: while the server holds queued commands they wait behind them
    (``simulator.pipeline``); any other call flushes the queue first."""


_REGISTERED: dict[str, Family] = {}
"""Families registered at run time by plugins, by protocol."""


def register_family(family: Family) -> Family:
    """Make ``family`` the one for kinds speaking ``family.protocol``: a
    plugin module calls this when imported. A protocol another family already
    speaks is refused, so a plugin never silently replaces a family."""
    if family.protocol in _shipped() or family.protocol in _REGISTERED:
        raise ValueError(f"a family for protocol {family.protocol!r} is already registered")
    _REGISTERED[family.protocol] = family
    return family


def _shipped() -> dict[str, Family]:
    # Imported on first use: a family's package imports the core, never the reverse.
    found = {}
    for name in SHIPPED:
        family = importlib.import_module(f"{__name__}.{name}").FAMILY
        found[family.protocol] = family
    return found


def families() -> dict[str, Family]:
    """Every family, by the protocol its kinds speak: the shipped ones, then plugins'."""
    return {**_shipped(), **_REGISTERED}


def family_of(kind: StoreKind) -> Family:
    """The family of a store kind; a clear ``ValueError`` when none speaks its protocol."""
    known = families()
    if kind.protocol not in known:
        raise ValueError(
            f"the store {kind.name!r} speaks protocol {kind.protocol!r}, which no family "
            f"handles (known: {', '.join(sorted(known))}); a plugin brings its family with "
            f"simulator.families.register_family")
    return known[kind.protocol]


def invariants_for(kind: StoreKind) -> tuple[Any, ...]:
    """The invariants of a store kind's family."""
    return family_of(kind).invariants
