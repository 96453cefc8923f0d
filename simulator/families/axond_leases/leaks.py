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

from simulator.families.axond_leases.books import Fault, Key, Lease, LeaseRequest
from simulator.plugin.attribution import STORE_LOGIC

RELEASE_MAX_ATTEMPTS = 8
"""How many attempts the seed's release makes before it gives up
(``002_348438d99c360737.txt:47``)."""

DUPLICATES = frozenset({"call_retried", "duplicate_execution"})
"""Faults after which a request's own command may have run twice."""


@dataclass(frozen=True, slots=True)
class Leak:
    key: Key
    start_us: int
    end_us: int
    cause: str
    """Why the lease outlived its caller (``causes.LEAK_CAUSES``)."""
    lease: Lease

    @property
    def owner(self) -> int:
        return self.lease.owner

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
               grace: Grace, settled: bool = True) -> str | None:
    """Why ``lease`` counts though no live caller holds it, judged on what
    happened until ``until_us`` (when it stopped counting, or a moment of
    the run) and on what the store did about it, all run long: ``None``
    while it is no leak (held, granted in flight, released in flight).

    The lease fault contract (``contract``) says what a sound store does for
    a lease its caller cannot own: it gives it back (compensates an abandoned
    or ambiguous acquire; releases a completed one), and retries a release
    that failed. A leak while the store did that is the lab's, under the
    fault that made it necessary; a leak the store never acted on (no
    release or compensation ran, none failed) or never retried is
    ``store_logic`` (``exposing_fault`` names the fault that exposed it).

    ``settled``: judged once the run is over, with all the store did known.
    Judged mid-run (a sample of the series), a lease whose caller left within
    the network's timeout may still have its release on the way: no leak yet."""
    if owner is None:
        # No request's command wrote it: a restore of older data brought it
        # back, or the store made it up.
        return "server_data_loss" if lease.created_how == "data_loss" else STORE_LOGIC
    if owner.over_us is None or owner.over_us > until_us:
        return None
    if lease.created_how != "command" and lease.written_us >= owner.over_us:
        return "server_data_loss"  # released, then a restore brought it back
    if owner.aborted_us is not None and owner.aborted_us == owner.over_us:
        return "crash"  # its replica died while it waited or held
    done_us = owner.over_us
    acted = gave_back(lease, owner) or owner.ran_after_over > 0
    tried = owner.release_failures > 0 or owner.release_attempts_failed > 0
    crashed = (owner.aborted_us is not None
               and done_us <= owner.aborted_us <= done_us + grace.release_us)
    if lease.written_us >= owner.over_us and not owner.acquire_faults.isdisjoint(DUPLICATES):
        # A driver's re-send wrote it after its caller was gone and the
        # store's own invoke had ended: nothing of the store's can own it.
        return "abandoned_acquire"
    if abandoned(owner, grace):
        # Its caller could not own the lease: a sound store compensates it,
        # and retries a compensation that failed.
        if owner.untrusted is not None and not owner.untrusted.warranted:
            # Its answer came on a healthy connection the store retired: a
            # sound store would have read it, and its caller taken the lease.
            return STORE_LOGIC
        if (acted and not tried) or (tried and retried(lease, owner, grace)):
            return "abandoned_acquire"
        return "crash" if crashed else STORE_LOGIC
    if tried:
        if retried(lease, owner, grace):
            return "release_gave_up" if owner.release_attempts_failed >= 2 else "release_lost"
        return "crash" if crashed else STORE_LOGIC  # it stopped retrying too soon
    if (acted or not settled) and until_us - done_us <= grace.release_us:
        return None  # its release (or the compensation of a refusal) was on its way
    # What it had spawned (a release, a compensation) died with its replica.
    return "crash" if crashed and not acted else STORE_LOGIC


def abandoned(owner: LeaseRequest, grace: Grace) -> bool:
    """Whether a caller never took the lease its acquire may have written:
    denied (or admitted unenforced by the fail-open policy) after the lab
    faulted the acquire, or denied once its configured wait ran out."""
    if owner.denied_us is None and owner.enforced:
        return False  # it took its lease: its release gives it back
    waited_out = (grace.acquire_timeout_us is not None and owner.denied_us is not None
                  and owner.denied_us - owner.arrived_us >= grace.acquire_timeout_us)
    return bool(owner.acquire_faults) or waited_out


def gave_back(lease: Lease, owner: LeaseRequest) -> bool:
    """Whether the owner's own command (its release, its compensation) removed ``lease``."""
    return lease.removed_how == "command" and lease.removed_by == owner.number


def retried(lease: Lease, owner: LeaseRequest, grace: Grace) -> bool:
    """Whether the store kept trying after a failed release attempt, as the
    seed requires (up to ``RELEASE_MAX_ATTEMPTS`` attempts, retried on
    fresh connections until the window closes): a later attempt landed, all
    of them failed, or the lease stopped counting before the next one was
    due (within the network's timeout of the last failure); or the attempt
    read another release's reply, which a sound store cannot tell from its
    own (the release script echoes nothing)."""
    if gave_back(lease, owner) or owner.ran_after_over > 0:
        return True  # a later attempt landed (or came after the lease had gone)
    if owner.release_misaligned:
        return True  # it read another release's reply as its own success: no echo to check
    if owner.release_attempts_failed >= RELEASE_MAX_ATTEMPTS:
        return True  # every attempt the seed makes failed
    failed_us = owner.release_failed_us
    # The lease stopped counting before the next attempt was due.
    return failed_us is not None and lease.deadline_us - failed_us <= grace.release_us


def exposing_fault(lease: Lease, owner: LeaseRequest | None, grace: Grace) -> Fault | None:
    """The fault that exposed a store-logic leak of ``lease``: the one on its
    release when one failed, else the one that made its acquire abandoned."""
    if owner is None:
        return None
    if owner.release_fault is not None:
        return owner.release_fault
    return owner.acquire_fault


def leaks_of(lease: Lease, owner: LeaseRequest | None, end_us: int,
             grace: Grace) -> list[Leak]:
    """The spells ``lease`` leaked, once the run is over at ``end_us``: none
    if it never did; one, filed by ``leak_cause``; or two when it counted
    past the TTL its writer was configured with, the part past that the
    store's own (it wrote a deadline a lease may not have)."""
    counted_until = lease.counted_until(end_us)
    start = lease.written_us
    if owner is not None:
        if owner.over_us is None:
            return []
        start = max(start, owner.over_us)
        if lease.counts_at(end_us) and end_us - start <= grace.release_us:
            return []  # the run ended with its release possibly on its way
    if counted_until <= start:
        return []
    cause = leak_cause(lease, owner, counted_until, grace)
    if cause is None:
        return []
    latest = latest_honest_us(lease, owner)
    if latest is None or latest >= counted_until or cause == STORE_LOGIC:
        return [Leak(lease.key, start, counted_until, cause, lease)]
    overstayed = Leak(lease.key, max(start, latest), counted_until, STORE_LOGIC, lease)
    if latest <= start:
        return [overstayed]
    return [Leak(lease.key, start, latest, cause, lease), overstayed]


def latest_honest_us(lease: Lease, owner: LeaseRequest | None) -> int | None:
    """When ``lease`` must stop counting at the latest: its writer's clock
    when the script ran plus the configured TTL (a millisecond's rounding
    allowed); None when no TTL is known or its deadline is within it."""
    if owner is None or owner.honest_deadline_ms is None:
        return None
    latest_ms = owner.honest_deadline_ms + (lease.written_us - owner.arrived_us) // 1_000 + 1
    if lease.deadline_ms <= latest_ms:
        return None
    return lease.deadline_us - (lease.deadline_ms - latest_ms) * 1_000


def peak_concurrent(leaks: list[Leak]) -> int:
    """The most leases leaked at one instant, over ``leaks`` of one key."""
    changes = sorted([(leak.start_us, 1) for leak in leaks]
                     + [(leak.end_us, -1) for leak in leaks])
    level = peak = 0
    for _, delta in changes:
        level += delta
        peak = max(peak, level)
    return peak
