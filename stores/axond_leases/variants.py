"""Historical variants of the lease limiter: the bugs the fixed one fixed.

Each variant is ``LeaseLimiter`` with one thing changed, stating only that
thing through one of the limiter's seams (``new_lease_id``,
``_echoes_another_lease``, ``_compensate``, ``release_attempts``,
``invoke_deadline_ms``, ``_unattributable``, ``_caller_cancelled``), and
registers through ``KINDS`` here with ``kinds.redis_kind``; the package's
``KINDS`` includes them. The lab runs a variant and the fixed store on the
same scenario and seed to show what the fix is worth
(``data/scenarios/leases-variant-*.toml``), and each has a race report in
``data/races/`` that ``hunt`` found.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from stores.axond_leases.handoff import Handoff
from stores.axond_leases.kinds import redis_kind
from stores.axond_leases.limiter import LeaseLimiter
from stores.axond_leases.outcome import InvokeOutcome
from stores.axond_leases.release import LeaseRelease
from stores.registry import StoreKind

logger = logging.getLogger("stores.axond_leases")


class UncompensatedAbandon(LeaseLimiter):
    """An acquire nobody will act on is never compensated.

    The bug: the caller's wait is shorter than the invoke, so an acquire can
    write its lease after its caller gave up (timed out, was cancelled), or
    end with an outcome nobody can read (an error, the invoke's deadline, a
    reply on a connection no longer trusted). This store walks away from
    such a lease: nobody holds it, yet it takes a slot until its TTL, and
    callers are refused while the fleet has room. The fix releases it
    (``LeaseLimiter._compensate``): whoever cannot own a lease gives it back.
    """

    def _compensate(self, release: LeaseRelease) -> None:
        logger.debug("lease %s of an abandoned acquire is left to its TTL", release.lease_id)


class TrustsMisalignedReply(LeaseLimiter):
    """No echoed-lease-id check: whatever reply comes back is taken as this
    acquire's.

    The bug: on the shared, multiplexed connection replies are matched to
    callers by order alone, so once a reply goes missing (or a waiter is
    dropped) each caller receives a reply meant for another. Without
    comparing the echoed lease id with its own, a caller takes another
    acquire's grant for its permit (when its own acquire was refused, it runs
    with no lease counting it) or another's refusal for its answer (while its
    own acquire wrote a lease that nobody gives back). Nor is the connection
    retired for it, so one lost reply shifts it until an invoke happens to
    outlive its deadline. The fix checks the echo
    (``LeaseLimiter._echoes_another_lease``): a reply echoing another id is
    unavailable, its lease compensated, its generation replaced.
    """

    def _echoes_another_lease(self, generation: int, outcome: InvokeOutcome,
                              lease_id: str) -> bool:
        return False


class ReleaseNeverRetried(LeaseLimiter):
    """A release makes its first attempt only, on the shared connection.

    The bug: dropping a permit sends one release; when that one is lost, its
    reply is lost, or the shared connection stalls, resets or is suspect,
    nothing tries again, and the lease keeps its slot until its TTL although
    its caller is long done. The fix retries with backoff on fresh
    connections within the release budget (``release.LeaseRelease.run``).
    """

    release_attempts = 1


class ProcessLocalLeaseIds(LeaseLimiter):
    """Lease ids unique within one process only: a counter from 1.

    The bug (the seed's comment on ``next_id``: lease ids are hash fields, so
    they must be globally unique): every replica counts 1, 2, 3... so two
    replicas acquiring on one key write the same field. The second ``HSET``
    overwrites the first replica's live lease -- one lease now stands for two
    callers -- and the first release deletes it for both. The store counts
    fewer leases than callers hold, and the fleet admits past
    ``max_in_flight``, with no fault at all. The fix draws ids unique
    fleet-wide (``Runtime.new_id``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # One counter per limiter: one per gateway process, as axond's static.
        self._lease_counter = itertools.count(1)

    def new_lease_id(self) -> str:
        return str(next(self._lease_counter))


class InvokeSharesCallerTimeout(LeaseLimiter):
    """The owned invoke gets the caller's timeout as its liveness deadline.

    The bug: the caller's timeout is a latency budget (past it the caller is
    answered unavailable), but here it is also the invoke's deadline, and an
    invoke that outlives its deadline retires its connection's generation. So
    a reply that is merely slow, a little past the caller's wait, costs a
    healthy shared connection: the generation is marked suspect, every
    acquire still in flight on it gets an untrusted result (unavailable,
    its lease compensated), new acquires are unavailable until a replacement
    connection is up, and the replies still owed on the old one are thrown
    away. The fix gives the invoke a longer deadline
    (``LeaseLimiter.invoke_deadline_ms``, 4 x the timeout): only an invoke
    that is really stuck retires its connection.
    """

    def invoke_deadline_ms(self) -> int:
        return self.settings.timeout_ms


class UntrustedDenialRefuses(LeaseLimiter):
    """A refusal from an untrusted generation is answered as a hard refusal.

    The bug: once the shared connection's generation is suspect (or already
    replaced), a reply that comes back on it cannot be trusted; the store
    treats an untrusted *grant* so (unavailable, its lease compensated) but
    takes an untrusted *refusal* at its word and answers "exceeded". That
    answer overrides the operator's policy for a store that cannot answer:
    under ``on_unavailable = allow`` the caller should be admitted
    unenforced, and gets a 429 instead, counted on a key whose count it
    cannot vouch for. The fix treats every reply from an untrusted
    generation alike (``LeaseLimiter._unattributable``): unavailable.
    """

    def _unattributable(self, outcome: InvokeOutcome, result_untrusted: bool) -> bool:
        return result_untrusted and outcome.granted


class CancellationDropsInvoke(LeaseLimiter):
    """A caller's cancellation cancels its invoke with it.

    The bug: the invoke is the caller's, not a task of its own, so when the
    caller is cancelled (its client disconnects, and the gateway drops the
    handler's future) the invoke is dropped where it stands, its reply still
    owed on the shared connection. Leaving the invoke unfinished retires the
    generation, as an invoke past its deadline does: a healthy connection
    replaced, acquires in flight on it answered unavailable, new ones
    unavailable until the replacement is up. And nothing is left to learn
    what the script did: a lease it wrote is never compensated and holds its
    slot until the TTL. The fix lets the invoke run on in its own task
    (``LeaseLimiter._caller_cancelled`` only stops listening): it consumes
    its reply on a connection that stays trusted, and gives back a grant
    nobody will take.
    """

    def _caller_cancelled(self, handoff: Handoff[InvokeOutcome], task: Any) -> None:
        super()._caller_cancelled(handoff, task)
        self.runtime.cancel(task)


KINDS: tuple[StoreKind, ...] = (
    redis_kind("axond_leases.variants.uncompensated_abandon",
               "historical: an acquire whose caller gave up, or whose outcome is ambiguous, "
               "leaves its lease to the TTL (no compensation)",
               store_class=UncompensatedAbandon),
    redis_kind("axond_leases.variants.trusts_misaligned_reply",
               "historical: no echoed-lease-id check; a reply misaligned onto a caller is "
               "taken as its grant",
               store_class=TrustsMisalignedReply),
    redis_kind("axond_leases.variants.release_never_retried",
               "historical: a release makes its first attempt only (no retries on fresh "
               "connections)",
               store_class=ReleaseNeverRetried),
    redis_kind("axond_leases.variants.process_local_lease_ids",
               "historical: lease ids from a per-process counter; replicas collide and "
               "overwrite each other's live leases",
               store_class=ProcessLocalLeaseIds),
    redis_kind("axond_leases.variants.invoke_shares_caller_timeout",
               "historical: the owned invoke's deadline is the caller's timeout; a reply "
               "merely slower than the caller's wait retires a healthy shared connection",
               store_class=InvokeSharesCallerTimeout),
    redis_kind("axond_leases.variants.untrusted_denial_refuses",
               "historical: a refusal read from an untrusted generation is answered as "
               "exceeded, not unavailable (a hard 429 despite on_unavailable = allow)",
               store_class=UntrustedDenialRefuses),
    redis_kind("axond_leases.variants.cancellation_drops_invoke",
               "historical: a cancelled caller cancels its invoke too; the shared connection "
               "is retired for it and a lease the script wrote is never given back",
               store_class=CancellationDropsInvoke),
)
