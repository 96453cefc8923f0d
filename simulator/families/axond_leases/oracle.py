"""The lease oracle: the callers' truth against the store's lease hashes.

Two streams of facts, as for every family (``docs/metrics.md``):

* **the truth**, from the gateways (``lifecycle``) and the lab: a request
  arrived, was admitted (with a lease, or unenforced by the fail-open
  policy) or denied, completed its work, or was aborted by a crash; and
  every fault the lab did to its messages (``message_fault``). Per key, the
  callers *holding* a permit at every instant are the admitted ones not yet
  completed or aborted.
* **the store's record**: after every command the server reports the lease
  fields it changed (``observer``), tagged with the request the command was
  sent for; expiry, restores and evictions likewise. A lease belongs to the
  request whose command wrote it, never to whoever its id names. It counts
  while it is in the hash and its deadline has not passed.

Rules kept here:

* **Concurrency excess** is ``max(0, holding - max_in_flight)`` per key,
  integrated over time (``excess``); its causes are those of the callers
  holding without a counted lease, and past them the store's.
* **Leaked leases** are counted leases no live caller holds (``leaks``):
  from the moment their owner is over until the store stops counting them,
  a release on its way excepted.
* **A false denial** is an *exceeded* answer while an ideal limiter had room
  when the store decided (its acquire ran): fewer than ``max_in_flight``
  callers holding, waiting for a grant the store already made, or done with
  a release still (honestly) on its way; those are the callers the ideal
  limiter knows of. When no acquire of it ran, it is judged at the denial.
* **Blame comes from what the lab did** (``causes``): a lease expired only
  if the store wrote an honest deadline (the writer's clock at arrival plus
  the configured TTL) and it passed, or a reclaim came at or after it by the
  reclaiming replica's clock; a release failed only if the lab failed a
  message of it; otherwise the store is to blame (``store_logic``).
* **An answer read off a retired connection** (``retirements``): a refusal
  is the store's (a sound store answers unavailable); a fail-open admission
  is the policy's only if the connection's retirement was warranted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from simulator.engine.runtime import EPOCH_MS
from simulator.families.axond_leases.books import (
    HOLDING,
    NO_REQUEST,
    OVER,
    WAITING,
    Fault,
    Judged,
    Key,
    KeyBook,
    Lease,
    LeaseRequest,
    Untrusted,
)
from simulator.families.axond_leases.causes import (
    ATTEMPT_ENDS,
    CALL_FAILURES,
    CALLER_CANCELLED,
    DENIAL_CAUSES,
    EXCESS_CAUSES,
    LAB_LEAK_CAUSES,
    LEAK_CAUSES,
)
from simulator.families.axond_leases.excess import CONFIG_CHANGE, Excess, Limits, concurrency_excess
from simulator.families.axond_leases.invariants import INVARIANTS
from simulator.families.axond_leases.leaks import (
    DUPLICATES,
    Grace,
    Leak,
    exposing_fault,
    leak_cause,
    leaks_of,
    peak_concurrent,
)
from simulator.families.axond_leases.retirements import judge_retirement, unknown_retirement
from simulator.net.links import misread
from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import Exposures
from simulator.scenario.model import Scenario
from stores.registry import StoreKind

ACQUIRE_CALLS = frozenset({"acquire", ""})
"""The calls a fault on a denied request's message hit its acquire with (an
invoke its caller stopped waiting for runs on); any other (its release
script, a fresh connection's connect, a script load) is its compensation.
``""``: not told (judged as its acquire, as before calls were told)."""

SHARED_KEY = "replicas_sharing_key"
"""What the lab did that exposes a store whose replicas overwrite or remove
each other's live leases: it ran callers of one key on several replicas."""


@dataclass(frozen=True, slots=True)
class StoreLogic:
    """Why a holder holds uncounted when it is the store's own doing: with
    the fault that exposed it and where the store's record and the truth parted."""

    fault: Fault | None
    at_us: int
    request: int
    call: str


Label = str | StoreLogic
"""The cause a spell of uncounted holding is filed under."""

SAMPLED = ("callers_holding", "leases_counted", "leases_leaked", "callers_uncounted",
           "concurrency_excess")
"""The per-key columns of the metrics series (the aggregate row sums them)."""


HEALTHY_WINDOW_US = 5_000_000
"""How long before a request arrived the lab must have failed no call of its
replica for an unavailable answer to be unwarranted: past every timer of the
seed's (the caller's timeout, the invoke's liveness budget, a replacement
connection's connect timeout and the release budget are all under a second),
so no recovery a fault began can still be under way."""
NO_GENERATION = -1
"""The generation of an unavailable answer that no retirement explains."""


class LeaseOracle:
    """The oracle of a concurrency-lease store (see the module docstring)."""

    def __init__(self, max_in_flight: int, lease_ttl_ms: int | None = None,
                 release_grace_us: int = 1_000_000,
                 acquire_timeout_us: int | None = None, invoke_cap: int | None = None,
                 lab_faults: Any = None) -> None:
        self.max_in_flight = max_in_flight
        self.lease_ttl_ms = lease_ttl_ms
        self.grace = Grace(release_grace_us, acquire_timeout_us)
        self.clocks: list = []
        """Every replica's clock, by index (told once by the run)."""
        self.books: dict[Key, KeyBook] = {}
        self.requests: dict[int, LeaseRequest] = {}
        self.counts: Counter = Counter()
        self.holding = 0
        self.holding_peak = 0
        self.now_us = 0
        """The latest time a fact was heard at (a message fault comes with none)."""
        self.accepted_misaligned: list[tuple[int, int]] = []
        self.hashes_without_ttl: dict[Key, tuple[int, int]] = {}
        """Each lease hash a command left with no expiry: when, and by which request."""
        """``(request, when)``: each caller that took another command's grant."""
        self.provisional_false_denials = 0
        """False denials as judged when they happened, for the metrics series
        (the summary judges them again once what the store did is known)."""
        self.denials: list[tuple[LeaseRequest, Judged]] = []
        """Every *exceeded* answer, with its key as the acquire found it:
        judged at the end, once what the store did with its leases is known."""
        self.replica_faults: dict[int, list[Fault]] = {}
        """Every fault the lab did to a request's messages, by its replica, in
        order: what may have failed (or exposes) a replica's shared connection."""
        self.waiting_on: Counter[int] = Counter()
        """How many callers of each replica wait for their acquire's answer."""
        self.untagged_faults: list[Fault] = []
        """Faults on calls of no request (a replacement connection's opening)."""
        self.invoke_cap = invoke_cap
        self.spells = list(fault_spells(lab_faults))
        """``(from, until, replicas)`` of every fault the scenario schedules
        beyond a message's (``None``: the lab does some at random, any time)."""
        self.replica_limits: dict[int, int] = {}
        self.replica_ttls: dict[int, int] = {}
        """The ``max_in_flight`` and lease TTL of each replica an operator
        reconfigured (``settings_in_force``): its requests are judged by them."""
        self.reconfigured_replicas: set[int] = set()
        self.floors: list[tuple[int, int]] = []
        """``(time, the lowest limit in force from then on)``, once an operator
        changed ``max_in_flight`` (empty until then: the limit is one number)."""
        self.first_change_us: int | None = None

    # -- what the core tells every oracle ------------------------------------

    def replica_clocks(self, clocks: list) -> None:
        self.clocks[:] = clocks

    def clock_ms(self, replica: int, now_us: int) -> int:
        """Replica ``replica``'s clock at true time ``now_us``."""
        if 0 <= replica < len(self.clocks):
            return self.clocks[replica].now_ms(now_us)
        return EPOCH_MS + now_us // 1_000

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        """The lab did ``what`` to a message of request ``number``, of the
        command ``call``: to its acquire while it waited or held (or, late,
        once it was over), to its compensation once denied, to its release
        once completed."""
        call, answered = misread(call)
        if what == "misaligned_reply":
            self.counts["misaligned_replies"] += 1
        request = self.requests.get(number)
        if request is None:
            # A call of no request's (a replacement connection's opening):
            # any replica's shared connection may be the one it failed.
            self.untagged_faults.append(Fault(what, call, self.now_us))
            return
        if what == "misaligned_reply":
            self._shifted(request, call, answered)
        fault = Fault(what, call, self.now_us)
        self.replica_faults.setdefault(request.replica, []).append(fault)
        if self._hits_release(request, call):
            # Its release, or the compensation of a denied acquire.
            failed = what in CALL_FAILURES or what in ATTEMPT_ENDS
            request.release_failures += what in CALL_FAILURES
            request.release_attempts_failed += what in ATTEMPT_ENDS
            if failed:
                request.release_failed_us = self.now_us
                if request.release_fault is None:
                    request.release_fault = fault
            return
        if what not in request.acquire_faults:
            request.acquire_faults = request.acquire_faults | {what}
            if request.acquire_fault is None:
                request.acquire_fault = fault
        if what == "misaligned_reply" and request.state == WAITING:
            request.misaligned = True

    @staticmethod
    def _hits_release(request: LeaseRequest, call: str) -> bool:
        """Whether a fault on ``call`` hit ``request``'s release or compensation
        (else its acquire): the release script always; its acquire script
        never; another call (a connect, a script load) while it waits is its
        acquire's, once it holds or is over its release's; a call not told
        is its release once it completed."""
        if call == "release":
            return True
        if call == "acquire":
            return False
        if call == "":
            return request.completed_us is not None
        return request.state != WAITING

    @staticmethod
    def _found_its_lease_gone(request: LeaseRequest, now_us: int,
                              changes: dict[str, int | None] | None) -> bool:
        """Whether a command of an over request that wrote nothing ran when its
        lease no longer counted (expired, reclaimed): a release that came too
        late to remove it. One that ran while the lease still counted and left
        it is no release of it (a removal by its own command is seen as such)."""
        if any(deadline is not None for deadline in (changes or {}).values()):
            return False  # a late run of its acquire wrote a lease
        lease = request.lease
        return lease is None or not lease.counts_at(now_us)

    def _shifted(self, request: LeaseRequest, call: str, answered: str) -> None:
        """``answered``'s reply misaligned onto ``request``'s ``call``. A
        release that read another release's reply (an integer, like its own:
        the release script echoes nothing) cannot tell it from its own
        success; one that read an acquire's reply (a pair) knows its attempt
        failed, and must retry."""
        if self._hits_release(request, call):
            request.release_misaligned = answered not in ACQUIRE_CALLS

    def aborted(self, number: int, now_us: int) -> None:
        """Request ``number``'s replica crashed: it stops waiting or holding;
        if it was already over, what it had spawned (its release, its
        compensation) died with the replica."""
        request = self.requests.get(number)
        if request is None:
            return
        if request.state == OVER:
            if request.aborted_us is None:
                request.aborted_us = now_us
            return
        self.counts["requests_aborted_by_crash"] += 1
        request.aborted_us = now_us
        self._over(request, now_us)

    def source_lost(self, source: Any, now_us: int) -> None:
        """Leases are kept on the server only: a replica's memory holds none."""

    def settings_in_force(self, replica: int, changes: dict[str, Any], now_us: int) -> None:
        """Replica ``replica`` now runs settings an operator changed by
        ``changes`` (field names; empty: the scenario's again): its requests
        are judged by its ``max_in_flight`` and lease TTL."""
        if "max_in_flight" in changes:
            self.replica_limits[replica] = changes["max_in_flight"]
        else:
            self.replica_limits.pop(replica, None)
        if "lease_ttl_ms" in changes:
            self.replica_ttls[replica] = changes["lease_ttl_ms"]
        else:
            self.replica_ttls.pop(replica, None)
        if changes:
            self.reconfigured_replicas.add(replica)
            if self.first_change_us is None:
                self.first_change_us = now_us
        else:
            self.reconfigured_replicas.discard(replica)
        if "max_in_flight" in changes or self.floors:
            self.floors.append((now_us, self.floor()))

    def floor(self) -> int:
        """The lowest ``max_in_flight`` any replica runs with now."""
        return min([self.replica_limits.get(index, self.max_in_flight)
                    for index in range(len(self.clocks))] or [self.max_in_flight])

    def limit_of(self, request: LeaseRequest) -> int:
        """The ``max_in_flight`` ``request``'s replica ran with."""
        return request.limit or self.max_in_flight

    def _exposing(self, request: LeaseRequest) -> Fault | None:
        """What exposed store-logic damage to ``request``: the first fault on
        its acquire, else the operator's change when its replica ran it."""
        if request.acquire_fault is not None or not request.reconfigured:
            return request.acquire_fault
        return Fault(CONFIG_CHANGE, "reconfigure", request.arrived_us)

    # -- facts from the lifecycle --------------------------------------------

    def book(self, key: Key) -> KeyBook:
        book = self.books.get(key)
        if book is None:
            book = self.books[key] = KeyBook(key)
        return book

    def arrived(self, number: int, key: Key, replica: int, now_us: int) -> None:
        self.now_us = max(self.now_us, now_us)
        self.counts["requests_arrived"] += 1
        self.book(key)
        ttl_ms = self.replica_ttls.get(replica, self.lease_ttl_ms)
        honest = (None if ttl_ms is None else self.clock_ms(replica, now_us) + ttl_ms)
        self.requests[number] = LeaseRequest(
            number, key, replica, now_us, honest,
            limit=self.replica_limits.get(replica, self.max_in_flight),
            reconfigured=replica in self.reconfigured_replicas)
        self.waiting_on[replica] += 1

    def admitted(self, number: int, enforced: bool, now_us: int) -> None:
        """The caller took its permit: with a lease, or unenforced (fail-open)."""
        self.now_us = max(self.now_us, now_us)
        request = self.requests[number]
        book = self.book(request.key)
        self.counts["requests_admitted"] += 1
        if not enforced:
            self.counts["requests_admitted_unenforced"] += 1
            self._unavailable_unwarranted(request, now_us)
        if request.misaligned and enforced:
            # It took a lease id from another command's reply (a fail-open
            # admission after one acted on the policy, not on the reply).
            self.counts["misaligned_results_accepted"] += 1
            self.accepted_misaligned.append((number, now_us))
        self._stop_waiting(request)
        request.state, request.enforced, request.admitted_us = HOLDING, enforced, now_us
        book.holding.add(number)
        book.holder_changes.append((now_us, 1))
        book.holder_limits.append((now_us, 1, self.limit_of(request)))
        self.holding += 1
        self.holding_peak = max(self.holding_peak, self.holding)
        lease = request.lease
        if lease is None or not lease.counts_at(now_us):
            self._uncount(request, now_us, self._uncounted_cause(request, lease))

    def denied(self, number: int, reason: str, now_us: int) -> None:
        """The caller was refused: ``exceeded`` or ``store_unavailable``."""
        self.now_us = max(self.now_us, now_us)
        request = self.requests[number]
        self.counts["requests_denied"] += 1
        self.counts[f"requests_denied_{reason}"] += 1
        request.denied_us, request.denial = now_us, reason
        if reason == "store_unavailable":
            self._unavailable_unwarranted(request, now_us)
        untrusted = request.untrusted
        if reason == "exceeded" or (untrusted is not None and not untrusted.warranted):
            # An unavailable answer is the policy's, unless the store made it
            # so by retiring a healthy connection: then it is judged as a
            # refusal (a sound store would have answered it).
            judged = request.judged or self._judge(self.book(request.key), request, now_us)
            self.denials.append((request, judged))
            self.provisional_false_denials += self._ideal_had_room(request, judged)
        self._over(request, now_us)

    def _unavailable_unwarranted(self, request: LeaseRequest, now_us: int) -> None:
        """The store answered ``request`` unavailable (an untrusted generation
        aside): unwarranted when nothing could have made a sound store say so,
        then judged as if read off a healthy connection it retired. Nothing
        could when it answered before the caller's timeout ran out (past it, a
        merely slow reply explains it), the lab failed no call of the replica
        (nor a connection's opening anywhere) and scheduled nothing on it from
        ``HEALTHY_WINDOW_US`` before the request arrived until the answer,
        and fewer of the replica's callers were waiting than the shared
        invoke cap: with every call answered in time, every invoke in flight
        is a waiting caller's."""
        timeout_us = self.grace.acquire_timeout_us
        if (request.untrusted is not None or None in self.spells or timeout_us is None
                or now_us - request.arrived_us >= timeout_us):
            return  # past the caller's timeout, a merely slow reply explains it
        since_us = request.arrived_us - HEALTHY_WINDOW_US
        faults = [*self.replica_faults.get(request.replica, []), *self.untagged_faults]
        if any(fault.at_us >= since_us for fault in faults):
            return
        if any(start_us <= now_us and until_us >= since_us
               and (replicas is None or request.replica in replicas)
               for start_us, until_us, replicas in self.spells):
            return
        if self.invoke_cap is not None and self.waiting_on[request.replica] >= self.invoke_cap:
            return
        request.untrusted = Untrusted(NO_GENERATION, False, None, (
            f"the store answered unavailable on a replica the lab had failed no call of "
            f"for {(now_us - since_us) / 1e6:,.1f} s"))

    def answered_untrusted(self, number: int, generation: int, opened_ms: int | None,
                           retired_ms: int | None, invoke: str | None, ran_ms: int) -> None:
        """Request ``number``'s answer was decided on ``generation``, which its
        store no longer trusted: opened at ``opened_ms`` and retired at
        ``retired_ms`` (its replica's clock; ``None``: not recorded) by
        ``invoke`` after it ran ``ran_ms`` (``None``: a reply echoed another
        lease id). Told before the answer itself."""
        request = self.requests[number]
        replica = request.replica
        if opened_ms is None or retired_ms is None:
            request.untrusted = unknown_retirement(
                generation, self.replica_faults.get(replica, []))
            return
        faults = [fault for fault in self.replica_faults.get(replica, [])
                  if opened_ms <= self.clock_ms(replica, fault.at_us) <= retired_ms]
        timeout_us = self.grace.acquire_timeout_us
        request.untrusted = judge_retirement(
            generation, invoke, ran_ms, faults,
            None if timeout_us is None else timeout_us // 1_000)

    def cancelled(self, number: int, now_us: int) -> None:
        """The caller's client disconnected before the store decided: the lab
        cancelled its acquire, which is, for the lease it may have written, a
        fault on the acquire (a sound store compensates it). It never holds."""
        self.now_us = max(self.now_us, now_us)
        request = self.requests[number]
        self.counts["requests_cancelled"] += 1
        request.acquire_faults = request.acquire_faults | {CALLER_CANCELLED}
        cancelled = Fault(CALLER_CANCELLED, "acquire", now_us)
        self.replica_faults.setdefault(request.replica, []).append(cancelled)
        if request.acquire_fault is None:
            request.acquire_fault = cancelled
        # Its answer is that nobody waits for one: over, as a denial is.
        request.denied_us, request.denial = now_us, "cancelled"
        self._over(request, now_us)

    def completed(self, number: int, now_us: int) -> None:
        """The caller's work is done: it lets go of its permit (its release
        runs in the background from now)."""
        self.now_us = max(self.now_us, now_us)
        request = self.requests[number]
        self.counts["requests_completed"] += 1
        request.completed_us = now_us
        self._over(request, now_us)

    def _stop_waiting(self, request: LeaseRequest) -> None:
        if request.state == WAITING:
            self.waiting_on[request.replica] -= 1

    def _over(self, request: LeaseRequest, now_us: int) -> None:
        self._stop_waiting(request)
        was_holding = request.state == HOLDING
        request.state, request.over_us = OVER, now_us
        if not was_holding:
            return
        book = self.book(request.key)
        book.holding.discard(request.number)
        book.holder_changes.append((now_us, -1))
        book.holder_limits.append((now_us, -1, self.limit_of(request)))
        self.holding -= 1
        spell = self._open_spell(request, now_us)
        if spell is not None:
            self._spell(book, *spell)
        request.uncounted_since = None

    # -- the store's record ----------------------------------------------------

    def observe(self, key: Key, now_us: int, tag: int, how: str,
                changes: dict[str, int | None] | None = None) -> None:
        """The store's lease hash of ``key`` changed (``changes``: lease id to
        its deadline in epoch ms, ``None`` for removed), or a command only
        read it (``changes`` empty or ``None``). ``tag`` is the request whose
        command it was (``NO_REQUEST``: none); ``how`` is ``command``,
        ``key_expired``, ``data_loss`` or ``evicted``."""
        self.now_us = max(self.now_us, now_us)
        book = self.book(key)
        request = self.requests.get(tag) if how == "command" else None
        if request is not None and request.key == key:
            if request.state == WAITING:
                # Its acquire ran: judged on the record as the script saw it.
                request.judged = self._judge(book, request, now_us)
            elif request.state == OVER and self._found_its_lease_gone(request, now_us, changes):
                request.ran_after_over += 1  # its release (or compensation) ran, too late
        if not changes:
            return
        # A script reclaims before it writes: removals first.
        for lease_id in sorted(lid for lid, deadline in changes.items() if deadline is None):
            if lease_id in book.leases:
                self._removed(book, lease_id, now_us, tag, how)
        for lease_id in sorted(lid for lid, deadline in changes.items() if deadline is not None):
            self._written(book, lease_id, changes[lease_id], now_us, tag, how)

    def hash_without_ttl(self, key: Key, now_us: int, tag: int) -> None:
        """A command of request ``tag`` left ``key``'s lease hash holding leases
        with no expiry: the seed's acquire gives it twice the lease TTL after
        every write (seed 002:42, pinned by 002:1309), so a hash never outlives the leases it
        holds; one without is kept forever, and so are its stale leases."""
        self.hashes_without_ttl.setdefault(key, (now_us, tag))

    def _written(self, book: KeyBook, lease_id: str, deadline_ms: int, now_us: int, tag: int,
                 how: str) -> None:
        old = book.leases.get(lease_id)
        if old is not None:
            if old.deadline_ms == deadline_ms:
                return
            if how == "command" and old.owner == tag != NO_REQUEST:
                old.deadline_ms = deadline_ms  # its own command again: a retry's second run
                return
            # Rewritten by another request's command (ids that collide): the
            # old lease is gone and a new one is written.
            self._removed(book, lease_id, now_us, tag, how)
        writer = tag if how == "command" else book.writers.get(lease_id, NO_REQUEST)
        owner = self.requests.get(writer)
        if owner is not None and (owner.key != book.key or (
                owner.lease is not None and owner.lease.lease_id != lease_id)):
            owner = None  # a lease on another request's key, or a second one
        lease = Lease(book.key, lease_id, NO_REQUEST if owner is None else owner.number,
                      now_us, deadline_ms, "command" if how == "command" else how)
        book.leases[lease_id] = lease
        book.history.append(lease)
        if how == "command":
            self.counts["leases_written"] += 1
        if owner is None:
            return
        owner.lease = lease
        book.writers[lease_id] = owner.number
        if owner.state == HOLDING and owner.uncounted_since is not None:
            # A restore brought its lease back: counted again.
            self._spell(book, owner.uncounted_since, now_us, owner.uncounted_cause)
            owner.uncounted_since = None

    def _removed(self, book: KeyBook, lease_id: str, now_us: int, tag: int, how: str) -> None:
        lease = book.leases.pop(lease_id)
        lease.removed_us, lease.removed_how, lease.removed_by = now_us, how, tag
        if how in ("data_loss", "evicted"):
            self.counts[f"leases_lost_to_{how}"] += 1
        owner = self.requests.get(lease.owner)
        if (owner is not None and owner.state == HOLDING and owner.lease is lease
                and owner.uncounted_since is None):
            # It still holds, and the store no longer counts it: since now, or
            # since its deadline passed if that came first.
            assert owner.admitted_us is not None
            start = max(owner.admitted_us, min(now_us, lease.deadline_us))
            self._uncount(owner, start, self._uncounted_cause(owner, lease))

    # -- the verdict's bookkeeping --------------------------------------------

    def _uncount(self, request: LeaseRequest, start_us: int, cause: str) -> None:
        request.uncounted_since, request.uncounted_cause = start_us, cause

    def _open_spell(self, request: LeaseRequest, now_us: int) -> tuple[int, int, str] | None:
        """The spell a holder has held uncounted until ``now_us``, if any: an
        open one, or its lease's deadline passed while it is still in the hash."""
        if request.uncounted_since is not None:
            return request.uncounted_since, now_us, request.uncounted_cause
        lease = request.lease
        if lease is not None and lease.removed_us is None and lease.deadline_us < now_us:
            assert request.admitted_us is not None
            return (max(request.admitted_us, lease.deadline_us), now_us,
                    self._uncounted_cause(request, lease))
        return None

    def _spell(self, book: KeyBook, start_us: int, end_us: int, cause: str) -> None:
        if end_us > start_us:
            book.uncounted.append((start_us, end_us, cause))
            if cause == "lease_expired_while_held":
                self.counts["leases_expired_while_held"] += 1

    def _uncounted_cause(self, request: LeaseRequest, lease: Lease | None) -> Label:
        """Why a holder holds with no lease the store counts: a cause of the
        lab's, or the store's own (``StoreLogic``, with what exposed it)."""
        if not request.enforced:
            untrusted = request.untrusted
            if untrusted is not None and not untrusted.warranted:
                # The policy admitted it because the store had retired a
                # healthy connection: a sound store would have answered it.
                return self._store_logic(request, untrusted.fault, (
                    f"admitted unenforced: {untrusted.why}"
                    if untrusted.generation == NO_GENERATION else
                    f"admitted unenforced: its answer came on generation "
                    f"{untrusted.generation}, retired when {untrusted.why}"))
            return "fail_open"
        if lease is None:
            # Admitted, yet no command of its wrote a lease: it took another
            # command's grant (the seed's echo check refuses to), or the store
            # admitted it on nothing at all.
            if request.misaligned:
                return self._store_logic(request, self._misaligned_fault(request),
                                         "admitted on another command's grant")
            return self._store_logic(request, self._exposing(request), "admitted with no lease")
        if lease.removed_us is None or lease.deadline_us <= lease.removed_us:
            return self._expiry_cause(request, lease)
        how = lease.removed_how
        if how == "data_loss":
            return "server_data_loss"
        if how == "evicted":
            return "evicted"
        if how == "key_expired" and request.honest_deadline_ms is not None:
            honest = self.clock_ms(request.replica, lease.removed_us) >= request.honest_deadline_ms
            if honest:
                return "lease_expired_while_held"
            return self._store_logic(request, self._exposing(request),
                                     "its lease's key expired before its TTL")
        remover = self.requests.get(lease.removed_by)
        if how == "command" and remover is not None and remover is not request:
            # A reclaim, judged on the reclaiming replica's clock.
            now_ms = self.clock_ms(remover.replica, lease.removed_us)
            if request.honest_deadline_ms is None or now_ms >= request.honest_deadline_ms:
                return "lease_expired_while_held"
            return self._store_logic(request, self._sharing_fault(request, remover),
                                     f"its live lease removed by request {remover.number}'s "
                                     f"command on replica {remover.replica}")
        return self._store_logic(request, self._exposing(request), "its lease removed early")

    def _expiry_cause(self, request: LeaseRequest, lease: Lease) -> Label:
        """Its lease's deadline passed: the TTL ran out, if the store wrote an honest one."""
        if request.honest_deadline_ms is None or lease.deadline_ms >= request.honest_deadline_ms:
            return "lease_expired_while_held"
        return self._store_logic(request, self._exposing(request),
                                 "its lease written with a deadline short of its TTL")

    def _store_logic(self, request: LeaseRequest, fault: Fault | None,
                     what: str) -> StoreLogic:
        return StoreLogic(fault, self.now_us, request.number, (
            f"acquire on replica {request.replica} for request {request.number}: asked for "
            f"one lease counted while it held; {what}"))

    def _sharing_fault(self, request: LeaseRequest, remover: LeaseRequest) -> Fault | None:
        """What the lab did that let another request's command remove a live
        lease: it ran that request on another replica of the fleet."""
        if remover.replica == request.replica:
            return self._exposing(request)
        call = "release" if remover.state == OVER else "acquire"
        return Fault(SHARED_KEY, call, remover.arrived_us)

    def _judge(self, book: KeyBook, request: LeaseRequest, now_us: int) -> Judged:
        """``request``'s key as its acquire found it; the store's count uses
        the clock its replica sent."""
        judged_ms = self.clock_ms(request.replica, request.arrived_us)
        counted = tuple(lease for lease in book.leases.values() if lease.deadline_ms > judged_ms)
        return Judged(now_us, judged_ms, frozenset(book.holding), counted)

    def _judge_denial(self, request: LeaseRequest, judged: Judged,
                      exposures: Exposures) -> str | None:
        """An *exceeded* answer, judged once the run is over: false if an
        ideal limiter had room (fewer than ``max_in_flight`` callers holding,
        granted in flight or releasing), and then whose it is. Leases leaked
        for a reason of the lab's filling the count are the lab's; a count
        filled by leases the store itself failed to give back, a refusal
        with room in its own count, or a refusal read off another command's
        reply (the seed's echo check refuses to act on it) is the store's."""
        limit = self.limit_of(request)
        occupying, own, lab_leaked, store_leaked = self._occupancy(request, judged)
        if len(occupying) >= limit:
            return None
        counted = len(judged.leases)
        duplicated = own if not request.acquire_faults.isdisjoint(DUPLICATES) else 0
        fault = self._exposing(request)
        if request.misaligned:
            cause = STORE_LOGIC  # it took another command's refusal for its own
            fault = self._misaligned_fault(request)
        elif request.untrusted is not None:
            # A refusal read off a generation it no longer trusted: a sound
            # store answers it as unavailable, never as exceeded.
            cause = STORE_LOGIC
            fault = request.untrusted.fault
        elif counted < limit:
            cause = STORE_LOGIC  # refused what its own count had room for
        elif store_leaked and counted - len(store_leaked) < limit:
            # Had it given back what the contract says it must, there was room.
            cause = STORE_LOGIC
            owner = self.requests.get(store_leaked[0].owner)
            fault = exposing_fault(store_leaked[0], owner, self.grace)
        elif counted - lab_leaked < limit:
            cause = "leaked_leases"
        elif counted - lab_leaked - duplicated < limit:
            cause = "duplicate_execution"
        else:
            cause = STORE_LOGIC  # behind leases it failed to give back itself
            if store_leaked:
                fault = exposing_fault(store_leaked[0], self.requests.get(store_leaked[0].owner),
                                       self.grace)
        if cause == STORE_LOGIC:
            self._expose(exposures, "false_denials", 1, fault)
            exposures.parted(judged.at_us, request.number, (
                f"acquire on replica {request.replica} for request {request.number}: asked "
                f"for 1 of {limit} slots while {len(occupying)} held; the store counted "
                f"{counted} and refused{self._read_off(request)}"))
        return cause

    @staticmethod
    def _read_off(request: LeaseRequest) -> str:
        """How a refusal came, when the store no longer trusted its generation."""
        untrusted = request.untrusted
        if untrusted is None:
            return ""
        if untrusted.generation == NO_GENERATION:
            return f" ({untrusted.why})"
        return (f", on generation {untrusted.generation}, which it no longer trusted "
                f"(retired when {untrusted.why})")

    def _occupancy(self, request: LeaseRequest, judged: Judged,
                   settled: bool = True) -> tuple[set[int], int, int, list[Lease]]:
        """Of the leases ``judged`` counted: the callers an ideal limiter
        counts (holding, granted in flight or releasing), how many were the
        request's own, how many leaked for a reason of the lab's, and which
        leaked by the store's own doing."""
        occupying = set(judged.holding)
        lab_leaked = own = 0
        store_leaked: list[Lease] = []
        for lease in judged.leases:
            owner = self.requests.get(lease.owner)
            if owner is request:
                own += 1
                continue
            cause = leak_cause(lease, owner, judged.at_us, self.grace, settled)
            if cause is None:
                if owner is not None:
                    occupying.add(owner.number)
            elif cause in LAB_LEAK_CAUSES:
                lab_leaked += 1
            else:
                store_leaked.append(lease)
        occupying.discard(request.number)
        return occupying, own, lab_leaked, store_leaked

    def _ideal_had_room(self, request: LeaseRequest, judged: Judged) -> bool:
        """The denial as judged when it happens (for the metrics series): a
        release possibly on its way still occupies its slot."""
        return len(self._occupancy(request, judged, settled=False)[0]) < self.limit_of(request)

    @staticmethod
    def _misaligned_fault(request: LeaseRequest) -> Fault:
        return Fault("misaligned_reply", "acquire", request.arrived_us)

    @staticmethod
    def _expose(exposures: Exposures, metric: str, amount: float, fault: Fault | None) -> None:
        if fault is None:
            exposures.add(metric, amount)
        else:
            exposures.add(metric, amount, fault.what, fault.call)

    # -- results ---------------------------------------------------------------

    def sample(self, now_us: int, per_key: bool) -> list[dict[str, Any]]:
        """The state of every key now (and of them all, ``key == "*"``), from
        the oracle's own books."""
        total: Counter = Counter(dict.fromkeys(SAMPLED, 0))
        rows = []
        for (namespace, subject), book in self.books.items():
            row = self._key_state(book, now_us)
            total.update(row)
            if per_key:
                rows.append({"time_us": now_us, "namespace": namespace, "subject": subject,
                             **row})
        aggregate = {"time_us": now_us, "namespace": "*", "subject": "*", **total,
                     "requests_in_flight": self.holding, "max_in_flight": self.floor()}
        for name in ("requests_arrived", "requests_admitted", "requests_denied",
                     "misaligned_results_accepted"):
            aggregate[name] = self.counts.get(name, 0)
        aggregate["false_denials"] = self.provisional_false_denials
        return [aggregate, *rows]

    def _key_state(self, book: KeyBook, now_us: int) -> dict[str, int]:
        counted = [lease for lease in book.leases.values() if lease.counts_at(now_us)]
        leaked = sum(1 for lease in counted
                     if leak_cause(lease, self.requests.get(lease.owner), now_us, self.grace,
                                   settled=False) is not None)
        uncounted = 0
        for number in book.holding:
            lease = self.requests[number].lease
            uncounted += lease is None or not lease.counts_at(now_us)
        return {"callers_holding": len(book.holding), "leases_counted": len(counted),
                "leases_leaked": leaked, "callers_uncounted": uncounted,
                "concurrency_excess": max(0, len(book.holding) - self.floor())}

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        """Every lease metric, from what happened (see the module docstring)."""
        arrived = self.counts.get("requests_arrived", 0)
        denied = self.counts.get("requests_denied", 0)
        metrics: dict[str, Any] = {
            name: self.counts.get(name, 0) for name in (
                "requests_arrived", "requests_admitted", "requests_admitted_unenforced",
                "requests_denied", "requests_denied_exceeded",
                "requests_denied_store_unavailable", "requests_cancelled",
                "requests_completed", "requests_aborted_by_crash")}
        metrics["denial_share"] = round(denied / arrived, 9) if arrived else 0.0
        metrics["requests_in_flight_peak"] = self.holding_peak
        metrics["requests_in_flight_at_end"] = self.holding
        metrics["keys_total"] = len(self.books)
        exposures = Exposures()
        excess, open_spells = self._excess(end_us)
        leaks, still_leaked, leaked_peak = self._leaks(end_us)
        metrics["concurrency_excess_lease_seconds"] = round(excess.lease_seconds, 6)
        metrics["concurrency_excess_peak"] = excess.peak
        excess_by_cause = self._excess_by_cause(excess, exposures)
        for cause in EXCESS_CAUSES:
            metrics[f"concurrency_excess_lease_seconds_by_{cause}"] = round(
                excess_by_cause.get(cause, 0.0), 6)
        leaked_by_cause: Counter = Counter(dict.fromkeys(LEAK_CAUSES, 0.0))
        for leak in leaks:
            leaked_by_cause[leak.cause] += leak.lease_seconds
            if leak.cause == STORE_LOGIC:
                self._expose_leak(leak, exposures)
        false_denials: Counter = Counter()
        for request, judged in self.denials:
            cause = self._judge_denial(request, judged, exposures)
            if cause is not None:
                false_denials[cause] += 1
        for number, at_us in self.accepted_misaligned:
            request = self.requests[number]
            self._expose(exposures, "misaligned_results_accepted", 1,
                         self._misaligned_fault(request))
            exposures.parted(at_us, number, (
                f"acquire on replica {request.replica} for request {number}: asked for its "
                "own lease; the store took another command's grant for it"))
        for key, (at_us, number) in self.hashes_without_ttl.items():
            request = self.requests.get(number)
            self._expose(exposures, "lease_keys_without_ttl", 1,
                         None if request is None else self._exposing(request))
            exposures.parted(at_us, number, (
                f"a command of request {number} left {key}'s lease hash holding leases "
                "with no expiry"))
        metrics["lease_keys_without_ttl"] = len(self.hashes_without_ttl)
        metrics["leaked_lease_seconds"] = round(sum(leak.lease_seconds for leak in leaks), 6)
        for cause in LEAK_CAUSES:
            metrics[f"leaked_lease_seconds_by_{cause}"] = round(leaked_by_cause[cause], 6)
        metrics["leases_leaked"] = len({id(leak.lease) for leak in leaks})
        metrics["leases_still_leaked_at_end"] = still_leaked
        metrics["leaked_leases_peak"] = leaked_peak
        metrics["false_denials"] = sum(false_denials.values())
        for cause in DENIAL_CAUSES:
            metrics[f"false_denials_by_{cause}"] = false_denials[cause]
        metrics["fail_closed_denials"] = self.counts.get("requests_denied_store_unavailable", 0)
        for name in ("misaligned_results_accepted", "misaligned_replies", "leases_written",
                     "leases_expired_while_held", "leases_lost_to_data_loss",
                     "leases_lost_to_evicted"):
            metrics[name] = self.counts.get(name, 0)
        metrics["convergence_after_faults_us"] = self._convergence(
            leaks, still_leaked, open_spells, last_fault_us)
        metrics.update(exposures.summary(
            (invariant.metric for invariant in INVARIANTS),
            {invariant.metric: invariant.causes(metrics).get(STORE_LOGIC, 0)
             for invariant in INVARIANTS}))
        return metrics

    def _excess_by_cause(self, excess: Excess, exposures: Exposures) -> Counter:
        """The excess by cause, the store's own parts (``StoreLogic``) added to
        ``exposures`` with what exposed them."""
        by_cause: Counter = Counter()
        for label, seconds in excess.by_cause.items():
            if isinstance(label, StoreLogic):
                by_cause[STORE_LOGIC] += seconds
                self._expose(exposures, "concurrency_excess_lease_seconds", seconds, label.fault)
                if seconds:
                    exposures.parted(label.at_us, label.request, label.call)
            else:
                by_cause[label] += seconds
                if label == STORE_LOGIC:  # admitted past its own count
                    exposures.add("concurrency_excess_lease_seconds", seconds)
        return by_cause

    def _expose_leak(self, leak: Leak, exposures: Exposures) -> None:
        """A leak that is the store's own: what exposed it, and where it began."""
        owner = self.requests.get(leak.owner)
        lease = leak.lease
        self._expose(exposures, "leaked_lease_seconds", leak.lease_seconds,
                     exposing_fault(lease, owner, self.grace))
        if owner is None:
            words = f"lease {lease.lease_id} counted on {lease.key} with no request's command"
        else:
            fault = exposing_fault(lease, owner, self.grace)
            call = "release" if fault is None or fault.call in ACQUIRE_CALLS else fault.call
            given = ("cancelled" if owner.denial == "cancelled"
                     else "refused" if owner.denied_us is not None else "done")
            words = (f"{call} on replica {owner.replica} for request {owner.number}: its caller "
                     f"{given}, asked for lease {lease.lease_id} back; the store still counted "
                     f"it for {leak.lease_seconds:.6f} s")
        exposures.parted(leak.start_us, leak.owner, words)

    def _excess(self, end_us: int) -> tuple[Excess, list[tuple[int, int, str]]]:
        """The excess of every key, summed; and the spells of uncounted
        holding still open at ``end_us`` (closed there, without changing the books)."""
        total = Excess()
        still_open = []
        for book in self.books.values():
            spells = list(book.uncounted)
            for number in sorted(book.holding):
                spell = self._open_spell(self.requests[number], end_us)
                if spell is not None:
                    spells.append(spell)
                    still_open.append(spell)
            total.add(concurrency_excess(book.holder_changes, spells, self.max_in_flight,
                                         self._limits(book)))
        return total, still_open

    def _limits(self, book: KeyBook) -> Limits | None:
        """``max_in_flight`` as the operator's changes made it vary for
        ``book`` (None: never changed, one number)."""
        if not self.floors:
            return None
        at_us = self.first_change_us or 0
        own = StoreLogic(Fault(CONFIG_CHANGE, "reconfigure", at_us), at_us, NO_REQUEST,
                         f"the fleet admitted past the max_in_flight its replicas ran with "
                         f"on {book.key}, once an operator reconfigured it")
        return Limits(self.floors, book.holder_limits, own)

    def _leaks(self, end_us: int) -> tuple[list[Leak], int, int]:
        """Every leak, how many are still leaked at ``end_us``, and the most at once on a key."""
        leaks: list[Leak] = []
        still_leaked = peak = 0
        for book in self.books.values():
            found = []
            for lease in book.history:
                spells = leaks_of(lease, self.requests.get(lease.owner), end_us, self.grace)
                if spells:
                    found += spells
                    still_leaked += lease.counts_at(end_us)
            leaks += found
            peak = max(peak, peak_concurrent(found))
        return leaks, still_leaked, peak

    def _convergence(self, leaks: list[Leak], still_leaked: int,
                     open_spells: list[tuple[int, int, str]],
                     last_fault_us: int | None) -> int:
        """Time from the last fault until the store's record matched the truth
        again (no leaked lease, no caller holding uncounted): -1 if it never did."""
        if still_leaked or open_spells:
            return -1
        ends = [leak.end_us for leak in leaks]
        ends += [end for book in self.books.values() for _, end, _ in book.uncounted]
        if last_fault_us is None or not ends:
            return 0
        return max(0, max(ends) - last_fault_us)


def fault_spells(faults: Any) -> Iterator[tuple[int, int, frozenset[int] | None] | None]:
    """When the scenario's faults beyond a message's may act, and on which
    replicas (``None``: all of them): from the instant scheduled to its end
    (a pause's, a partition's, a spike's duration, a restart's downtime or
    delay); one ``None`` when it rates any fault (then any instant may be one)."""
    if faults is None:
        return
    if any(name not in ("schedule", "until") and value is not None for name, value in faults):
        yield None
    for fault in getattr(faults, "schedule", None) or ():
        if fault.fault.startswith("lose_"):
            continue  # the network reports each message it hits
        start = int(fault.at)
        lasts = max(int(fault.duration or 0), int(fault.restart_after or 0), int(fault.down_for))
        hit = ([fault.replica] if fault.replica is not None else []) + list(fault.replicas)
        replicas = frozenset(hit) if hit and fault.fault in ("crash", "pause") else None
        yield start, start + lasts, replicas


def lease_oracle(scenario: Scenario, kind: StoreKind, settings: Any) -> LeaseOracle:
    """The oracle of ``scenario`` run on ``kind`` with ``settings``."""
    timeout_ms = getattr(settings, "timeout_ms", None)
    return LeaseOracle(max_in_flight=settings.max_in_flight,
                       lease_ttl_ms=getattr(settings, "lease_ttl_ms", None),
                       release_grace_us=scenario.network.timeout_us,
                       acquire_timeout_us=None if timeout_ms is None else timeout_ms * 1_000,
                       invoke_cap=getattr(settings, "shared_invoke_concurrency", None),
                       lab_faults=scenario.faults)
