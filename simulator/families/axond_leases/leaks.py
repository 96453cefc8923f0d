"""Leaked leases: a lease the store counts that no live caller holds, and why.

A lease leaks from the moment its owner is over (denied, aborted by a crash,
or done with its work) until the store stops counting it (removed, or past
its deadline). Two spells are not leaks:

* the grant in flight: the owner is still waiting for its acquire's answer;
* the release in flight: the owner completed (or was refused, and the store
  compensates the lease it wrote), nothing the lab did touched its messages,
  and the store stopped counting the lease within ``Grace.release_us`` (the
  network's timeout: a call that takes longer has failed, and the network
  would have said so). An ideal limiter, too, learns of a release only when
  it lands.

The cause is taken from what the lab did to the owner (``causes.LEAK_CAUSES``).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.families.axond_leases.books import Key, Lease, LeaseRequest
from simulator.plugin.attribution import STORE_LOGIC


@dataclass(frozen=True, slots=True)
class Leak:
    key: Key
    start_us: int
    end_us: int
    cause: str
    """Why the lease outlived its caller (``causes.LEAK_CAUSES``)."""

    @property
    def lease_seconds(self) -> float:
        return (self.end_us - self.start_us) / 1e6


@dataclass(frozen=True, slots=True)
class Grace:
    """How long a done caller's lease may honestly keep counting, and the
    configured wait of a caller for its acquire."""

    release_us: int
    """The network's timeout: how long a release may take to land."""
    acquire_timeout_us: int | None
    """The store's configured caller timeout (``None``: not known)."""


def leak_cause(lease: Lease, owner: LeaseRequest | None, until_us: int,
               grace: Grace) -> str | None:
    """Why ``lease`` counts though no live caller holds it, judged on what
    happened until ``until_us`` (when it stopped counting, or now); ``None``
    while it is no leak (held, granted in flight, released in flight)."""
    if owner is None:
        # No request's command wrote it: a restore of older data brought it
        # back, or the store made it up.
        return "server_data_loss" if lease.created_how == "data_loss" else STORE_LOGIC
    if owner.over_us is None:
        return None
    if lease.created_how != "command" and lease.written_us >= owner.over_us:
        return "server_data_loss"  # released, then a restore brought it back
    if owner.aborted_us is not None and owner.aborted_us == owner.over_us:
        return "crash"  # its replica died while it waited or held
    if owner.denied_us is not None:
        waited_out = (grace.acquire_timeout_us is not None
                      and owner.denied_us - owner.arrived_us >= grace.acquire_timeout_us)
        if owner.acquire_faults or waited_out:
            return "abandoned_acquire"
        done_us = owner.denied_us
    else:
        assert owner.completed_us is not None
        if owner.release_attempts_failed >= 2:
            return "release_gave_up"
        if owner.release_failures:
            return "release_lost"
        done_us = owner.completed_us
    if until_us - done_us <= grace.release_us:
        return None  # its release (or the compensation of a refusal) is, or was, on its way
    crashed = (owner.aborted_us is not None and owner.aborted_us < until_us
               and owner.aborted_us - done_us <= grace.release_us)
    # What it had spawned (a release, a compensation) died with its replica.
    return "crash" if crashed else STORE_LOGIC


def leak_of(lease: Lease, owner: LeaseRequest | None, end_us: int,
            grace: Grace) -> Leak | None:
    """The spell ``lease`` leaked, once the run is over at ``end_us``; ``None``
    if it never did."""
    counted_until = lease.counted_until(end_us)
    start = lease.written_us
    if owner is not None:
        if owner.over_us is None:
            return None
        start = max(start, owner.over_us)
    if counted_until <= start:
        return None
    cause = leak_cause(lease, owner, counted_until, grace)
    if cause is None:
        return None
    return Leak(lease.key, start, counted_until, cause)


def peak_concurrent(leaks: list[Leak]) -> int:
    """The most leases leaked at one instant, over ``leaks`` of one key."""
    changes = sorted([(leak.start_us, 1) for leak in leaks]
                     + [(leak.end_us, -1) for leak in leaks])
    level = peak = 0
    for _, delta in changes:
        level += delta
        peak = max(peak, level)
    return peak
