"""Mutant: any reply at all is taken as the release's success.

The bug: the release's reply is not read as the integer the release script
returns (``redis::RedisResult<i64>``, 002_348438d99c360737.txt:261-273; the
script returns 1, 46), so an acquire's ``{status, lease_id}`` misaligned onto
a release waiter passes for its success and nothing retries it. The seed's
typed read fails on it and the release falls through to a fresh connection
(176-199). Exposed by a lost release request, which shifts the shared
connection's replies by one.
"""

from __future__ import annotations

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.generations import UNREACHABLE, SharedConnection
from stores.axond_leases.release import LeaseRelease

MUTANT = LeaseMutant(
    name="pair_reply_taken_as_release",
    breaks="a release takes any reply (another command's, shifted onto it) for its success",
    seed="002_348438d99c360737.txt:261-273",
    schedule=({"at": "500ms", "fault": "lose_request", "replica": 0, "call": "release"},),
    exposed_by="request_lost on release",
)


class AnyReplyRelease(LeaseRelease):
    """``LeaseRelease`` whose shared attempt reads any reply as released."""

    async def _on_shared(self, shared: SharedConnection, budget_ms: int,
                         deadline_ms: int) -> bool:
        recovery = self.recovery
        remaining_ms = deadline_ms - recovery.runtime.now_ms()
        if remaining_ms <= 0:
            return False
        slot = recovery.invoke_slots.try_take()
        if slot is None:
            return False
        replied = False
        try:
            with recovery.invoke(shared) as invoke:
                try:
                    await recovery.runtime.timeout_ms(
                        min(budget_ms, remaining_ms),
                        shared.release(keys=[self.lease_key], args=[self.lease_id]))
                except TimeoutError:
                    pass
                except UNREACHABLE:
                    invoke.complete()
                else:
                    invoke.complete()
                    replied = True  # the bug: whatever came back, not an integer only
        finally:
            slot.release()
        return replied and not recovery.is_untrusted(shared.generation)


class PairReplyTakenAsRelease(LeaseLimiter):
    def lease_release(self, redis_key: str, lease_id: str) -> LeaseRelease:
        settings = self.settings
        return AnyReplyRelease(
            self.recovery, self.recovery.current, self.retry_slots, settings.timeout_ms,
            settings.lease_ttl_ms, redis_key, lease_id, self.release_attempts)


register_lease_mutant(MUTANT, PairReplyTakenAsRelease)
