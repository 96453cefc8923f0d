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
(``simulator.plugin.protocol``) and names no family;
``tests/simulator/test_core_names_no_family.py`` keeps it so.

A store kind belongs to the family that speaks its ``protocol`` (the request
lifecycle it answers): a plugin's kind derived from a shipped one keeps the
shipped one's family, and a plugin may bring a whole family of its own with
``register_family``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from simulator.backends.redis_backend import SCRIPT_ERRORS
from simulator.plugin.family import Family, SummaryLayout, TimelineLanes
from simulator.scenario.conditions import Invariant

if TYPE_CHECKING:
    from stores.registry import StoreKind

__all__ = ["SHIPPED", "Family", "SummaryLayout", "TimelineLanes", "families", "family_of",
           "invariants_for", "register_family"]

SCRIPT_ERRORS_INVARIANT = Invariant(SCRIPT_ERRORS, store_only=True)
"""No script of the store fails: every error reply is the store's own bug
(the lab injects faults around scripts, never inside one), whatever else the
store makes of it (it may well answer "unavailable" and fail open or closed)."""

SHIPPED = ("axond_budget", "axond_leases", "av_state", "tollgate")
"""The families shipped with the lab, by package name under ``simulator.families``."""


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
    """The invariants of a store kind's family; for a kind on Redis, also that
    its scripts do not fail (``SCRIPT_ERRORS_INVARIANT``)."""
    core = (SCRIPT_ERRORS_INVARIANT,) if "redis" in kind.backends else ()
    return (*family_of(kind).invariants, *core)


def refuse_other_family(candidate: StoreKind, reference: StoreKind) -> None:
    """A reference store is compared with a candidate of its own family only."""
    if family_of(reference).name != family_of(candidate).name:
        raise ValueError(
            f"reference {reference.name!r}: of family {family_of(reference).name!r}, but the "
            f"scenario's store {candidate.name!r} is of {family_of(candidate).name!r}; "
            f"compare stores of one family")
