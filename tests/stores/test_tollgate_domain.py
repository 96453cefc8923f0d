"""tollgate's value rules beyond the seed's own cases: policy validation, the
reclaim cutoff, unit domains, periods and batch limits."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

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
from stores.tollgate.memory import MemoryLedger


@pytest.mark.parametrize(("field", "value", "message"), [
    ("shrink_divisor", 0, "shrink_divisor must be positive"),
    ("min_grant", 0, "min_grant must be positive"),
    ("max_ttl_ms", 0, "max_ttl must be positive"),
    ("reclaim_grace_ms", -1, "reclaim_grace must not be negative"),
])
def test_an_invalid_policy_is_refused_at_construction(field, value, message):
    policy = replace(GrantPolicy(), **{field: value})
    with pytest.raises(GrantPolicyError, match=message):
        MemoryLedger(policy)


def test_grant_fails_closed_on_a_policy_it_was_not_given_validated():
    assert GrantPolicy(shrink_divisor=0).grant(5, 10) is None
    assert GrantPolicy(min_grant=0).grant(5, 10) is None
    assert GrantPolicy().grant(5, 1) == 1, "never more than the balance"
    assert GrantPolicy(min_grant=8).grant(100, 10) == 8, "the cap is floored at min_grant"


def test_no_expiry_is_due_when_the_cutoff_is_unrepresentable():
    policy = GrantPolicy(reclaim_grace_ms=10)
    assert policy.reclaim_cutoff(TIMESTAMP_MIN + 10) == TIMESTAMP_MIN
    assert policy.reclaim_cutoff(TIMESTAMP_MIN + 9) is None
    ledger = MemoryLedger(policy)
    assert asyncio.run(ledger.reclaim_expired_batch(TIMESTAMP_MIN, 4)).is_empty()


def test_a_lease_whose_expiry_is_unrepresentable_is_an_invalid_ttl():
    ledger = MemoryLedger()
    asyncio.run(ledger.create_account(AccountConfig(1, 10)))
    with pytest.raises(errors.InvalidTtl):
        asyncio.run(ledger.acquire(1, 1, 1, TIMESTAMP_MAX))


def test_units_stay_in_their_domain():
    assert require_units("x", COST_UNITS_MAX) == COST_UNITS_MAX
    for bad in (-1, COST_UNITS_MAX + 1, True, 1.0):
        with pytest.raises(ValueError, match="x must be"):
            require_units("x", bad)
    with pytest.raises(ValueError, match="initial_balance"):
        asyncio.run(MemoryLedger().create_account(AccountConfig(1, LEDGER_UNITS_MAX + 1)))


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
