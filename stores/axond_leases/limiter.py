"""Exact fleet-wide concurrency limits in Redis: axond 0.3.8's ``RedisRateLimiter``.

``acquire`` writes a lease (one Lua script: reclaim expired leases, count the
live ones, refuse at ``max_in_flight``, write this one with its deadline);
the returned ``Permit`` releases it in the background (``release.py``).

What happens around that call is most of the store, because the shared
connection can be slow, stalled or misaligned, and the caller cannot wait:

* **The caller owns only the wait.** Each acquire's invoke runs in a task of
  its own, which hands its outcome over through a one-shot ``Handoff``. The
  caller waits ``timeout`` (a latency budget), then answers unavailable; the
  invoke runs on until its longer liveness deadline (``timing``), so an
  ordinary slow reply does not retire a healthy connection. An invoke that
  outlives that deadline is abandoned and its generation retired
  (``generations``).
* **Nothing created may be left unowned.** An outcome nobody will act on --
  the caller gave up or was cancelled, the result is ambiguous (an error, the
  deadline), it came on an untrusted generation, or it echoes another lease
  id -- releases its lease (*compensation*), so a lease written after its
  caller stopped waiting does not hold a slot until its TTL.
* **Replies must be this acquire's.** The script echoes the lease id; a reply
  echoing another one means the shared connection's replies are shifted, and
  its generation is retired.
* **Refuse rather than queue.** At most ``shared_invoke_concurrency`` invokes
  are in flight on the shared connection; past it an acquire is unavailable
  at once, and nothing is marked suspect.

Rules kept here:

* Awaits only its ports (``Connector``/``Connection``, ``Runtime``); the
  script gets the replica's clock as an argument, never the server's.
* A crash is not a cancellation: the lease count never depends on a
  ``finally`` running (a dead replica's leases expire at their deadlines). A
  *cancelled* caller does close its handoff, as dropping the Rust receiver
  does, so the invoke compensates what it created.
* Lease ids come from ``Runtime.new_id``: unique fleet-wide, since a collision
  would overwrite another replica's live lease and admit past the limit.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from stores.axond_leases.contract import (
    Admission,
    LeaseConnectError,
    LeaseConnectTimeout,
    LeaseKey,
    Permit,
    UnavailablePolicy,
)
from stores.axond_leases.generations import (
    UNREACHABLE,
    ConnectionRecovery,
    Retirement,
    SharedConnection,
    describe,
)
from stores.axond_leases.handoff import Handoff, Nothing, reclaim_timed_out_acquire
from stores.axond_leases.keys import lease_key
from stores.axond_leases.outcome import InvokeOutcome, compensate_abandoned_result
from stores.axond_leases.release import LeaseRelease
from stores.axond_leases.settings import LeaseSettings
from stores.axond_leases.slots import Slot, release_retry_slots
from stores.axond_leases.timing import RELEASE_MAX_ATTEMPTS, invoke_timeout_ms
from stores.ports import Connection, Connector, Runtime
from stores.scripts import ScriptSet

logger = logging.getLogger("stores.axond_leases")

SCRIPTS = ScriptSet.shipped(__package__)
"""``acquire.lua`` and ``release.lua``, by script name: what a limiter runs
unless its kind replaces them (``stores.scripts``)."""


def unavailable(policy: UnavailablePolicy, reason: str) -> Admission:
    """The admission for an acquire the store could not decide: denied as
    unavailable, or admitted unenforced, as ``policy`` says."""
    if policy is UnavailablePolicy.DENY:
        logger.error("rate-limit store unavailable (%s); denying request", reason)
    else:
        logger.warning("rate-limit store unavailable (%s); serving unenforced", reason)
    return policy.admission(reason)


class LeaseLimiter:
    """One replica's limiter over a shared Redis."""

    name = "redis"
    scripts: ClassVar[ScriptSet] = SCRIPTS
    """The scripts this class runs unless given others (a variant replaces one)."""
    release_attempts: ClassVar[int] = RELEASE_MAX_ATTEMPTS
    """Attempts a release makes: the first on the shared connection, the rest
    on fresh ones (a class attribute, so a variant can make it one)."""

    def __init__(self, connection: Connection, connector: Connector, runtime: Runtime,
                 settings: LeaseSettings, scripts: ScriptSet | None = None) -> None:
        self.settings = settings
        self.runtime = runtime
        self.recovery = ConnectionRecovery(
            connection, connector, runtime, type(self).scripts if scripts is None else scripts,
            settings.connect_timeout_ms, settings.shared_invoke_concurrency)
        self.retry_slots = release_retry_slots(runtime, settings.release_retry_concurrency)

    @classmethod
    async def connect(cls, connector: Connector, runtime: Runtime, settings: LeaseSettings,
                      scripts: ScriptSet | None = None) -> LeaseLimiter:
        """Open the shared connection (it answers a PING), within
        ``connect_timeout``: a wrong address fails at boot, not per request."""
        try:
            connection = await runtime.timeout_ms(settings.connect_timeout_ms,
                                                  connector.connect())
        except TimeoutError as error:
            raise LeaseConnectTimeout(settings.connect_timeout_ms) from error
        except UNREACHABLE as error:
            raise LeaseConnectError(f"Redis connection failed: {describe(error)}") from error
        return cls(connection, connector, runtime, settings, scripts)

    # -- what the lab and the tests read ----------------------------------

    @property
    def generation(self) -> int:
        """The current shared connection's generation (1 at boot)."""
        return self.recovery.current.generation

    @property
    def suspect_generation(self) -> int:
        """The newest generation marked suspect (0: none ever was)."""
        return self.recovery.suspect_generation

    def retirement(self, generation: int) -> Retirement | None:
        """Why ``generation`` stopped being trusted (``None``: it was not)."""
        return self.recovery.retirements.get(generation)

    def key(self, key: LeaseKey) -> str:
        return lease_key(self.settings.key_prefix, key)

    def mark_connection_suspect(self, generation: int) -> None:
        """Trust nothing more from ``generation`` and replace it if current."""
        self.recovery.mark_suspect(generation)

    def lease_release(self, redis_key: str, lease_id: str) -> LeaseRelease:
        """The background release of lease ``lease_id`` in hash ``redis_key``,
        from the generation current now."""
        settings = self.settings
        return LeaseRelease(self.recovery, self.recovery.current, self.retry_slots,
                            settings.timeout_ms, settings.lease_ttl_ms, redis_key, lease_id,
                            self.release_attempts)

    async def aclose(self) -> None:
        """Close the shared connection (a gateway shutting down)."""
        await self.recovery.aclose()

    def _unavailable(self, reason: str) -> Admission:
        return unavailable(self.settings.on_unavailable, reason)

    # The seams below (and ``release_attempts``) each hold one rule in one
    # place, so that a historical variant (``variants.py``) states only the
    # rule it lacked.

    def new_lease_id(self) -> str:
        """A lease id unique fleet-wide (a hash field another replica's
        acquire must never overwrite)."""
        return self.runtime.new_id()

    def _echoes_another_lease(self, generation: int, outcome: InvokeOutcome,
                              lease_id: str) -> bool:
        """Whether ``outcome`` echoes another acquire's lease id (then
        ``generation`` is marked suspect): the check that keeps a caller from
        acting on a reply misaligned onto it."""
        return self.recovery.mark_if_mismatched(generation, outcome, lease_id)

    def invoke_deadline_ms(self) -> int:
        """How long the owned invoke may run before its generation is retired:
        its liveness deadline, longer than the caller's wait, so that a reply
        that is merely slow does not cost a healthy shared connection."""
        return invoke_timeout_ms(self.settings.timeout_ms)

    def _unattributable(self, outcome: InvokeOutcome, result_untrusted: bool) -> bool:
        """Whether the reply a caller waited for says nothing it may act on: any
        reply, a refusal as much as a grant, from a generation no longer
        trusted. Then the caller is answered as the store being unavailable
        (which the fail-open policy admits), never with a hard refusal."""
        return result_untrusted and outcome.answered

    def _caller_cancelled(self, handoff: Handoff[InvokeOutcome], task: Any) -> None:
        """The caller was cancelled while it waited: stop listening, so the
        invoke, which runs on in its own task to its own deadline, learns
        nobody will act on its outcome and compensates a lease it made."""
        handoff.close()

    def _compensate(self, release: LeaseRelease) -> None:
        """Release a lease this acquire may have written that nobody will own:
        its caller gave up or was cancelled, or its outcome is ambiguous."""
        release.spawn()

    # -- acquire -------------------------------------------------------------

    async def acquire(self, key: LeaseKey) -> Admission:
        recovery = self.recovery
        snapshot = recovery.current
        if recovery.suspect_generation >= snapshot.generation:
            self.mark_connection_suspect(snapshot.generation)
            return self._unavailable("shared Redis connection is recovering").on(
                snapshot.generation, untrusted=True)
        slot = recovery.invoke_slots.try_take()
        if slot is None:
            return self._unavailable("shared Redis invoke cap is exhausted")
        lease_id = self.new_lease_id()
        release = self.lease_release(self.key(key), lease_id)
        handoff: Handoff[InvokeOutcome] = Handoff()
        task = self.runtime.spawn(self._owned_invoke(snapshot, release, handoff, slot))
        try:
            await self.runtime.wait_ms(self.settings.timeout_ms, task)
        except TimeoutError:
            return self._after_caller_timeout(snapshot.generation, release, handoff)
        except BaseException:
            self._caller_cancelled(handoff, task)
            raise
        return self._decide(snapshot.generation, release, handoff.try_take())

    async def _owned_invoke(self, snapshot: SharedConnection, release: LeaseRelease,
                            handoff: Handoff[InvokeOutcome], slot: Slot) -> None:
        """The invoke, owned by its own task: it consumes the reply even if
        its caller stopped waiting, and compensates what nobody will own."""
        recovery, generation, lease_id = self.recovery, snapshot.generation, release.lease_id
        try:
            with recovery.invoke(snapshot) as invoke:
                outcome = await self._invoke(snapshot, release)
                if not outcome.elapsed:
                    invoke.complete()
            result_untrusted = recovery.is_untrusted(generation)
            mismatched = self._echoes_another_lease(generation, outcome, lease_id)
            if outcome.ambiguous:
                # An error or the deadline: the script may have written the
                # lease. Whoever waits, nobody can tell, so release it.
                self._compensate(release)
            compensate_on_send_failure = (
                mismatched or compensate_abandoned_result(outcome, result_untrusted))
            if not handoff.send(outcome) and compensate_on_send_failure:
                self._compensate(release)
        finally:
            handoff.drop_sender()
            slot.release()

    async def _invoke(self, snapshot: SharedConnection, release: LeaseRelease) -> InvokeOutcome:
        settings = self.settings
        try:
            raw = await self.runtime.timeout_ms(
                self.invoke_deadline_ms(),
                snapshot.acquire(keys=[release.lease_key],
                                 args=[self.runtime.now_ms(), settings.lease_ttl_ms,
                                       settings.max_in_flight, release.lease_id]))
        except TimeoutError:
            return InvokeOutcome.timed_out()
        except UNREACHABLE as error:
            return InvokeOutcome.failed(error)
        return InvokeOutcome.from_reply(raw)

    def _decide(self, generation: int, release: LeaseRelease,
                taken: InvokeOutcome | Nothing) -> Admission:
        """The caller's verdict on an outcome it waited for."""
        if isinstance(taken, Nothing):
            # The task ended without handing anything over: its invoke may
            # have written the lease, and no other path can clean it up.
            self._compensate(release)
            return self._unavailable("operation timed out")
        return self._on_reply(generation, taken,
                              self._decide_on_outcome(generation, release, taken))

    def _decide_on_outcome(self, generation: int, release: LeaseRelease,
                           outcome: InvokeOutcome) -> Admission:
        """The verdict on an outcome handed over within the caller's wait."""
        result_untrusted = self.recovery.is_untrusted(generation)
        if self._echoes_another_lease(generation, outcome, release.lease_id):
            self._compensate(release)
            return self._unavailable("shared Redis response echoed a different lease id")
        if self._unattributable(outcome, result_untrusted):
            self._compensate(release)
            return self._unavailable("shared Redis connection was replaced during acquire")
        if outcome.granted:
            return Admission.allowed(Permit(release.lease_id, release))
        if outcome.answered:
            return Admission.exceeded()
        return self._unavailable(outcome.describe())

    def _after_caller_timeout(self, generation: int, release: LeaseRelease,
                              handoff: Handoff[InvokeOutcome]) -> Admission:
        """The caller's verdict once its wait expired: unavailable, unless the
        outcome slipped in (then decided on, but a grant is not handed out)."""
        reclaimed = reclaim_timed_out_acquire(handoff)
        outcome = reclaimed.result
        if outcome is None:
            if reclaimed.compensate:
                self._compensate(release)
            return self._unavailable("operation timed out")
        return self._on_reply(generation, outcome,
                              self._decide_late(generation, release, outcome,
                                                reclaimed.compensate))

    def _decide_late(self, generation: int, release: LeaseRelease, outcome: InvokeOutcome,
                     compensate: bool) -> Admission:
        """The verdict on an outcome that slipped in as the caller's wait expired."""
        if self._echoes_another_lease(generation, outcome, release.lease_id):
            self._compensate(release)
            return self._unavailable("shared Redis response echoed a different lease id")
        result_untrusted = self.recovery.is_untrusted(generation)
        if compensate or compensate_abandoned_result(outcome, result_untrusted):
            self._compensate(release)
        if result_untrusted:
            return self._unavailable("shared Redis connection was replaced during acquire")
        if outcome.granted:
            return self._unavailable("acquire completed after its caller wait expired")
        if outcome.answered:
            return Admission.exceeded()
        return self._unavailable(outcome.describe())

    def _on_reply(self, generation: int, outcome: InvokeOutcome,
                  admission: Admission) -> Admission:
        """``admission`` marked with the generation a reply decided it on, and
        whether that generation was still trusted as the store decided (what
        the lab reads to judge an answer read off a retired connection)."""
        if not outcome.answered:
            return admission  # an error or the deadline decided it, not a reply
        return admission.on(generation, self.recovery.is_untrusted(generation))
