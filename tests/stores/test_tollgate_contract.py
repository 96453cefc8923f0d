"""The contract every tollgate ledger keeps, run against each implementation.

``make_ledger`` is parametrised by kind (``tollgate_ledgers.LEDGER_KINDS``):
``MemoryLedger``, and ``PostgresLedger`` on a fresh schema of the session's
throwaway cluster. Every test ends by checking the funding equation on every
account.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tollgate_ledgers import LEDGER_KINDS, ledger_factory, run

from stores.tollgate import errors
from stores.tollgate.domain import (
    LEDGER_UNITS_MAX,
    AccountConfig,
    AccountStatus,
    BudgetSchedule,
    CapacityClass,
    Conservation,
    GrantPolicy,
    IngestReport,
    LeaseState,
    LeaseView,
    UsageEvent,
)
from stores.tollgate.ports import drain_reclaim_expired

GRACE = 30_000
TTL = 60_000
POLICY = GrantPolicy(shrink_divisor=2, min_grant=1, max_ttl_ms=300_000, reclaim_grace_ms=GRACE)


@pytest.fixture(params=LEDGER_KINDS)
def make_ledger(request) -> Callable[[GrantPolicy], Any]:
    with ledger_factory(request) as make:
        yield make


def funds(ledger, account: int) -> Conservation:
    """The account's funding terms through the trait's own read."""
    return run(ledger.account_view(account)).conservation


@pytest.fixture
def ledger(make_ledger):
    ledger = make_ledger(POLICY)
    yield ledger
    for account in range(1, 10):  # the ids these tests use
        view = run(ledger.account_view(account))
        assert view is None or view.conservation.holds(), f"account {account}: {view}"


def open_account(ledger, account: int = 1, balance: int = 100, **kwargs) -> None:
    run(ledger.create_account(AccountConfig(account, balance, **kwargs)))


def usage(grant, request_id: str, units: int, *, token: int | None = None,
          account: int | None = None) -> UsageEvent:
    return UsageEvent(request_id, grant.lease_id,
                      grant.account_id if account is None else account,
                      grant.fencing_token if token is None else token, units)


def ingest(ledger, *events: UsageEvent, now: int = 0) -> IngestReport:
    report = run(ledger.ingest(list(events), now))
    report.validate(len(events))
    return report


# -- acquire ---------------------------------------------------------------------


def test_acquire_grants_the_request_from_a_deep_balance_and_shrinks_near_exhaustion(ledger):
    open_account(ledger, balance=100)
    assert run(ledger.acquire(1, 10, TTL, 0)).grant.granted == 10
    # 90 left: the cap is 45, so a request for 1000 gets 45.
    assert run(ledger.acquire(1, 1_000, TTL, 0)).grant.granted == 45
    assert funds(ledger, 1).balance == 45


def test_fencing_tokens_strictly_increase_per_account(ledger):
    open_account(ledger, 1, 1_000)
    open_account(ledger, 2, 1_000)
    tokens = [run(ledger.acquire(1, 1, TTL, 0)).grant.fencing_token for _ in range(4)]
    assert tokens == sorted(set(tokens))
    assert run(ledger.acquire(2, 1, TTL, 0)).grant.fencing_token == 1, (
        "each account has its own sequence")
    lease = run(ledger.acquire(1, 1, TTL, 0)).grant
    run(ledger.release(lease.lease_id, lease.fencing_token, 1, 0))
    assert run(ledger.acquire(1, 1, TTL, 0)).grant.fencing_token > lease.fencing_token


def test_a_ttl_is_clamped_to_the_policy_and_must_be_positive(ledger):
    open_account(ledger)
    assert run(ledger.acquire(1, 1, 10**9, 5)).grant.expires_at == 5 + POLICY.max_ttl_ms
    for ttl in (0, -1):
        with pytest.raises(errors.InvalidTtl):
            run(ledger.acquire(1, 1, ttl, 0))


def test_acquire_refuses_unknown_and_inactive_accounts(ledger):
    with pytest.raises(errors.UnknownAccount):
        run(ledger.acquire(9, 1, TTL, 0))
    open_account(ledger, status=AccountStatus.SUSPENDED)
    with pytest.raises(errors.AccountInactive):
        run(ledger.acquire(1, 1, TTL, 0))


def test_an_empty_balance_attests_where_the_funding_went(ledger):
    open_account(ledger, balance=1)
    lease = run(ledger.acquire(1, 5, TTL, 0)).grant
    with pytest.raises(errors.BalanceInsufficient) as caught:
        run(ledger.acquire(1, 5, TTL, 0))
    assert caught.value.evidence.remaining == 1, "all of it on the other lease"
    ingest(ledger, usage(lease, "r1", 1))
    with pytest.raises(errors.BalanceExhausted):
        run(ledger.acquire(1, 5, TTL, 0))


def test_a_zero_request_is_refused_as_one_no_balance_can_fund(ledger):
    """Seed 003: "a zero request or a balance unable to fund any grant refuses
    the whole exchange" -- a refusal, the lease given back untouched, not a
    caller's error."""
    open_account(ledger, balance=100)
    with pytest.raises(errors.BalanceInsufficient) as caught:
        run(ledger.acquire(1, 0, TTL, 0))
    assert caught.value.evidence.remaining == 100
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    with pytest.raises(errors.BalanceInsufficient):
        run(ledger.consolidate(lease.lease_id, lease.fencing_token, 4, 0, 0, TTL, 0))
    # The exchange refused whole: the lease still holds, its units unreturned.
    assert funds(ledger, 1).active_lease_grants == 10 and funds(ledger, 1).balance == 90
    run(ledger.release(lease.lease_id, lease.fencing_token, 10, 0))


def test_an_allocation_attests_the_funding_left_counting_its_own_lease(ledger):
    open_account(ledger, balance=100)
    allocation = run(ledger.acquire(1, 10, TTL, 0))
    assert allocation.funding.remaining == 100
    ingest(ledger, usage(allocation.grant, "r1", 4))
    assert run(ledger.acquire(1, 10, TTL, 0)).funding.remaining == 96


# -- release ---------------------------------------------------------------------


def test_release_requires_the_stored_pair_and_credits_unspent(ledger):
    open_account(ledger, balance=100)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    with pytest.raises(errors.UnknownLease):
        run(ledger.release(lease.lease_id + 99, lease.fencing_token, 0, 0))
    with pytest.raises(errors.Fenced):
        run(ledger.release(lease.lease_id, lease.fencing_token + 1, 0, 0))
    with pytest.raises(errors.InvalidRelease):
        run(ledger.release(lease.lease_id, lease.fencing_token, 11, 0))
    ingest(ledger, usage(lease, "r1", 3))
    with pytest.raises(errors.InvalidRelease):
        run(ledger.release(lease.lease_id, lease.fencing_token, 8, 0))
    run(ledger.release(lease.lease_id, lease.fencing_token, 5, 0))
    c = funds(ledger, 1)
    assert (c.balance, c.active_lease_grants, c.settled_usage, c.settlement_loss) == (95, 0, 3, 2)
    with pytest.raises(errors.LeaseNotActive):
        run(ledger.release(lease.lease_id, lease.fencing_token, 0, 0))


def test_a_newer_token_fences_no_other_lease(ledger):
    open_account(ledger, balance=100)
    older = run(ledger.acquire(1, 10, TTL, 0)).grant
    run(ledger.acquire(1, 10, TTL, 0))
    run(ledger.release(older.lease_id, older.fencing_token, 10, 0))


def test_release_is_accepted_through_the_grace_and_not_after(ledger):
    open_account(ledger, balance=100)
    on_time = run(ledger.acquire(1, 10, TTL, 0)).grant
    late = run(ledger.acquire(1, 10, TTL, 0)).grant
    run(ledger.release(on_time.lease_id, on_time.fencing_token, 10, TTL + GRACE))
    with pytest.raises(errors.LeaseNotActive):
        run(ledger.release(late.lease_id, late.fencing_token, 10, TTL + GRACE + 1))


def test_late_usage_is_accepted_only_within_its_provisional_settlement_loss(ledger):
    open_account(ledger, balance=100)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    ingest(ledger, usage(lease, "r1", 3))
    run(ledger.release(lease.lease_id, lease.fencing_token, 2, 0))
    assert funds(ledger, 1).settlement_loss == 5
    report = ingest(ledger, usage(lease, "r2", 4), usage(lease, "r3", 2))
    assert (report.accepted, report.rejected) == (1, 1)
    c = funds(ledger, 1)
    assert (c.settled_usage, c.settlement_loss) == (7, 1)


# -- consolidate -----------------------------------------------------------------


def holder_with_a_second_lease(ledger):
    """Account 1 (100 units): lease A holds 50 with 1 billed, lease B holds 25."""
    open_account(ledger, balance=100)
    first = run(ledger.acquire(1, 50, TTL, 0)).grant
    run(ledger.acquire(1, 1_000, TTL, 0))
    ingest(ledger, usage(first, "a1", 1))
    return first


def test_consolidate_never_regrants_less_than_it_restores(make_ledger):
    exchanged = make_ledger(POLICY)
    lease = holder_with_a_second_lease(exchanged)
    allocation = run(exchanged.consolidate(lease.lease_id, lease.fencing_token, 49, 1_000, 0,
                                           TTL, 1))
    assert allocation.grant.granted == 49
    assert allocation.grant.fencing_token > lease.fencing_token
    composed = make_ledger(POLICY)
    lease = holder_with_a_second_lease(composed)
    run(composed.release(lease.lease_id, lease.fencing_token, 49, 1))
    assert run(composed.acquire(1, 1_000, TTL, 1)).grant.granted == 37, (
        "release then acquire re-sizes against the restored balance and hands back less")
    for ledger in (exchanged, composed):
        assert funds(ledger, 1).holds()


def test_consolidate_grows_to_a_fundable_needed_quote(ledger):
    lease = holder_with_a_second_lease(ledger)
    allocation = run(ledger.consolidate(lease.lease_id, lease.fencing_token, 49, 10, 60, TTL, 1))
    assert allocation.grant.granted == 60
    with pytest.raises(errors.LeaseNotActive):
        run(ledger.release(lease.lease_id, lease.fencing_token, 0, 1))


@pytest.mark.parametrize("refusal", ["inactive", "ttl", "invalid_release", "balance"])
def test_a_refused_consolidation_leaves_the_old_lease_unchanged(ledger, refusal):
    open_account(ledger, balance=10)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant  # 5 of 10
    while funds(ledger, 1).balance:  # other leases take the rest
        run(ledger.acquire(1, 10, TTL, 0))
    unspent, ttl, expected = 5, TTL, errors.AllocateError
    if refusal == "inactive":
        run(ledger.set_account_status(1, AccountStatus.SUSPENDED))
        expected = errors.AccountInactive
    elif refusal == "ttl":
        ttl, expected = 0, errors.InvalidTtl
    elif refusal == "invalid_release":
        unspent, expected = 6, errors.InvalidRelease
    else:
        unspent, expected = 0, errors.BalanceInsufficient
    before = funds(ledger, 1)
    with pytest.raises(expected):
        run(ledger.consolidate(lease.lease_id, lease.fencing_token, unspent, 5, 0, ttl, 1))
    assert funds(ledger, 1) == before
    run(ledger.release(lease.lease_id, lease.fencing_token, 5, 1))


def test_consolidate_refuses_a_stale_capability(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    with pytest.raises(errors.Fenced):
        run(ledger.consolidate(lease.lease_id, lease.fencing_token + 1, 0, 5, 0, TTL, 0))
    with pytest.raises(errors.UnknownLease):
        run(ledger.consolidate(lease.lease_id + 1, lease.fencing_token, 0, 5, 0, TTL, 0))


# -- reclaim ---------------------------------------------------------------------


def test_reclaim_waits_for_the_grace_and_forfeits_what_was_not_billed(ledger):
    open_account(ledger, balance=100)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    ingest(ledger, usage(lease, "r1", 4))
    assert run(ledger.reclaim_expired(TTL + GRACE - 1)) == []
    (reclaimed,) = run(ledger.reclaim_expired(TTL + GRACE))
    assert (reclaimed.lease_id, reclaimed.forfeited) == (lease.lease_id, 6)
    c = funds(ledger, 1)
    assert (c.balance, c.active_lease_grants, c.settled_usage, c.settlement_loss) == (90, 0, 4, 6)
    assert ingest(ledger, usage(lease, "r2", 6)).accepted == 1, "late usage converts the loss"
    assert funds(ledger, 1).settlement_loss == 0


def test_a_reclaim_batch_is_bounded_and_the_drain_takes_the_rest(ledger):
    open_account(ledger, balance=1_000)
    for _ in range(5):
        run(ledger.acquire(1, 1, TTL, 0))
    batch = run(ledger.reclaim_expired_batch(TTL + GRACE, 2))
    assert len(batch) == 2 and batch.is_saturated()
    rest = run(drain_reclaim_expired(ledger, TTL + GRACE, limit=2))
    assert len(rest) == 3
    assert funds(ledger, 1).settlement_loss == 5


# -- ingest ----------------------------------------------------------------------


def test_ingest_is_idempotent_on_request_id(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    batch = [usage(lease, "r1", 2), usage(lease, "r2", 3), usage(lease, "r1", 2)]
    assert ingest(ledger, *batch) == IngestReport(accepted=2, duplicate=1, rejected=0)
    assert ingest(ledger, *batch) == IngestReport(accepted=0, duplicate=3, rejected=0)
    run(ledger.release(lease.lease_id, lease.fencing_token, 5, 0))
    assert funds(ledger, 1).settled_usage == 5


def test_a_duplicate_is_classified_before_its_payload(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    ingest(ledger, usage(lease, "r1", 2))
    report = ingest(ledger, usage(lease, "r1", LEDGER_UNITS_MAX + 1, token=99))
    assert report.duplicate == 1


def test_capability_is_checked_before_lease_state_and_capacity(ledger):
    open_account(ledger, 1)
    open_account(ledger, 2)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    report = ingest(ledger, usage(lease, "stale", 1, token=lease.fencing_token + 1),
                    usage(lease, "foreign", 1, account=2),
                    usage(lease, "too-much", 11))
    assert report == IngestReport(accepted=0, duplicate=0, rejected=3)
    assert ingest(ledger, usage(lease, "stale", 1)).accepted == 1, (
        "a rejected request id is not remembered")


def test_units_outside_the_domain_are_rejected_one_by_one(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    report = ingest(ledger, usage(lease, "a", 1), usage(lease, "b", LEDGER_UNITS_MAX + 1),
                    usage(lease, "c", -1), usage(lease, "d", 2))
    assert report == IngestReport(accepted=2, duplicate=0, rejected=2)


def test_an_oversized_batch_is_refused_whole_and_not_retryable(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    events = [usage(lease, f"r{i}", 0) for i in range(4_097)]
    with pytest.raises(errors.IngestRefused) as caught:
        run(ledger.ingest(events, 0))
    assert not caught.value.retryable
    assert ingest(ledger, events[0]).accepted == 1, "nothing of the refused batch was recorded"


def test_an_ingest_report_must_partition_the_batch():
    IngestReport(accepted=1, duplicate=1, rejected=1).validate(3)
    for report, submitted in [(IngestReport(accepted=1), 2),
                              (IngestReport(accepted=1, unattributed=2), 1)]:
        with pytest.raises(errors.StoreError):
            report.validate(submitted)


# -- accounts --------------------------------------------------------------------


def test_creation_is_never_an_overwrite(ledger):
    open_account(ledger)
    with pytest.raises(errors.AccountAlreadyExists):
        open_account(ledger, balance=5)
    assert funds(ledger, 1).deposited == 100


def test_deposits_fund_an_open_account_within_the_ledger_domain(ledger):
    with pytest.raises(errors.UnknownAccount):
        run(ledger.deposit(1, 5))
    open_account(ledger, balance=0)
    run(ledger.deposit(1, 5))
    assert funds(ledger, 1).deposited == 5
    with pytest.raises(errors.AllocateStorage):
        run(ledger.deposit(1, LEDGER_UNITS_MAX))
    run(ledger.set_account_status(1, AccountStatus.CLOSED))
    with pytest.raises(errors.AccountInactive):
        run(ledger.deposit(1, 5))


def test_closed_is_terminal(ledger):
    with pytest.raises(errors.StatusUnknownAccount):
        run(ledger.set_account_status(1, AccountStatus.ACTIVE))
    open_account(ledger)
    run(ledger.set_account_status(1, AccountStatus.SUSPENDED))
    run(ledger.set_account_status(1, AccountStatus.ACTIVE))
    run(ledger.set_account_status(1, AccountStatus.CLOSED))
    run(ledger.set_account_status(1, AccountStatus.CLOSED))
    for status in (AccountStatus.ACTIVE, AccountStatus.SUSPENDED):
        with pytest.raises(errors.AccountClosed):
            run(ledger.set_account_status(1, status))
    with pytest.raises(errors.AccountClosed):
        run(ledger.set_capacity_class(1, CapacityClass.BEST_EFFORT))
    open_account(ledger, 2, status=AccountStatus.CLOSED)
    with pytest.raises(errors.AccountClosed):
        run(ledger.set_account_status(2, AccountStatus.ACTIVE))


def test_suspension_refuses_acquire_but_keeps_outstanding_leases(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    run(ledger.set_account_status(1, AccountStatus.SUSPENDED))
    with pytest.raises(errors.AccountInactive):
        run(ledger.acquire(1, 1, TTL, 0))
    assert ingest(ledger, usage(lease, "r1", 2)).accepted == 1
    run(ledger.release(lease.lease_id, lease.fencing_token, 8, 0))


def test_a_capacity_class_change_leaves_funding_alone(ledger):
    open_account(ledger)
    before = funds(ledger, 1)
    run(ledger.set_capacity_class(1, CapacityClass.BEST_EFFORT))
    view = run(ledger.account_view(1))
    assert view.capacity_class is CapacityClass.BEST_EFFORT
    assert view.conservation == before


DAY = 86_400_000
MONTHLY = BudgetSchedule(allowance=50, period_ms=30 * DAY)


def test_a_schedule_deposits_at_rollover_and_expires_only_unspent_allowance(ledger):
    open_account(ledger, balance=10)  # a top-up: it never expires
    with pytest.raises(errors.BudgetUnknownAccount):
        run(ledger.set_budget_schedule(9, MONTHLY))
    run(ledger.set_budget_schedule(1, MONTHLY))
    assert funds(ledger, 1).deposited == 10, "setting a schedule deposits nothing"
    (first,) = run(ledger.roll_due_periods(1, 8)).rolled
    assert (first.deposited, first.expired) == (50, 0)
    assert run(ledger.roll_due_periods(2, 8)).is_empty(), "one boundary is crossed once"
    lease = run(ledger.acquire(1, 20, TTL, 3)).grant  # spends allowance first
    run(ledger.release(lease.lease_id, lease.fencing_token, 20, 3))
    (second,) = run(ledger.roll_due_periods(30 * DAY, 8)).rolled
    assert (second.deposited, second.expired) == (50, 50)
    c = funds(ledger, 1)
    assert (c.balance, c.expired, c.deposited) == (60, 50, 110)


def test_a_closed_account_s_allowance_expires_and_no_period_funds_it_again(ledger):
    """Closing is terminal and a deposit into a closed account is refused;
    a rollover agrees: it expires the closed account's unspent allowance and
    deposits nothing. A suspended account keeps its ledger, and its allowance."""
    open_account(ledger, 1, balance=10)
    open_account(ledger, 2, balance=10)
    for account in (1, 2):
        run(ledger.set_budget_schedule(account, MONTHLY))
    run(ledger.roll_due_periods(0, 8))
    run(ledger.set_account_status(1, AccountStatus.CLOSED))
    run(ledger.set_account_status(2, AccountStatus.SUSPENDED))
    closed, suspended = run(ledger.roll_due_periods(30 * DAY, 8)).rolled
    assert (closed.account_id, closed.deposited, closed.expired) == (1, 0, 50)
    assert (suspended.account_id, suspended.deposited, suspended.expired) == (2, 50, 50)
    assert (funds(ledger, 1).balance, funds(ledger, 1).deposited) == (10, 60)
    with pytest.raises(errors.AccountInactive):
        run(ledger.deposit(1, 5))
    run(ledger.deposit(2, 5))


def test_missed_periods_roll_once_and_unscheduled_accounts_never(ledger):
    open_account(ledger, 1, 0)
    open_account(ledger, 2, 0)
    run(ledger.set_budget_schedule(1, MONTHLY))
    run(ledger.roll_due_periods(0, 8))
    batch = run(ledger.roll_due_periods(95 * DAY, 8))
    assert [r.account_id for r in batch.rolled] == [1]
    assert funds(ledger, 1).deposited == 100, "two allowances, not four"
    view = run(ledger.account_view(1))
    assert view.period_start == 90 * DAY and view.schedule == MONTHLY


def test_rollover_batches_are_bounded(ledger):
    for account in (1, 2, 3):
        open_account(ledger, account, 0)
        run(ledger.set_budget_schedule(account, MONTHLY))
    first = run(ledger.roll_due_periods(0, 2))
    assert first.is_saturated() and [r.account_id for r in first.rolled] == [1, 2]
    second = run(ledger.roll_due_periods(0, 2))
    assert not second.is_saturated() and [r.account_id for r in second.rolled] == [3]


def test_allowance_out_on_a_lease_expires_at_settlement_after_its_period(ledger):
    brief = BudgetSchedule(allowance=50, period_ms=TTL // 2)
    open_account(ledger, balance=0)
    run(ledger.set_budget_schedule(1, brief))
    run(ledger.roll_due_periods(0, 8))
    lease = run(ledger.acquire(1, 20, TTL, 0)).grant
    run(ledger.roll_due_periods(TTL // 2, 8))  # 30 unspent expire now; 50 arrive
    allocation = run(ledger.consolidate(lease.lease_id, lease.fencing_token, 20, 1, 0, TTL,
                                        TTL // 2))
    assert allocation.grant.granted == 1, "expired allowance restores no floor"
    c = funds(ledger, 1)
    assert (c.expired, c.balance) == (50, 49)


def test_clearing_a_schedule_stops_expiry(ledger):
    open_account(ledger, balance=0)
    run(ledger.set_budget_schedule(1, MONTHLY))
    run(ledger.roll_due_periods(0, 8))
    run(ledger.set_budget_schedule(1, None))
    assert run(ledger.roll_due_periods(60 * DAY, 8)).is_empty()
    c = funds(ledger, 1)
    assert (c.balance, c.expired) == (50, 0)


def test_account_view_reports_every_term_at_once(ledger):
    assert run(ledger.account_view(1)) is None
    open_account(ledger, capacity_class=CapacityClass.BEST_EFFORT)
    run(ledger.acquire(1, 10, TTL, 0))
    view = run(ledger.account_view(1))
    assert (view.status, view.capacity_class, view.schedule) == (
        AccountStatus.ACTIVE, CapacityClass.BEST_EFFORT, None)
    assert view.conservation == funds(ledger, 1)
    assert view.conservation.active_lease_grants == 10


def test_a_lease_view_follows_the_lease_through_settlement(ledger):
    open_account(ledger)
    lease = run(ledger.acquire(1, 10, TTL, 0)).grant
    ingest(ledger, usage(lease, "r1", 3))
    assert run(ledger.lease_view(lease.lease_id)) == LeaseView(lease, LeaseState.ACTIVE, 3, 0)
    run(ledger.release(lease.lease_id, lease.fencing_token, 4, 0))
    released = LeaseView(lease, LeaseState.RELEASED, 3, 3)
    assert run(ledger.lease_view(lease.lease_id)) == released
    assert run(ledger.lease_view(lease.lease_id + 1)) is None
    assert run(ledger.lease_views()) == (released,)


# -- inspection and ids ----------------------------------------------------------


def test_inspection_lists_accounts_and_every_lease_ever_granted_in_ascending_order(ledger):
    assert run(ledger.account_ids()) == ()
    assert run(ledger.conservation(1)) is None
    for account in (3, 1, 2):
        open_account(ledger, account)
    assert run(ledger.account_ids()) == (1, 2, 3)
    first = run(ledger.acquire(2, 10, TTL, 0)).grant
    second = run(ledger.acquire(1, 10, TTL, 0)).grant
    run(ledger.release(first.lease_id, first.fencing_token, 10, 0))
    views = run(ledger.lease_views())
    assert [view.grant for view in views] == [first, second]
    assert [view.state for view in views] == [LeaseState.RELEASED, LeaseState.ACTIVE]
    assert run(ledger.conservation(2)) == funds(ledger, 2)


def test_one_inspection_read_gives_what_the_single_reads_give(ledger):
    """``inspect``: the lab's one read per transaction, the single reads'
    answers for the ids asked (``None`` for an unknown one), repeats and all."""
    for account in (1, 2):
        open_account(ledger, account)
    first = run(ledger.acquire(1, 10, TTL, 0)).grant
    second = run(ledger.acquire(2, 30, TTL, 0)).grant
    run(ledger.release(first.lease_id, first.fencing_token, 4, 0))
    leases = [second.lease_id, first.lease_id, 99, first.lease_id]
    statements, accounts = [2, 1, 7], [1, 8]
    seen = run(ledger.inspect(leases, statements, accounts))
    assert seen.leases == {lease: run(ledger.lease_view(lease)) for lease in leases}
    assert seen.statements == {account: run(ledger.conservation(account))
                               for account in statements}
    assert seen.accounts == {account: run(ledger.account_view(account)) for account in accounts}
    assert seen.leases[99] is None and seen.statements[7] is None and seen.accounts[8] is None
    assert seen.statements[1] is not None
    assert seen.leases[first.lease_id].state == LeaseState.RELEASED
    assert run(ledger.inspect()) == type(seen)({}, {}, {})


def test_a_refused_grant_spends_no_lease_id(ledger):
    open_account(ledger, 1, balance=0)
    open_account(ledger, 2)
    with pytest.raises(errors.BalanceExhausted):
        run(ledger.acquire(1, 5, TTL, 0))
    with pytest.raises(errors.InvalidTtl):
        run(ledger.acquire(2, 5, 0, 0))
    assert run(ledger.acquire(2, 5, TTL, 0)).grant.lease_id == 1


def test_a_rollover_that_would_leave_the_ledger_domain_is_a_storage_failure(ledger):
    open_account(ledger, balance=LEDGER_UNITS_MAX - 10)
    run(ledger.set_budget_schedule(1, MONTHLY))
    with pytest.raises(errors.StoreError, match="BIGINT"):
        run(ledger.roll_due_periods(0, 8))
    assert run(ledger.account_view(1)).period_start is None, "nothing of it was written"
