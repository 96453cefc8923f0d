"""The lease oracle measures what happened and blames what the lab did.

Each test feeds the oracle the facts of a tiny story by hand — what the
callers did, what the network did to their messages, and the store's lease
hash after each command — and checks the metric it moves and whom the
verdict blames. Whole runs (``test_lease_family.py``) check the same from
the outside.
"""

from __future__ import annotations

import pytest

from simulator.engine.runtime import EPOCH_MS, ReplicaClock
from simulator.families.axond_leases.causes import (
    ATTEMPT_ENDS,
    CALL_FAILURES,
    DENIAL_CAUSES,
    EXCESS_CAUSES,
    LEAK_CAUSES,
)
from simulator.families.axond_leases.excess import concurrency_excess
from simulator.families.axond_leases.leaks import RELEASE_MAX_ATTEMPTS
from simulator.families.axond_leases.oracle import LeaseOracle
from simulator.net.links import MESSAGE_FAULTS
from simulator.scenario.faults import Faults

KEY = ("ns", "alice")
TTL_MS = 1_000
GRACE_US = 100_000
TIMEOUT_US = 50_000
END_US = 10_000_000


def oracle(max_in_flight: int = 1, clocks=None) -> LeaseOracle:
    books = LeaseOracle(max_in_flight, lease_ttl_ms=TTL_MS, release_grace_us=GRACE_US,
                        acquire_timeout_us=TIMEOUT_US)
    books.replica_clocks(clocks or [ReplicaClock(), ReplicaClock()])
    return books


def ms(at_us: int) -> int:
    """Epoch milliseconds on an unskewed clock at virtual time ``at_us``."""
    return EPOCH_MS + at_us // 1_000


def acquire(books: LeaseOracle, number: int, at_us: int, granted: bool = True,
            replica: int = 0, ttl_ms: int = TTL_MS, reclaimed: tuple = ()) -> str:
    """Request ``number`` arrives and its acquire runs at once: it writes
    lease ``L<number>`` (``granted``) after reclaiming ``reclaimed``."""
    books.arrived(number, KEY, replica, at_us)
    lease_id = f"L{number}"
    changes = dict.fromkeys(reclaimed)
    if granted:
        changes[lease_id] = ms(at_us) + ttl_ms
    books.observe(KEY, at_us, number, "command", changes)
    return lease_id


def release(books: LeaseOracle, number: int, at_us: int) -> None:
    """Request ``number``'s release runs: its lease leaves the hash."""
    books.observe(KEY, at_us, number, "command", {f"L{number}": None})


def serve(books: LeaseOracle, number: int, at_us: int, duration_us: int,
          released_after_us: int | None = 1_000) -> None:
    """A whole fault-free request: acquire, hold, complete, release."""
    acquire(books, number, at_us)
    books.admitted(number, True, at_us + 1_000)
    books.completed(number, at_us + duration_us)
    if released_after_us is not None:
        release(books, number, at_us + duration_us + released_after_us)


def summary(books: LeaseOracle, last_fault_us: int | None = None) -> dict:
    return books.summary(END_US, last_fault_us)


# -- no fault, no damage ---------------------------------------------------------


def test_requests_served_within_the_limit_leave_no_damage_and_a_release_on_its_way_is_no_leak():
    books = oracle(max_in_flight=2)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    acquire(books, 2, 100_000)
    books.admitted(2, True, 101_000)
    books.completed(1, 300_000)
    release(books, 1, 301_000)
    books.completed(2, 400_000)
    release(books, 2, 401_000)
    serve(books, 3, 500_000, 300_000)
    result = summary(books)
    assert result["requests_admitted"] == 3 and result["requests_completed"] == 3
    assert result["requests_in_flight_peak"] == 2
    assert result["leases_written"] == 3
    assert result["concurrency_excess_lease_seconds"] == 0
    assert result["leaked_lease_seconds"] == 0 and result["leases_leaked"] == 0
    assert result["false_denials"] == 0
    assert result["convergence_after_faults_us"] == 0


def test_a_denial_at_the_limit_is_true_and_counts_in_the_denial_share():
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    acquire(books, 2, 100_000, granted=False)
    books.denied(2, "exceeded", 101_000)
    books.completed(1, 500_000)
    release(books, 1, 501_000)
    result = summary(books)
    assert result["requests_denied_exceeded"] == 1
    assert result["denial_share"] == 0.5
    assert result["false_denials"] == 0


def test_a_caller_whose_release_is_still_on_its_way_counts_for_the_ideal_limiter():
    books = oracle(max_in_flight=1)
    serve(books, 1, 0, 100_000, released_after_us=None)
    # Request 2's acquire runs 0.5 ms after request 1 completed, before its
    # release landed: the store is right to refuse.
    acquire(books, 2, 100_500, granted=False)
    books.denied(2, "exceeded", 101_000)
    release(books, 1, 101_000)
    result = summary(books)
    assert result["false_denials"] == 0
    assert result["leaked_lease_seconds"] == 0


# -- concurrency excess, by cause ------------------------------------------------


def test_a_fail_open_admission_beside_a_counted_holder_is_excess_by_fail_open():
    books = oracle(max_in_flight=1)
    serve(books, 1, 0, 1_000_000)
    books.arrived(2, KEY, 1, 200_000)
    books.message_fault(2, "call_refused")
    books.admitted(2, False, 201_000)
    books.completed(2, 401_000)
    result = summary(books, last_fault_us=200_000)
    assert result["requests_admitted_unenforced"] == 1
    assert result["concurrency_excess_lease_seconds"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_by_fail_open"] == pytest.approx(0.2)
    assert result["concurrency_excess_peak"] == 1


def test_a_lease_reclaimed_after_its_ttl_while_its_caller_runs_is_excess_by_the_ttl():
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    # Request 2 arrives at 1.2 s: its acquire reclaims request 1's lease
    # (deadline 1 s) and is granted, while request 1 still runs until 2 s.
    acquire(books, 2, 1_200_000, reclaimed=("L1",))
    books.admitted(2, True, 1_201_000)
    books.completed(1, 2_000_000)
    books.completed(2, 2_000_000)
    result = summary(books)
    assert result["concurrency_excess_lease_seconds"] == pytest.approx(0.799)
    assert result["concurrency_excess_lease_seconds_by_lease_expired_while_held"] == (
        pytest.approx(0.799))
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == 0
    assert result["leases_expired_while_held"] == 1


def test_a_reclaim_on_a_replica_whose_clock_runs_ahead_is_the_ttl_not_the_store():
    books = oracle(max_in_flight=1, clocks=[ReplicaClock(), ReplicaClock(offset_us=500_000)])
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    # At true 600 ms, replica 1 reads 1.1 s: past request 1's deadline by its clock.
    books.arrived(2, KEY, 1, 600_000)
    books.observe(KEY, 600_000, 2, "command", {"L1": None, "L2": ms(1_100_000) + TTL_MS})
    books.admitted(2, True, 601_000)
    books.completed(1, 900_000)
    books.completed(2, 900_000)
    result = summary(books)
    assert result["concurrency_excess_lease_seconds_by_lease_expired_while_held"] > 0
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == 0


def test_a_lease_the_store_wrote_with_a_short_deadline_is_the_stores_excess():
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0, ttl_ms=TTL_MS // 2)  # half the TTL it was configured with
    books.admitted(1, True, 1_000)
    acquire(books, 2, 600_000, reclaimed=("L1",))
    books.admitted(2, True, 601_000)
    books.completed(1, 900_000)
    books.completed(2, 900_000)
    result = summary(books)
    assert result["concurrency_excess_lease_seconds_by_store_logic"] > 0
    assert result["concurrency_excess_lease_seconds_by_lease_expired_while_held"] == 0


def test_a_store_that_admits_past_its_own_count_is_the_stores_excess():
    books = oracle(max_in_flight=1)
    serve(books, 1, 0, 1_000_000)
    # Request 2's lease is written beside request 1's live one: the store
    # counted one and admitted anyway. No fault was injected.
    acquire(books, 2, 100_000)
    books.admitted(2, True, 101_000)
    books.completed(2, 301_000)
    release(books, 2, 302_000)
    result = summary(books)
    assert result["concurrency_excess_lease_seconds"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == pytest.approx(0.2)


def test_a_caller_admitted_on_another_commands_reply_is_the_stores_exposed_by_the_shift():
    books = oracle(max_in_flight=1)
    serve(books, 1, 0, 1_000_000)
    # Request 2's own acquire is refused, but its caller reads another
    # command's grant and goes ahead.
    acquire(books, 2, 100_000, granted=False)
    books.message_fault(2, "misaligned_reply")
    books.admitted(2, True, 101_000)
    books.completed(2, 301_000)
    result = summary(books, last_fault_us=101_000)
    assert result["misaligned_replies"] == 1
    assert result["misaligned_results_accepted"] == 1
    # The seed's echo check refuses such a reply: acting on it is the store's.
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_exposed_by"] == "misaligned_reply on acquire"
    assert result["misaligned_results_accepted_exposed_by"] == "misaligned_reply on acquire"
    assert result["store_logic_began_request"] == 2


def test_a_fail_open_admission_after_a_misaligned_reply_is_the_policy_not_an_accepted_reply():
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0, granted=False)
    books.message_fault(1, "misaligned_reply")  # the store saw the wrong echo...
    books.admitted(1, False, 1_000)  # ...and fell back on on_unavailable = allow
    books.completed(1, 2_000)
    result = summary(books, last_fault_us=1_000)
    assert result["misaligned_replies"] == 1
    assert result["misaligned_results_accepted"] == 0


@pytest.mark.parametrize(("how", "cause"), [("data_loss", "server_data_loss"),
                                            ("evicted", "evicted")])
def test_a_lease_the_lab_took_from_a_running_caller_is_blamed_on_the_lab(how, cause):
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    books.observe(KEY, 100_000, -1, how, {"L1": None})
    acquire(books, 2, 200_000)
    books.admitted(2, True, 201_000)
    books.completed(1, 500_000)
    books.completed(2, 500_000)
    result = summary(books, last_fault_us=100_000)
    assert result[f"concurrency_excess_lease_seconds_by_{cause}"] == pytest.approx(0.299)
    assert result[f"leases_lost_to_{how}"] == 1


def test_leases_belong_to_the_request_whose_command_wrote_them_whatever_their_ids():
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    # Request 2's acquire writes the same id as request 1's lease: it takes
    # request 1's slot. No fault: the store's id scheme is to blame.
    books.arrived(2, KEY, 0, 100_000)
    books.observe(KEY, 100_000, 2, "command", {"L1": ms(100_000) + TTL_MS})
    books.admitted(2, True, 101_000)
    books.completed(1, 500_000)
    books.completed(2, 500_000)
    books.observe(KEY, 501_000, 2, "command", {"L1": None})  # request 2's release
    result = summary(books)
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == pytest.approx(0.399)
    assert result["leases_leaked"] == 0


def test_excess_splits_between_the_uncounted_callers_and_the_stores_own_count():
    # Three holders against a limit of one: one counted, one counted past
    # the limit (the store's), one fail-open (the lab's).
    excess = concurrency_excess([(0, 1), (0, 1), (0, 1), (1_000_000, -3)],
                                [(0, 1_000_000, "fail_open")], max_in_flight=1)
    assert excess.lease_seconds == pytest.approx(2.0)
    assert excess.by_cause["store_logic"] == pytest.approx(1.0)
    assert excess.by_cause["fail_open"] == pytest.approx(1.0)
    assert excess.peak == 2


def test_a_caller_leaving_as_another_arrives_is_no_excess_peak():
    excess = concurrency_excess([(0, 1), (500, -1), (500, 1), (900, -1)], [], max_in_flight=1)
    assert excess.peak == 0 and excess.lease_seconds == 0


# -- leaked leases, by cause -------------------------------------------------------


def test_a_lease_whose_caller_crashed_leaks_until_its_deadline_by_crash():
    books = oracle()
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    books.aborted(1, 200_000)
    result = summary(books, last_fault_us=200_000)
    assert result["requests_aborted_by_crash"] == 1
    assert result["leases_leaked"] == 1
    assert result["leaked_lease_seconds_by_crash"] == pytest.approx(0.8)
    assert result["leaked_leases_peak"] == 1
    assert result["convergence_after_faults_us"] == 800_000


def test_a_crash_that_kills_a_release_on_its_way_is_the_crash():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)
    books.aborted(1, 100_500)  # in the release window: its release died with it
    result = summary(books, last_fault_us=100_500)
    assert result["requests_aborted_by_crash"] == 0  # the request itself was over
    assert result["leaked_lease_seconds_by_crash"] == pytest.approx(0.9)
    assert result["leaked_lease_seconds_by_store_logic"] == 0


def test_an_acquire_whose_reply_was_lost_leaks_its_lease_until_compensated():
    books = oracle()
    acquire(books, 1, 0)
    books.message_fault(1, "reply_lost")
    books.message_fault(1, "call_timed_out")
    books.denied(1, "store_unavailable", 50_000)
    release(books, 1, 60_000)  # the compensation lands
    result = summary(books, last_fault_us=1_000)
    assert result["leaked_lease_seconds_by_abandoned_acquire"] == pytest.approx(0.01)
    assert result["fail_closed_denials"] == 1


def test_a_caller_that_waited_out_its_timeout_abandoned_its_acquire():
    books = oracle()
    books.arrived(1, KEY, 0, 0)
    # The grant came too late for a caller whose timeout ran out: no message
    # fault, but the lab's latency outlasted the budget it configured.
    books.observe(KEY, 60_000, 1, "command", {"L1": ms(0) + TTL_MS})
    books.denied(1, "store_unavailable", TIMEOUT_US)
    release(books, 1, 70_000)
    result = summary(books)
    assert result["leaked_lease_seconds_by_abandoned_acquire"] == pytest.approx(0.01)
    assert result["leaked_lease_seconds_by_store_logic"] == 0


def test_a_release_lost_once_and_never_retried_is_the_stores_exposed_by_the_loss():
    # The seed retries a failed release on fresh connections: a store that
    # does not is at fault, and the lost request is what exposed it.
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)
    books.message_fault(1, "request_lost", "release")
    books.message_fault(1, "call_timed_out", "release")
    result = summary(books, last_fault_us=100_000)
    assert result["leaked_lease_seconds_by_release_lost"] == 0
    assert result["leaked_lease_seconds_by_store_logic"] == pytest.approx(0.9)
    assert result["leaked_lease_seconds_exposed_by"] == "request_lost on release"
    assert result["store_logic_began_at_us"] == 100_000


def test_a_release_lost_once_then_retried_is_release_lost():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)
    books.message_fault(1, "request_lost", "release")
    books.message_fault(1, "call_timed_out", "release")
    release(books, 1, 400_000)  # the retry on a fresh connection lands
    result = summary(books, last_fault_us=100_000)
    assert result["leaked_lease_seconds_by_release_lost"] == pytest.approx(0.3)
    assert result["leaked_lease_seconds_by_store_logic"] == 0


def test_a_refused_callers_lease_never_given_back_is_the_stores_from_the_refusal():
    # No timeout window excuses it: the store never sent the compensation.
    books = oracle(max_in_flight=2)
    acquire(books, 1, 0)
    books.message_fault(1, "reply_lost", "acquire")
    books.message_fault(1, "call_timed_out", "acquire")
    books.denied(1, "store_unavailable", 50_000)
    acquire(books, 2, 60_000)
    acquire(books, 3, 70_000, granted=False)
    books.denied(3, "exceeded", 71_000)
    result = summary(books, last_fault_us=50_000)
    assert result["leaked_lease_seconds_by_store_logic"] == pytest.approx(0.95)
    assert result["leaked_lease_seconds_exposed_by"] == "reply_lost on acquire"
    assert result["false_denials_by_store_logic"] == 1
    assert result["false_denials_exposed_by"] == "reply_lost on acquire"


def test_a_release_whose_attempts_all_failed_gave_up():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)
    for _ in range(RELEASE_MAX_ATTEMPTS):  # every attempt the seed makes
        books.message_fault(1, "call_refused", "release")
    result = summary(books, last_fault_us=300_000)
    assert result["leaked_lease_seconds_by_release_gave_up"] == pytest.approx(0.9)
    assert result["leaked_lease_seconds_by_release_lost"] == 0
    assert result["leaked_lease_seconds_by_store_logic"] == 0


def test_a_release_that_gave_up_before_its_attempts_ran_out_is_the_stores():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)
    for _ in range(3):
        books.message_fault(1, "call_refused", "release")
    result = summary(books, last_fault_us=300_000)
    assert result["leaked_lease_seconds_by_release_gave_up"] == 0
    assert result["leaked_lease_seconds_by_store_logic"] == pytest.approx(0.9)
    assert result["leaked_lease_seconds_exposed_by"] == "call_refused on release"


def test_a_release_never_sent_with_no_fault_is_the_stores_leak():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)
    result = books.summary(500_000, None)
    assert result["leaked_lease_seconds_by_store_logic"] == pytest.approx(0.4)
    assert result["leases_still_leaked_at_end"] == 1
    assert result["convergence_after_faults_us"] == -1


def test_a_release_landing_after_the_grace_with_no_fault_is_the_stores_leak():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=GRACE_US + 50_000)
    result = summary(books)
    assert result["leaked_lease_seconds_by_store_logic"] == pytest.approx(0.15)


def test_a_restore_that_brings_back_a_released_lease_leaks_it_by_server_data_loss():
    books = oracle()
    serve(books, 1, 0, 100_000)
    books.observe(KEY, 300_000, -1, "data_loss", {"L1": ms(0) + TTL_MS})
    result = summary(books, last_fault_us=300_000)
    assert result["leaked_lease_seconds_by_server_data_loss"] == pytest.approx(0.7)


def test_a_lease_no_request_wrote_is_the_stores_leak():
    books = oracle()
    books.observe(KEY, 0, -1, "command", {"stray": ms(0) + TTL_MS})
    result = summary(books)
    assert result["leaked_lease_seconds_by_store_logic"] == pytest.approx(1.0)


# -- false denials -----------------------------------------------------------------


def test_a_denial_caused_by_a_crashed_callers_lease_is_false_by_leaked_leases():
    books = oracle()
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    books.aborted(1, 100_000)
    acquire(books, 2, 200_000, granted=False)
    books.denied(2, "exceeded", 201_000)
    result = summary(books, last_fault_us=100_000)
    assert result["false_denials"] == 1
    assert result["false_denials_by_leaked_leases"] == 1


def test_a_denial_with_room_and_nothing_leaked_by_the_lab_is_the_stores():
    books = oracle()
    acquire(books, 1, 0, granted=False)
    books.denied(1, "exceeded", 1_000)
    result = summary(books)
    assert result["false_denials"] == 1
    assert result["false_denials_by_store_logic"] == 1


def test_a_denial_behind_a_lease_the_store_leaked_itself_is_the_stores():
    books = oracle()
    serve(books, 1, 0, 100_000, released_after_us=None)  # never released, no fault
    acquire(books, 2, 500_000, granted=False)
    books.denied(2, "exceeded", 501_000)
    assert summary(books)["false_denials_by_store_logic"] == 1


def test_a_caller_that_read_another_commands_denial_is_the_stores_false_denial():
    books = oracle()
    acquire(books, 1, 0)  # its own acquire is granted...
    books.message_fault(1, "misaligned_reply")  # ...but it reads another's refusal
    books.denied(1, "exceeded", 1_000)
    result = summary(books, last_fault_us=1_000)
    # The refusal echoes another lease id: the seed's check would not act on it.
    assert result["false_denials_by_store_logic"] == 1
    assert result["false_denials_exposed_by"] == "misaligned_reply on acquire"


def test_a_retry_whose_second_run_counted_its_own_lease_is_a_duplicate_execution_denial():
    books = oracle()
    acquire(books, 1, 0)
    books.message_fault(1, "reply_lost")
    books.message_fault(1, "call_retried")
    books.message_fault(1, "duplicate_execution")
    books.observe(KEY, 20_000, 1, "command", {})  # the retry counts its own lease
    books.denied(1, "exceeded", 21_000)
    assert summary(books, last_fault_us=20_000)["false_denials_by_duplicate_execution"] == 1


# -- answers read off a retired connection ------------------------------------------
# The caller's timeout is 50 ms (``TIMEOUT_US``): the seed's liveness budget
# is at least 100 ms. Generation 1 opened at 0.


def fail_open_after_a_retirement(what: str, invoke: str | None, ran_ms: int,
                                 recorded: bool = True) -> dict:
    """Request 1 holds its lease; the lab does ``what`` to request 2's
    acquire; generation 1 is retired at 150 ms by ``invoke`` after
    ``ran_ms``, and request 3's reply, read off it, is answered unavailable:
    fail-open admits it for 200 ms beside request 1."""
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    books.arrived(2, KEY, 0, 100_000)
    books.message_fault(2, what, "acquire")
    books.arrived(3, KEY, 0, 120_000)
    if recorded:
        books.answered_untrusted(3, 1, ms(0), ms(150_000), invoke, ran_ms)
    else:  # the store kept no record of how it retired the generation
        books.answered_untrusted(3, 1, None, None, None, 0)
    books.admitted(3, False, 160_000)
    books.completed(3, 360_000)
    books.denied(2, "store_unavailable", 150_000)
    books.completed(1, 1_000_000)
    release(books, 1, 1_001_000)
    return summary(books, last_fault_us=100_000)


def test_fail_open_after_a_healthy_connection_retired_early_is_the_stores_exposed_by_the_fault():
    result = fail_open_after_a_retirement("slow_reply", "acquire", 50)
    assert result["concurrency_excess_lease_seconds"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_exposed_by"] == "slow_reply on acquire"


@pytest.mark.parametrize(("what", "owner"), [("reply_lost", "fail_open"),
                                             ("slow_reply", "store_logic")])
def test_an_unrecorded_retirement_is_warranted_only_where_the_lab_failed_a_call(what, owner):
    result = fail_open_after_a_retirement(what, None, 0, recorded=False)
    assert result[f"concurrency_excess_lease_seconds_by_{owner}"] == pytest.approx(0.2)


def test_an_echo_claimed_on_a_connection_nothing_failed_is_the_stores():
    """Only a misaligned connection echoes another lease id, and only a call
    the lab failed misaligns one: a store retiring a generation for an echo
    after a merely slow reply retired a healthy connection."""
    result = fail_open_after_a_retirement("slow_reply", None, 0)
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_exposed_by"] == "slow_reply on acquire"


@pytest.mark.parametrize(("what", "invoke", "ran_ms"), [
    ("reply_lost", "acquire", 50),  # the connection really failed
    ("connection_stalled", "acquire", 50),
    ("slow_reply", "acquire", 100),  # the reply outlived the seed's liveness budget
    ("slow_reply", "release", 50),  # a release's budget is its own
    ("waiter_dropped", None, 0),  # a reply echoed another lease id on a misaligned link
], ids=["reply_lost", "stalled", "past_liveness", "by_a_release", "echo"])
def test_fail_open_after_a_warranted_retirement_is_the_policy(what, invoke, ran_ms):
    result = fail_open_after_a_retirement(what, invoke, ran_ms)
    assert result["concurrency_excess_lease_seconds_by_fail_open"] == pytest.approx(0.2)
    assert result["concurrency_excess_lease_seconds_by_store_logic"] == 0


@pytest.mark.parametrize("untrusted", [False, True], ids=["trusted", "untrusted"])
def test_a_refusal_read_off_a_retired_connection_is_the_stores_exposed_by_the_fault(untrusted):
    """Request 1's caller gave up on its slowed acquire, which then wrote its
    lease; request 2's acquire is refused by it, and the lease is given back
    (compensated) at once. A trusted refusal is the lab's (the abandoned
    acquire's lease filled the count); one read off a generation the store
    no longer trusted is the store's: a sound store answers it unavailable."""
    books = oracle(max_in_flight=1)
    books.arrived(1, KEY, 0, 0)
    books.message_fault(1, "slow_reply", "acquire")
    books.denied(1, "store_unavailable", 50_000)
    books.arrived(2, KEY, 0, 60_000)
    books.observe(KEY, 200_000, 1, "command", {"L1": ms(0) + TTL_MS})
    books.observe(KEY, 200_000, 2, "command", {})
    if untrusted:
        books.answered_untrusted(2, 1, ms(0), ms(150_000), "acquire", 150)
    books.denied(2, "exceeded", 201_000)
    release(books, 1, 202_000)
    result = summary(books, last_fault_us=200_000)
    assert result["false_denials"] == 1
    if untrusted:
        assert result["false_denials_by_store_logic"] == 1
        assert result["false_denials_exposed_by"] == "slow_reply on acquire"
    else:
        assert result["false_denials_by_leaked_leases"] == 1


# -- samples and the causes themselves ------------------------------------------------


def test_a_sample_shows_callers_holding_against_leases_counted_and_leaked():
    books = oracle(max_in_flight=1)
    acquire(books, 1, 0)
    books.admitted(1, True, 1_000)
    books.aborted(1, 100_000)
    books.arrived(2, KEY, 1, 200_000)
    books.admitted(2, False, 201_000)
    aggregate, row = books.sample(300_000, per_key=True)
    assert aggregate["subject"] == "*" and row["subject"] == "alice"
    assert row["callers_holding"] == 1 and row["callers_uncounted"] == 1
    assert row["leases_counted"] == 1 and row["leases_leaked"] == 1
    assert aggregate["requests_in_flight"] == 1 and aggregate["requests_admitted"] == 2


def test_every_cause_list_ends_with_the_stores_own_and_names_only_network_faults():
    for causes in (EXCESS_CAUSES, LEAK_CAUSES, DENIAL_CAUSES):
        assert causes[-1] == "store_logic"
    assert ATTEMPT_ENDS <= CALL_FAILURES <= MESSAGE_FAULTS
    assert "call_timed_out" in ATTEMPT_ENDS


# -- unavailable on a healthy replica ----------------------------------------------


def unavailable_answer(*, at_us: int = 6_000_000, answered_after_us: int = 2_000,
                       fault_at_us: int | None = None, waiting: int = 0,
                       invoke_cap: int | None = 4, lab_faults=None) -> dict:
    """Request 1 arrives at ``at_us`` on an idle key and is answered
    unavailable ``answered_after_us`` later (fail-closed); ``waiting`` other
    callers of its replica are still waiting then."""
    books = LeaseOracle(1, lease_ttl_ms=TTL_MS, release_grace_us=GRACE_US,
                        acquire_timeout_us=TIMEOUT_US, invoke_cap=invoke_cap,
                        lab_faults=lab_faults)
    books.replica_clocks([ReplicaClock(), ReplicaClock()])
    if fault_at_us is not None:
        books.arrived(9, ("ns", "bob"), 0, fault_at_us)
        books.now_us = fault_at_us
        books.message_fault(9, "reply_lost", "acquire")
    for other in range(waiting):
        books.arrived(20 + other, ("ns", f"other-{other}"), 0, at_us)
    books.arrived(1, KEY, 0, at_us)
    books.denied(1, "store_unavailable", at_us + answered_after_us)
    return summary(books)


def test_an_unavailable_answer_on_a_replica_nothing_was_done_to_is_the_store_s_false_denial():
    """Mutation found it: a store answering every acquire unavailable (a
    negated slot or echo check) on a healthy connection was filed as the
    fail-closed policy's."""
    result = unavailable_answer()
    assert result["false_denials"] == result["false_denials_by_store_logic"] == 1


@pytest.mark.parametrize("case", [
    {"answered_after_us": TIMEOUT_US},  # its timeout ran out: a slow reply explains it
    {"fault_at_us": 2_000_000},  # the lab failed a call of the replica 4 s before
    {"waiting": 4},  # as many callers waiting as the invoke cap: it may be full
    {"lab_faults": Faults.model_validate({"pause": {"rate": "1/h", "duration": "1s"}})},
], ids=["past_its_timeout", "after_a_fault", "cap_may_be_full", "rated_faults"])
def test_an_unavailable_answer_something_may_explain_is_the_policy_s(case):
    assert unavailable_answer(**case)["false_denials"] == 0
