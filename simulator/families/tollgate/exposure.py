"""What the lab did in a tollgate run, as the oracle needs it to file damage
by the fault contract (``contract``) and to say what exposed the store's own.

The log keeps every message fault the network injected (by request and by
the transaction it hit), every holder the lab crashed and the faults the
scenario scheduled or rated (pauses, partitions, restarts). It decides
nothing from the ledger's record: it answers two questions the contract
asks, *did this call run without its caller reading the answer* (the
``ambiguous_*`` clauses) and *which fault of the lab's exposed damage the
store did* (``exposed_by``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from simulator.families.tollgate.contract import RAN_UNANSWERED

Exposure = tuple[str | None, str]
"""A fault's name and the call (or replica) it hit; ``(None, "")``: none."""


@dataclass(frozen=True, slots=True)
class LabFault:
    """One fault the lab did."""

    at_us: int
    tag: int
    """The request whose message it hit (``-1``: a background call; ``-3``:
    no request, e.g. a pause or a crash)."""
    what: str
    call: str
    until_us: int | None = None
    """When it stops acting (a pause's, a partition's, a restart's end), if later."""


NO_REQUEST = -3


class LabLog:
    """The faults of one run, in the order the lab did them."""

    def __init__(self, faults: Any = None) -> None:
        self.messages: list[LabFault] = []
        self.others: list[LabFault] = list(_scheduled(faults))
        self.rated: tuple[str, ...] = _rated(faults)
        self._calls: dict[tuple[int, str], set[str]] = {}
        self._message_times: list[int] = []
        """When each message fault happened, in order (``quiet_between``)."""

    def message(self, at_us: int, tag: int, what: str, call: str) -> None:
        self.messages.append(LabFault(at_us, tag, what, call))
        insort(self._message_times, at_us)
        self._calls.setdefault((tag, call), set()).add(what)

    def crash(self, at_us: int, replica: int) -> None:
        self.others.append(LabFault(at_us, NO_REQUEST, "crash", f"replica {replica}"))

    def quiet_since(self, at_us: int) -> bool:
        """Whether the lab did nothing from ``at_us`` on: no fault scheduled in
        the run at all (a pause or a partition begun earlier may last past
        it), none rated, and no message of any call lost, refused, slowed or
        timed out since."""
        return (not self.others and not self.rated
                and all(fault.at_us < at_us for fault in self.messages))

    def disturbed_until_us(self) -> int:
        """The last instant a fault of the run acts (0: none did): every window
        after it is quiet (``quiet_between``) unless a fault class is rated."""
        return max([0, *self._message_times[-1:],
                    *(max(fault.at_us, fault.until_us or 0) for fault in self.others)])

    def quiet_between(self, start_us: int, end_us: int, replicas: int) -> bool:
        """Whether the lab left the fleet alone from ``start_us`` to ``end_us``:
        no fault rated, no message fault, and no scheduled fault acting
        then but crashes of fewer than all ``replicas`` (the others go on)."""
        times = self._message_times
        first = bisect_left(times, start_us)
        if self.rated or (first < len(times) and times[first] <= end_us):
            return False
        crashed: set[str] = set()
        for fault in self.others:
            if fault.at_us > end_us or max(fault.at_us, fault.until_us or 0) < start_us:
                continue
            if fault.what != "crash":
                return False
            crashed.add(fault.call)
        return len(crashed) < replicas

    def ran_unanswered(self, tag: int, call: str) -> bool:
        """Whether a ``call`` of request ``tag`` may have run without its
        caller reading the answer, or run twice (``contract.RAN_UNANSWERED``)."""
        return bool(self._calls.get((tag, call), set()) & RAN_UNANSWERED)

    def exposed_by(self, tags: Iterable[int], at_us: int | None,
                   otherwise: Exposure = (None, "")) -> Exposure:
        """The fault that exposed damage first seen at ``at_us`` (``None``: at
        the end) on what requests ``tags`` did: the last call of those
        requests a message fault hit before then, named by the first fault
        that hit it (a lost reply, not the timeout that followed); else the
        last faulted call of any request; else the last pause, crash,
        partition or restart the lab did; else a fault class the scenario
        rates; else ``otherwise``."""
        related = set(tags)
        before = [fault for fault in self.messages if at_us is None or fault.at_us <= at_us]
        for pool in ([fault for fault in before if fault.tag in related], before):
            if pool:
                last = pool[-1]
                first = next(fault for fault in pool
                             if (fault.tag, fault.call) == (last.tag, last.call))
                return first.what, first.call
        others = [fault for fault in self.others if at_us is None or fault.at_us <= at_us]
        if others:
            return others[-1].what, others[-1].call
        if self.rated:
            return self.rated[0], ""
        return otherwise


def _scheduled(faults: Any) -> Iterable[LabFault]:
    """The scheduled faults that are not a message's (those the network reports)."""
    for fault in sorted(getattr(faults, "schedule", None) or (), key=lambda f: f.at):
        if fault.fault.startswith("lose_"):
            continue
        replicas = ([fault.replica] if fault.replica is not None else []) + list(fault.replicas)
        where = ", ".join(f"replica {replica}" for replica in replicas) or "the ledger"
        lasts = max(int(fault.duration or 0), int(fault.restart_after or 0),
                    int(fault.down_for))
        yield LabFault(int(fault.at), NO_REQUEST, fault.fault, where, int(fault.at) + lasts)


def _rated(faults: Any) -> tuple[str, ...]:
    if faults is None:
        return ()
    return tuple(name for name, value in faults if name not in ("schedule", "until")
                 and value is not None)
