"""tollgate's value rules beyond the seed's own cases: policy validation, the
reclaim cutoff, unit and id domains, periods and batch limits -- those a ledger
applies, on both ledgers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tollgate_ledgers import LEDGER_KINDS, ledger_factory, run

from stores.tollgate import errors
from stores.tollgate.domain import (
    COST_UNITS_MAX,
    LEDGER_UNITS_MAX,
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    AccountConfig,
    BudgetSchedule,
    GrantPolicy,
    GrantPolicyError,
    ReclaimBatch,
    ReclaimedLease,
    checked_sum,
    require_units,
)


@pytest.fixture(params=LEDGER_KINDS)
def make_ledger(request):
    with ledger_factory(request) as make:
        yield make


@pytest.mark.parametrize(("field", "value", "message"), [
    ("shrink_divisor", 0, "shrink_divisor must be positive"),
    ("min_grant", 0, "min_grant must be positive"),
    ("max_ttl_ms", 0, "max_ttl must be positive"),
    ("reclaim_grace_ms", -1, "reclaim_grace must not be negative"),
])
def test_an_invalid_policy_is_refused_at_construction(make_ledger, field, value, message):
    policy = replace(GrantPolicy(), **{field: value})
    with pytest.raises(GrantPolicyError, match=message):
        make_ledger(policy)


def test_grant_fails_closed_on_a_policy_it_was_not_given_validated():
    assert GrantPolicy(shrink_divisor=0).grant(5, 10) is None
    assert GrantPolicy(min_grant=0).grant(5, 10) is None
    assert GrantPolicy().grant(5, 1) == 1, "never more than the balance"
    assert GrantPolicy(min_grant=8).grant(100, 10) == 8, "the cap is floored at min_grant"


def test_no_expiry_is_due_when_the_cutoff_is_unrepresentable(make_ledger):
    policy = GrantPolicy(reclaim_grace_ms=10)
    assert policy.reclaim_cutoff(TIMESTAMP_MIN + 10) == TIMESTAMP_MIN
    assert policy.reclaim_cutoff(TIMESTAMP_MIN + 9) is None
    ledger = make_ledger(policy)
    run(ledger.create_account(AccountConfig(1, 10)))
    run(ledger.acquire(1, 1, 1, TIMESTAMP_MIN))
    assert run(ledger.reclaim_expired_batch(TIMESTAMP_MIN, 4)).is_empty()


def test_a_sweep_past_every_representable_instant_reclaims_what_is_due(make_ledger):
    ledger = make_ledger(GrantPolicy(reclaim_grace_ms=10))
    run(ledger.create_account(AccountConfig(1, 10)))
    lease = run(ledger.acquire(1, 4, 1, 0)).grant
    batch = run(ledger.reclaim_expired_batch(TIMESTAMP_MAX + 10**6, 2**70))
    assert [reclaimed.lease_id for reclaimed in batch.reclaimed] == [lease.lease_id]


def test_a_lease_whose_expiry_is_unrepresentable_is_an_invalid_ttl(make_ledger):
    ledger = make_ledger()
    run(ledger.create_account(AccountConfig(1, 10)))
    with pytest.raises(errors.InvalidTtl):
        run(ledger.acquire(1, 1, 1, TIMESTAMP_MAX))


def test_units_stay_in_their_domain(make_ledger):
    assert require_units("x", COST_UNITS_MAX) == COST_UNITS_MAX
    for bad in (-1, COST_UNITS_MAX + 1, True, 1.0):
        with pytest.raises(ValueError, match="x must be"):
            require_units("x", bad)
    with pytest.raises(ValueError, match="initial_balance"):
        run(make_ledger().create_account(AccountConfig(1, LEDGER_UNITS_MAX + 1)))


def test_ids_and_instants_a_ledger_cannot_store_are_refused_before_any_write(make_ledger):
    ledger = make_ledger()
    for account in (TIMESTAMP_MAX + 1, TIMESTAMP_MIN - 1):
        with pytest.raises(ValueError, match="account_id"):
            run(ledger.create_account(AccountConfig(account, 1)))
        with pytest.raises(errors.UnknownAccount):
            run(ledger.acquire(account, 1, 1, 0))
    assert run(ledger.account_ids()) == ()
    run(ledger.create_account(AccountConfig(TIMESTAMP_MAX, 1)))
    with pytest.raises(errors.UnknownLease):
        run(ledger.release(TIMESTAMP_MAX + 1, 1, 0, 0))
    for field, value in [("period_ms", TIMESTAMP_MAX + 1), ("anchor_ms", TIMESTAMP_MIN - 1)]:
        with pytest.raises(ValueError, match=field):
            BudgetSchedule(allowance=5, **{"period_ms": 10, field: value})


def test_a_rollover_to_a_period_start_a_ledger_cannot_store_is_a_storage_failure(make_ledger):
    ledger = make_ledger()
    run(ledger.create_account(AccountConfig(1, 0)))
    run(ledger.set_budget_schedule(1, BudgetSchedule(allowance=5, period_ms=10)))
    with pytest.raises(errors.StoreError, match="BIGINT"):
        run(ledger.roll_due_periods(TIMESTAMP_MAX + 10, 1))


def test_a_checked_sum_reports_an_unrepresentable_total_instead_of_wrapping():
    assert checked_sum((COST_UNITS_MAX - 1, 1)) == COST_UNITS_MAX
    assert checked_sum((COST_UNITS_MAX, 1)) is None
    assert checked_sum((LEDGER_UNITS_MAX, 1), LEDGER_UNITS_MAX) is None
    assert checked_sum((1, -1)) is None, "a negative term is outside the domain"


def test_periods_start_on_the_schedule_anchor():
    schedule = BudgetSchedule(allowance=5, period_ms=100, anchor_ms=30)
    assert [schedule.period_start(now) for now in (30, 129, 130, 29)] == [30, 30, 130, -70]
    with pytest.raises(ValueError, match="period_ms"):
        BudgetSchedule(allowance=5, period_ms=0)


def test_a_reclaim_batch_beyond_its_limit_is_refused():
    leases = [ReclaimedLease(lease_id=i, account_id=1, forfeited=1) for i in range(3)]
    with pytest.raises(errors.StoreError, match="3 leases for a batch limit of 2"):
        ReclaimBatch.try_new(leases, 2)
    assert ReclaimBatch.try_new(leases, 3).is_saturated()
    with pytest.raises(ValueError, match="batch limit"):
        ReclaimBatch.try_new([], 0)
