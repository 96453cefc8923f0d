"""Fault contracts: what a *sound* store may suffer from each thing the lab
does, so that a fault is blamed only for that (DESIGN section 12).

A family writes its contract down from its seed, as data: one ``Clause`` per
thing the lab does (a fault class, an operator action), naming the cause its
oracle files the allowed damage under, the damage a sound store may suffer,
what it must never suffer, and the seed lines that say so. The oracle files
damage inside a clause under the clause's cause; damage beyond every clause
is ``store_logic``, *exposed by* the fault that made it show (a store bug
that needs a fault to show is still the store's). ``Exposures`` keeps those
exposures as the oracle finds them, and writes, for each invariant whose
``store_logic`` part is not zero, one text entry in the summary
(``<metric>_exposed_by``: ``"reply_lost on settle_v1"``, or ``"no fault"``)
that the verdict line, the HTML report and ``docs/metrics.md`` read. It
also keeps where the store's damage began: the earliest call after which
the store's record and the truth parted (``BEGAN_KEYS``), where ``replay
--trace`` starts its story and the HTML report puts its mark.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NO_FAULT = "no fault"
"""What exposed store-logic damage that no fault of the lab's touched."""

EXPOSED_BY_SUFFIX = "_exposed_by"
"""The summary entry naming what exposed an invariant's store-logic damage:
``<metric>_exposed_by`` (see ``exposed_by_key``)."""


BEGAN_AT = "store_logic_began_at_us"
BEGAN_REQUEST = "store_logic_began_request"
BEGAN = "store_logic_began"
BEGAN_KEYS = (BEGAN_AT, BEGAN_REQUEST, BEGAN)
"""Where the store's own damage began: the virtual time (µs) and the request
of the first call after which its record and the truth parted, and that call
in words (``settle_v1 on replica 3 for request 42: asked 5,000, recorded 0``)."""


@dataclass(frozen=True, slots=True)
class Began:
    """The first call after which the store's record and the truth parted."""

    at_us: int
    request: int
    call: str
    """In words: the call (script or transaction), the replica, the amounts
    asked for and the amounts the store recorded."""


def exposed_by_key(metric: str) -> str:
    """The summary entry that names what exposed ``metric``'s store-logic part."""
    return metric + EXPOSED_BY_SUFFIX


@dataclass(frozen=True, slots=True)
class Clause:
    """One clause of a family's fault contract."""

    lab_did: str
    """What the lab did, in words (``lost a settle reply``)."""
    cause: str
    """The cause the oracle files the allowed damage under (``settlement_lost``);
    ``store_logic`` for a clause that allows nothing: whatever damage follows
    is the store's."""
    may_suffer: str
    """The damage a sound store may suffer from it (``nothing`` when none)."""
    never: str
    """What a sound store never suffers from it, whatever else happens."""
    seed: tuple[str, ...]
    """Where the seed says so: ``path:line`` or ``path:first-last`` under
    ``../shared/seeds/``."""


@dataclass(frozen=True, slots=True)
class Contract:
    """A family's fault contract: its clauses, in the order the docs list them."""

    family: str
    clauses: tuple[Clause, ...]

    def clause(self, lab_did: str) -> Clause:
        for clause in self.clauses:
            if clause.lab_did == lab_did:
                return clause
        raise KeyError(f"the {self.family} contract has no clause for {lab_did!r}")

    @property
    def causes(self) -> tuple[str, ...]:
        """Every cause a clause allows damage under."""
        return tuple(dict.fromkeys(clause.cause for clause in self.clauses))


def exposure(fault: str | None, call: str = "") -> str:
    """How an exposure reads: ``reply_lost on settle_v1``; ``no fault``."""
    if not fault:
        return NO_FAULT
    return f"{fault} on {call}" if call else fault


class Exposures:
    """The store-logic damage of a run by the fault that exposed it, per
    invariant: the oracle adds each part as it files it."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.began: Began | None = None

    def add(self, metric: str, amount: float, fault: str | None = None,
            call: str = "") -> None:
        """``amount`` of ``metric``'s store-logic part, exposed by ``fault`` on ``call``."""
        if amount:
            self._parts[metric][exposure(fault, call)] += amount

    def parted(self, at_us: int, request: int, call: str) -> None:
        """The store's record and the truth parted after a call (see ``Began``):
        the earliest one is kept."""
        if self.began is None or at_us < self.began.at_us:
            self.began = Began(at_us, request, call)

    def of(self, metric: str) -> dict[str, float]:
        """``metric``'s store-logic part by exposure, the largest first."""
        parts = self._parts.get(metric, {})
        return dict(sorted(parts.items(), key=lambda item: (-abs(item[1]), item[0])))

    def summary(self, metrics: Iterable[str],
                store_logic: Mapping[str, Any]) -> dict[str, str | int]:
        """For each of ``metrics`` whose store-logic part (``store_logic[metric]``)
        is not zero, what exposed the largest share of it; and, when any is,
        where the store's damage began."""
        found = {}
        for metric in metrics:
            if not store_logic.get(metric):
                continue
            parts = self.of(metric)
            found[exposed_by_key(metric)] = next(iter(parts), NO_FAULT)
        if found and self.began is not None:
            found.update({BEGAN_AT: self.began.at_us, BEGAN_REQUEST: self.began.request,
                          BEGAN: self.began.call})
        return found
