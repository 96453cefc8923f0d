"""The lease limiter's rules that need no server: axond's plain test cases.

The script's shape, the key encoding, the unavailable policy, lease id
uniqueness, the retry cap's refusal, the compensation rule and the timed-out
handoff, each pinned on the pieces themselves.
"""

from __future__ import annotations

import re

import fakeredis
from manual_runtime import ManualRuntime

from stores.asyncio_runtime import AsyncioRuntime
from stores.axond_leases import SCRIPTS, LeaseLimiter
from stores.axond_leases.contract import Denial, LeaseKey, UnavailablePolicy
from stores.axond_leases.handoff import Handoff, reclaim_timed_out_acquire
from stores.axond_leases.keys import lease_key
from stores.axond_leases.limiter import unavailable
from stores.axond_leases.outcome import InvokeOutcome, compensate_abandoned_result
from stores.axond_leases.settings import RELEASE_RETRY_CONCURRENCY, LeaseSettings
from stores.axond_leases.slots import Slots, release_retry_slots

KEY = LeaseKey("acme", "subject")
PREFIX = "axond:rate_limit"


def test_lease_script_reclaims_expired_holds_and_counts_live_leases():
    acquire = SCRIPTS.source("acquire")
    assert "HDEL" in acquire
    assert "deadline_ms <= now_ms" in acquire
    assert "live >= max_in_flight" in acquire
    assert "PEXPIRE" in acquire
    # The caller's clock, never the server's; and no global that would
    # poison a fakeredis server (every assignment is to a local).
    assert "TIME" not in acquire
    declared = set(re.findall(r"\blocal\s+(\w+)", acquire))
    assigned = set(re.findall(r"^\s*(\w+)\s*=[^=]", acquire, re.MULTILINE))
    assert assigned <= declared
    assert "HDEL" in SCRIPTS.source("release")


def test_lease_key_uses_one_hash_tag():
    key = lease_key(PREFIX, KEY)
    start, end = key.index("{") + 1, key.index("}")
    assert key[start:end] == "acme|subject"
    assert key == "axond:rate_limit:{acme|subject}:leases"


def test_lease_key_encoding_is_injective_and_preserves_one_hash_tag():
    first = lease_key(PREFIX, LeaseKey("a|b", "c"))
    second = lease_key(PREFIX, LeaseKey("a", "b|c"))
    assert first != second

    braces = lease_key(PREFIX, LeaseKey("a{b", "c}d"))
    assert braces.count("{") == 1
    assert braces.count("}") == 1
    assert "{a%7Bb|c%7Dd}" in braces
    # An escaped-looking identifier stays distinct from the one it looks like.
    assert lease_key(PREFIX, LeaseKey("a%7Cb", "c")) != first


def test_unavailable_policy_maps_to_distinct_deny_or_unenforced_admission():
    denied = unavailable(UnavailablePolicy.DENY, "offline")
    assert not denied.is_allowed
    assert denied.denial is Denial.STORE_UNAVAILABLE
    assert "offline" in denied.reason

    admitted = unavailable(UnavailablePolicy.ALLOW, "offline")
    assert admitted.is_allowed
    assert admitted.denial is None
    assert not admitted.permit.enforced
    assert admitted.permit.lease_id is None
    admitted.permit.release()  # holds nothing: releasing sends nothing, fails nothing


def test_lease_ids_are_unique_within_a_process():
    runtime = AsyncioRuntime()
    ids = {runtime.new_id() for _ in range(100)}
    assert len(ids) == 100
    # Another replica's runtime never collides with this one's either.
    assert AsyncioRuntime().new_id() not in ids


def test_release_retry_semaphore_refuses_exhaustion_without_queueing():
    slots = Slots(RELEASE_RETRY_CONCURRENCY)
    taken = [slots.try_take() for _ in range(RELEASE_RETRY_CONCURRENCY)]
    assert all(slot is not None for slot in taken)

    assert slots.try_take() is None
    for slot in taken:
        slot.release()
    assert slots.try_take() is not None


def test_the_release_retry_cap_is_shared_by_every_limiter_of_one_process():
    runtime, other = ManualRuntime(), ManualRuntime()
    assert release_retry_slots(runtime, 16) is release_retry_slots(runtime, 4)
    assert release_retry_slots(runtime, 4).capacity == 16
    assert release_retry_slots(other, 4) is not release_retry_slots(runtime, 16)


def test_abandoned_zero_and_disconnected_results_follow_compensation_rule():
    """The seed connects a limiter to a stub for its recovery state; the
    limiter here is built on a client it never calls (no server needed)."""
    runtime = ManualRuntime()
    limiter = LeaseLimiter(fakeredis.aioredis.FakeRedis(decode_responses=True), None, runtime,
                           LeaseSettings(key_prefix="test", lease_ttl="5s", timeout="50ms",
                                         connect_timeout="50ms"))
    handoff: Handoff[InvokeOutcome] = Handoff()
    handoff.close()
    denial = InvokeOutcome.replied(0, "test")
    assert not handoff.send(InvokeOutcome.replied(0, "test"))
    result_untrusted = limiter.recovery.is_untrusted(1)
    assert not result_untrusted, "a healthy current generation must remain trusted"
    assert not compensate_abandoned_result(denial, result_untrusted), \
        "a trusted definite denial proves no lease was created"
    assert compensate_abandoned_result(denial, True), \
        "a refusal read on a retired connection proves nothing, so it is compensated"
    assert not compensate_abandoned_result(denial, False), \
        "a trusted refusal nobody waited for wrote no lease: nothing to give back"

    mismatch = InvokeOutcome.replied(1, "someone-else")
    assert limiter.recovery.mark_if_mismatched(1, mismatch, "ours")
    assert limiter.suspect_generation >= 1, "a mismatched echo must retire the reply generation"
    assert compensate_abandoned_result(mismatch, True), "a mismatched grant must be compensated"
    # Retiring the generation asked for its replacement (not run here).
    assert len(runtime.spawned) == 1
    runtime.spawned[0].coroutine.close()


def test_timeout_handoff_distinguishes_inflight_dead_and_window_grants():
    grant = InvokeOutcome.replied(1, "test")

    in_flight: Handoff[InvokeOutcome] = Handoff()
    reclaimed = reclaim_timed_out_acquire(in_flight)
    assert not reclaimed.compensate
    assert reclaimed.result is None
    assert not in_flight.send(grant), \
        "once the caller closed the handoff, a late outcome must not be delivered"

    dead: Handoff[InvokeOutcome] = Handoff()
    dead.drop_sender()
    reclaimed = reclaim_timed_out_acquire(dead)
    assert reclaimed.compensate
    assert reclaimed.result is None

    window: Handoff[InvokeOutcome] = Handoff()

    def send_in_the_window() -> None:
        assert window.send(grant), "sender is alive between the two probes"

    reclaimed = reclaim_timed_out_acquire(window, send_in_the_window)
    assert reclaimed.compensate
    assert reclaimed.result == grant, "a grant sent in the probe/close window must be reclaimed"
