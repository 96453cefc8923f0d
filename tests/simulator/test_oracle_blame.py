"""The oracle blames what the lab did, never how the store's record changed.

Each test feeds the budget oracle the facts of a tiny story by hand — what
the gateways did, what the network did to their messages, and the store's
record after each command — and checks whom the verdict blames. Whole runs
with deliberately broken stores (``tests/mutants/``) check the same from the
outside.
"""

from __future__ import annotations

from simulator.engine.runtime import EPOCH_MS, ReplicaClock
from simulator.families.axond_budget.scope_oracle import ScopeOracle

KEY = ("ns", "alice")
OTHER = ("ns", "bob")
SERVER = "server"
TTL_MS = 1_000
CAP = 10_000


def oracle(**options) -> ScopeOracle:
    return ScopeOracle(lambda key: CAP, reservation_ttl_ms=TTL_MS,
                       clocks=[ReplicaClock(), ReplicaClock()], **options)


def ms(at_us: int) -> int:
    """Epoch milliseconds on an unskewed clock at virtual time ``at_us``."""
    return EPOCH_MS + at_us // 1_000


def reserve(books: ScopeOracle, number: int, at_us: int, holds: dict, estimate: int = 1_000,
            key=KEY, replica: int = 0, spent: int = 0) -> None:
    """Request ``number`` arrives and its reserve runs, leaving ``holds``."""
    books.arrived(number, key, estimate, estimate, replica, at_us)
    books.observe(key, SERVER, at_us, number, "command", spent=spent, holds=holds)


def test_a_hold_reclaimed_after_its_honest_deadline_expired():
    books = oracle()
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    # Request 2's reserve reclaims it once the writer's TTL has run out.
    reserve(books, 2, 1_200_000, {"b": (1_000, ms(1_200_000) + TTL_MS)})
    summary = books.summary(2_000_000, None)
    assert summary["premature_expiries"] == 1
    assert summary["holds_removed_by_store"] == 0


def test_a_hold_another_request_deletes_before_its_deadline_is_the_stores_doing():
    books = oracle()
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    # Request 2's command wipes request 1's live hold (a settle that deletes
    # the whole hash, say): no TTL ran out, no fault was injected.
    reserve(books, 2, 100_000, {"b": (1_000, ms(100_000) + TTL_MS)})
    books.observe(KEY, SERVER, 150_000, 2, "command", holds={})
    summary = books.summary(2_000_000, None)
    assert summary["premature_expiries"] == 0
    assert summary["holds_removed_by_store"] == 1  # request 2's own is a release
    # Both still run uncounted: 1's hold was taken from it, 2 released its own
    # without a charge (no fault to blame for either).
    assert books.books[KEY].buckets["store_logic"] == 2_000
    assert books.books[KEY].buckets["hold_expired_while_running"] == 0


def test_a_deadline_shorter_than_the_configured_ttl_does_not_excuse_the_reclaim():
    books = oracle()
    # The store wrote half the TTL it was asked for; a reclaim at 600 ms
    # honours the written deadline but not the configured one.
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS // 2)})
    books.admitted(1, True, 0)
    reserve(books, 2, 600_000, {"b": (1_000, ms(600_000) + TTL_MS // 2)})
    summary = books.summary(2_000_000, None)
    assert summary["premature_expiries"] == 0
    assert summary["holds_removed_by_store"] == 1


def test_a_reclaim_on_a_replica_whose_clock_runs_ahead_is_the_labs_clock_skew():
    books = ScopeOracle(lambda key: CAP, reservation_ttl_ms=TTL_MS,
                        clocks=[ReplicaClock(), ReplicaClock(offset_us=500_000)])
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    # At true 600 ms replica 1 reads 1.1 s: past the deadline by its clock.
    books.arrived(2, KEY, 1_000, 1_000, 1, 600_000)
    books.observe(KEY, SERVER, 600_000, 2, "command", holds={})
    summary = books.summary(2_000_000, None)
    assert summary["premature_expiries"] == 1
    assert summary["holds_removed_by_store"] == 0


def test_holds_belong_to_the_request_whose_command_wrote_them_whatever_their_ids():
    books = oracle()
    reserve(books, 1, 0, {"same": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    # Request 2 mints the same id: its reserve overwrites request 1's hold.
    reserve(books, 2, 10_000, {"same": (1_000, ms(10_000) + TTL_MS)})
    books.admitted(2, True, 10_000)
    summary = books.summary(20_000, None)
    assert summary["holds_leaked"] == 0  # no phantom leak
    assert summary["holds_removed_by_store"] == 1  # request 1 lost its hold to the store
    assert books.books[KEY].buckets["store_logic"] == 1_000


def test_a_reserve_whose_reply_was_lost_is_no_wrongful_admission():
    books = oracle()
    reserve(books, 1, 0, {}, estimate=CAP, spent=0)
    books.admitted(1, True, 0)
    books.observe(KEY, SERVER, 0, 1, "command", holds={"a": (CAP, ms(0) + TTL_MS)})
    # Request 2's reserve runs with no room in truth and is admitted by the
    # store, but its reply is lost: the gateway denies it.
    reserve(books, 2, 1_000, {"a": (CAP, ms(0) + TTL_MS), "b": (1_000, ms(1_000) + TTL_MS)})
    books.message_fault(2, "reply_lost")
    books.denied(2, "store_unavailable", 101_000)
    summary = books.summary(200_000, None)
    assert summary["wrongful_admissions"] == 0
    assert summary["holds_leaked"] == 1
    assert summary["leaked_hold_microdollar_seconds_by_message_lost"] > 0
    assert summary["leaked_hold_microdollar_seconds_by_store_logic"] == 0


def test_a_release_its_settlement_ran_without_the_charge_is_the_stores_whatever_was_lost():
    # The contract (seed 000:110-111): release and charge are one script, so a
    # lost reply after the release ran excuses nothing; it names the exposure.
    for fault in (None, "reply_lost"):
        books = oracle()
        reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
        books.admitted(1, True, 0)
        books.completed(1, 50_000)
        books.observe(KEY, SERVER, 50_000, 1, "command", holds={})  # released, not charged
        if fault is not None:
            books.message_fault(1, fault, "HDEL")
        books.settled(1, 60_000)
        drift = books.summary(100_000, None)
        assert drift["conservation_drift_microdollars_total"] == -1_000
        assert drift["conservation_drift_by_store_logic_microdollars"] == -1_000, fault
        assert drift["conservation_undercount_by_store_logic_microdollars"] == 1_000
        assert drift["conservation_drift_microdollars_total_exposed_by"] == (
            "reply_lost on HDEL" if fault else "no fault")


def test_a_settlement_lost_before_it_ran_is_the_labs():
    books = oracle()
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    books.completed(1, 50_000)
    books.message_fault(1, "request_lost", "settle_v1")  # the hold is still there
    books.settled(1, 60_000)
    drift = books.summary(100_000, None)
    assert drift["conservation_drift_by_settlement_lost_microdollars"] == -1_000
    assert drift["conservation_undercount_by_settlement_lost_microdollars"] == 1_000
    assert drift["conservation_drift_by_store_logic_microdollars"] == 0


def test_a_charge_on_another_requests_key_is_the_stores_overcount():
    books = oracle()
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    books.completed(1, 50_000)
    # The settle releases alice's hold but charges bob.
    books.observe(KEY, SERVER, 50_000, 1, "command", holds={})
    books.observe(OTHER, SERVER, 50_000, 1, "command", spent=1_000)
    books.settled(1, 60_000)
    summary = books.summary(100_000, None)
    assert summary["conservation_drift_microdollars_total"] == 0  # they cancel in the sum
    assert summary["conservation_undercount_microdollars_total"] == 1_000
    assert summary["conservation_overcount_microdollars_total"] == 1_000
    assert summary["conservation_drift_by_store_logic_microdollars"] == 0
    assert books.books[KEY].drift_by_cause()["store_logic"] == -1_000
    assert books.books[OTHER].drift_by_cause()["store_logic"] == 1_000


def test_a_retried_settle_charges_twice_by_the_labs_duplicate_a_store_on_its_own():
    for fault, cause in (("duplicate_execution", "duplicate_execution"), (None, "store_logic")):
        books = oracle()
        reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
        books.admitted(1, True, 0)
        books.completed(1, 50_000)
        books.observe(KEY, SERVER, 50_000, 1, "command", spent=1_000, holds={})
        if fault is not None:
            books.message_fault(1, fault)
        books.observe(KEY, SERVER, 60_000, 1, "command", spent=2_000, holds={})
        books.settled(1, 70_000)
        summary = books.summary(100_000, None)
        assert summary["duplicate_settlements_executed"] == 1
        assert summary[f"conservation_drift_by_{cause}_microdollars"] == 1_000


def test_a_crashed_replicas_ledger_is_lost_with_it_not_to_the_server():
    books = ScopeOracle(lambda key: CAP, per_replica=True, reservation_ttl_ms=TTL_MS)
    replica = (0, 0)
    books.arrived(1, KEY, 1_000, 1_000, 0, 0)
    books.observe(KEY, replica, 0, 1, "command", spent=0, holds={"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    books.completed(1, 50_000)
    books.observe(KEY, replica, 50_000, 1, "command", spent=1_000, holds={})
    books.settled(1, 50_000)
    books.source_lost(replica, 60_000)
    summary = books.summary(100_000, None)
    assert summary["spend_lost_to_crashed_replica_ledger_microdollars"] == 1_000
    assert summary["conservation_drift_by_crashed_replica_ledger_microdollars"] == -1_000
    assert summary["spend_lost_to_data_loss_microdollars"] == 0


def test_a_denial_by_a_record_holding_leaked_holds_is_blamed_on_why_they_leaked():
    books = oracle()
    reserve(books, 1, 0, {"a": (CAP, ms(0) + TTL_MS)}, estimate=CAP)
    books.aborted(1, 10_000)  # its replica crashed: the hold leaks
    reserve(books, 2, 20_000, {"a": (CAP, ms(0) + TTL_MS)})
    had_room, blame = books.denied(2, "exceeded", 20_000)
    assert had_room
    assert blame == "leaked_holds_replica_crash"


def test_a_denial_its_own_honest_record_had_room_for_is_the_stores_logic():
    books = oracle()
    reserve(books, 1, 0, {})
    had_room, blame = books.denied(1, "exceeded", 0)
    assert had_room
    assert blame is None  # this scope's record had room: the refusal was not its
    books.arrived(2, KEY, 1_000, 1_000, 0, 10_000)
    had_room, blame = books.denied(2, "store_unavailable", 10_000)
    assert (had_room, blame) == (True, "store_logic")  # unreachable, yet nothing was lost


def test_a_per_replica_store_lowering_spend_by_a_command_is_no_eviction():
    # Issue 24: only an observed eviction is ``eviction``; with one replica,
    # no part is ``per_replica_ledger`` either.
    books = oracle(per_replica=True)
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    books.completed(1, 50_000)
    books.observe(KEY, SERVER, 50_000, 1, "command", spent=1_000, holds={})
    books.settled(1, 60_000)
    books.observe(KEY, SERVER, 70_000, -1, "command", spent=0)  # the store forgets it
    reserve(books, 2, 80_000, {"b": (10_000, ms(80_000) + TTL_MS)}, estimate=10_000)
    books.admitted(2, True, 80_000)
    summary = books.summary(200_000, None)
    assert summary["conservation_drift_by_eviction_microdollars"] == 0
    assert summary["conservation_drift_by_store_logic_microdollars"] == -1_000
    assert summary["wrongful_admissions_by_per_replica_ledger"] == 0
    assert summary["wrongful_admissions_by_store_logic"] == 1


def test_an_observed_idle_eviction_is_the_configured_bound():
    books = oracle(per_replica=True)
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    books.completed(1, 50_000)
    books.observe(KEY, SERVER, 50_000, 1, "command", spent=1_000, holds={})
    books.settled(1, 60_000)
    books.observe(KEY, SERVER, 70_000, -1, "evicted", spent=0, holds={})
    summary = books.summary(200_000, None)
    assert summary["conservation_drift_by_eviction_microdollars"] == -1_000
    assert summary["conservation_drift_by_store_logic_microdollars"] == 0


def test_a_hold_counted_past_its_deadline_is_the_stores_past_it():
    books = oracle(holds_expire=False)
    reserve(books, 1, 0, {"a": (1_000, ms(0) + TTL_MS)})
    books.admitted(1, True, 0)
    books.aborted(1, 100_000)  # its replica crashed: the hold leaks
    summary = books.summary(3_100_000, None)
    # Within its deadline (0.9 s after the crash) the crash's; the 2.1 s after, the store's.
    assert summary["leaked_hold_microdollar_seconds_by_replica_crash"] == 900.0
    assert summary["leaked_hold_microdollar_seconds_by_store_logic"] == 2_100.0
    assert summary["leaked_hold_microdollar_seconds_exposed_by"] == "replica_crash"
