"""Seed 003's own test cases for the ledger half of tollgate's store traits.

Ported under the seed's names. Two of the seed's fifteen are left out, being
about the parts issue 15 puts out of scope:

* ``a_credential_is_dead_at_its_expiry_instant_not_after_it`` -- credentials
  (``KeySummary``/``KeyDirectory``);
* ``the_push_capacity_warning_fires_only_above_the_channel`` -- snapshot
  publication's push channel.

The seed's ``u64::MAX`` cases use ``COST_UNITS_MAX``: value types take the
whole ``CostUnits`` domain (see ``stores.tollgate.domain``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from stores.tollgate import errors
from stores.tollgate.domain import (
    COST_UNITS_MAX,
    DEFAULT_RECLAIM_BATCH_LIMIT,
    Conservation,
    GrantPolicy,
    ReclaimBatch,
    ReclaimedLease,
    RolledAccount,
    RolloverBatch,
)
from stores.tollgate.errors import AllocateError, StoreError
from stores.tollgate.ports import LeaseAllocator


class ScriptedReclaimer(LeaseAllocator):
    """Reclaims only: fails at once, or returns one full batch then fails."""

    def __init__(self, fail_first: bool) -> None:
        self.fail_first = fail_first
        self.calls = 0

    async def reclaim_expired_batch(self, now: int, limit: int) -> ReclaimBatch:
        call, self.calls = self.calls, self.calls + 1
        if self.fail_first or call > 0:
            raise StoreError("scripted reclaim failure")
        return ReclaimBatch.try_new(
            [ReclaimedLease(lease_id=i, account_id=1, forfeited=1) for i in range(limit)], limit)


def test_consolidation_grows_only_to_a_fundable_needed_quote():
    policy = GrantPolicy()

    def size(requested, balance, floor, needed):
        return policy.consolidation_grant(requested, balance, floor, needed)

    assert size(1_000, 60, 30, 0) == 30, "the floor"
    assert size(1_000, 60, 30, 51) == 51, "proven demand"
    assert size(1_000, 60, 30, 60) == 60, "all of it, inclusive"
    assert size(1_000, 60, 30, 61) == 30, "an unfundable quote grows nothing"
    assert size(1_000, 60, 40, 35) == 40, "demand never shrinks the floor"
    assert size(10, 60, 0, 51) == 51, "past a small target"
    assert size(1_000, 0, 0, 51) is None, "an empty balance still refuses"
    assert size(0, 60, 0, 51) is None, "a zero request still refuses"
    for requested, balance in [(1_000, 60), (7, 60), (1_000, 1)]:
        assert size(requested, balance, 0, 0) == policy.grant(requested, balance), (
            "a plain acquire is the ordinary policy")


def every_refusal() -> list[AllocateError]:
    """Every allocator refusal once; sized by ``COUNT`` below."""
    return [
        errors.UnknownAccount(),
        errors.AccountInactive(),
        errors.InsufficientBalance(),
        errors.InvalidTtl(),
        errors.UnknownLease(),
        errors.Fenced(),
        errors.LeaseNotActive(),
        errors.InvalidRelease(),
        errors.AllocateStorage(StoreError("connection reset")),
        errors.BalanceExhausted(errors.BalanceExhaustion(period_end=None)),
        errors.BalanceInsufficient(errors.BalanceShortfall(remaining=1, period_end=None)),
    ]


def test_every_refusal_class_is_listed_once():
    listed = {type(error) for error in every_refusal()}
    assert listed == set(AllocateError.__subclasses__())
    assert len(every_refusal()) == AllocateError.COUNT


def test_indices_cover_every_slot_exactly_once():
    seen = [False] * AllocateError.COUNT
    for error in every_refusal():
        assert 0 <= error.index < AllocateError.COUNT, f"{error} indexes out of range"
        assert not seen[error.index], f"{error} shares slot {error.index}"
        seen[error.index] = True
    assert all(seen), "every slot must be claimed"


def test_labels_are_distinct_and_free_of_backend_text():
    for position, error in enumerate(every_refusal()):
        assert error.name == AllocateError.NAMES[position]
    storage = errors.AllocateStorage(StoreError("connection reset"))
    assert storage.name == "storage"
    assert "connection" not in storage.name, "the label must not carry the backend's message"
    assert len(set(AllocateError.NAMES)) == len(AllocateError.NAMES)


def test_payload_does_not_affect_the_slot():
    assert (errors.AllocateStorage(StoreError("a")).index
            == errors.AllocateStorage(StoreError("b")).index)


BALANCED = Conservation(deposited=10, overage_recorded=0, balance=1, active_lease_grants=2,
                        settled_usage=3, settlement_loss=4, expired=0)


def test_errors_read_as_the_seed_prints_them():
    """Seed 003's ``Display``: a store error says so, and so does a storage
    failure that wraps it; an ingest refusal begins "refused: "."""
    storage = StoreError("connection lost")
    assert str(storage) == "store error: connection lost"
    assert str(errors.AllocateStorage(storage)) == "store error: connection lost"
    assert str(errors.IngestRefused("total would overflow")) == "refused: total would overflow"
    assert str(errors.IngestUnavailable(str(storage))) == "store error: connection lost"


def test_refusals_with_other_evidence_are_other_refusals():
    """Two shortfalls ending at different periods are not the same answer."""
    now, later = (errors.BalanceInsufficient(errors.BalanceShortfall(5, end))
                  for end in (1_000, 2_000))
    assert now != later and len({now, later}) == 2
    assert now == errors.BalanceInsufficient(errors.BalanceShortfall(5, 1_000))
    assert errors.BalanceExhausted(errors.BalanceExhaustion(1)) != \
        errors.BalanceExhausted(errors.BalanceExhaustion(2))


def test_conservation_requires_an_exact_equation_without_overflow():
    assert BALANCED.holds()
    assert not replace(BALANCED, deposited=11).holds()
    overflowing = Conservation(deposited=COST_UNITS_MAX, overage_recorded=0,
                               balance=COST_UNITS_MAX, active_lease_grants=1, settled_usage=0,
                               settlement_loss=0, expired=0)
    assert not overflowing.holds()


def test_overage_funds_the_usage_it_bills():
    elastic = Conservation(deposited=10, overage_recorded=5, balance=1, active_lease_grants=2,
                           settled_usage=8, settlement_loss=4, expired=0)
    assert elastic.holds()
    assert not replace(elastic, overage_recorded=0).holds(), (
        "the same ledger without the funding term must fail by exactly the overage")
    assert replace(elastic, overage_recorded=0).residual() == -5


def test_overflowing_the_funding_sum_is_a_violation_not_a_wrap():
    overflowing = Conservation(deposited=COST_UNITS_MAX, overage_recorded=1, balance=0,
                               active_lease_grants=0, settled_usage=0, settlement_loss=0,
                               expired=0)
    assert not overflowing.holds()
    # A u64 wrap would make the left side 0, matching an all-zero right side.
    assert overflowing.resting() == 0 and overflowing.funded() is None


def test_expiry_accounts_for_an_allowance_that_was_never_spent():
    rolled = Conservation(deposited=10, overage_recorded=0, balance=1, active_lease_grants=2,
                          settled_usage=3, settlement_loss=0, expired=4)
    assert rolled.holds()
    assert not replace(rolled, expired=0).holds(), (
        "the same ledger without the expiry term must fail by exactly the expired units")


def rolled(account: int) -> RolledAccount:
    return RolledAccount(account_id=account, deposited=100, expired=0)


def test_rollover_batch_reports_what_it_rolled():
    empty = RolloverBatch.try_new([], 2)
    assert empty.is_empty() and len(empty) == 0 and not empty.is_saturated()
    assert empty.rolled == ()

    partial = RolloverBatch.try_new([rolled(1)], 2)
    assert not partial.is_empty() and len(partial) == 1
    assert not partial.is_saturated(), "a partial batch is what ends the drain"
    assert partial.rolled == (rolled(1),)

    full = RolloverBatch.try_new([rolled(1), rolled(2)], 2)
    assert len(full) == 2
    assert full.is_saturated(), "a batch at the limit means there may be more"


def test_a_rollover_batch_beyond_its_limit_is_refused():
    with pytest.raises(StoreError):
        RolloverBatch.try_new([rolled(1), rolled(2)], 1)


def test_reclaim_batch_reports_an_empty_result():
    batch = ReclaimBatch.try_new([], 2)
    assert batch.is_empty() and len(batch) == 0
    assert not batch.is_saturated()
    assert batch.reclaimed == ()


def test_full_drain_preserves_an_initial_batch_error():
    allocator = ScriptedReclaimer(fail_first=True)
    with pytest.raises(StoreError) as caught:
        asyncio.run(allocator.reclaim_expired(now=0))
    assert caught.value.args == ("scripted reclaim failure",)  # the seed's error.0
    assert allocator.calls == 1


def test_full_drain_reports_progress_before_a_later_batch_error():
    allocator = ScriptedReclaimer(fail_first=False)
    with pytest.raises(StoreError) as caught:
        asyncio.run(allocator.reclaim_expired(now=0))
    (message,) = caught.value.args  # the seed's error.0
    assert message != "scripted reclaim failure"
    assert message.endswith("committed: store error: scripted reclaim failure")
    assert f"{DEFAULT_RECLAIM_BATCH_LIMIT} leases" in message
    assert f"{DEFAULT_RECLAIM_BATCH_LIMIT} units" in message
    assert allocator.calls == 2
