"""The in-memory budget store, NoBudget and UnavailablePolicy.

One test per behaviour pinned by axond 0.3.8's own tests for these, with the
clock driven by ``ManualRuntime`` where axond slept.
"""

from __future__ import annotations

import asyncio
import functools
import logging

import pytest
from manual_runtime import ManualRuntime

from stores.axond_budget.contract import (
    Admission,
    BudgetKey,
    Denial,
    NoBudget,
    Reservation,
    UnavailablePolicy,
)
from stores.axond_budget.in_memory import InMemoryBudget, InMemorySettings

UNAVAILABLE = Admission.unavailable()
EXCEEDED = Admission.exceeded()


def synchronously(test):
    """Run an async test body to completion on a fresh event loop."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def budget_of(**settings) -> tuple[InMemoryBudget, ManualRuntime]:
    runtime = ManualRuntime()
    return InMemoryBudget(runtime, InMemorySettings(**settings)), runtime


def key(namespace: str = "acme", subject: str = "GW_INBOUND_ACME_KEY") -> BudgetKey:
    return BudgetKey(namespace=namespace, subject=subject)


def held(admission: Admission) -> Reservation:
    assert admission.is_allowed, f"expected an admitted request, got {admission}"
    assert admission.reservation is not None
    return admission.reservation


# -- caps and holds ----------------------------------------------------------


@synchronously
async def test_admits_until_settled_spend_would_exceed_the_cap():
    budget, _ = budget_of(subject_cap_microdollars=1_000)
    k = key()
    first = held(await budget.reserve(k, 400))
    await budget.settle(k, first, 400)
    second = held(await budget.reserve(k, 400))
    await budget.settle(k, second, 400)

    # 800 spent: an estimate of 300 would take it to 1,100.
    assert await budget.reserve(k, 300) == EXCEEDED
    assert (await budget.reserve(k, 100)).is_allowed


@synchronously
async def test_an_outstanding_reservation_counts_against_the_cap():
    budget, _ = budget_of(subject_cap_microdollars=1_000)
    k = key()
    first = held(await budget.reserve(k, 700))
    assert await budget.reserve(k, 700) == EXCEEDED

    # The first request cost less than held, which frees the remainder.
    await budget.settle(k, first, 100)
    assert (await budget.reserve(k, 700)).is_allowed


@synchronously
async def test_releasing_a_reservation_frees_the_whole_estimate():
    budget, _ = budget_of(subject_cap_microdollars=1_000)
    k = key()
    await budget.release(k, held(await budget.reserve(k, 1_000)))
    assert (await budget.reserve(k, 1_000)).is_allowed


@synchronously
async def test_no_budget_always_admits():
    admission = await NoBudget().reserve(key(), 2**64 - 1)
    assert admission.is_allowed


@synchronously
async def test_no_budget_is_the_backend_named_none_and_holds_nothing():
    store = NoBudget()
    assert store.name == "none"
    assert not held(await store.reserve(key(), 1)).is_held


@synchronously
async def test_each_reservation_gets_a_distinct_id():
    budget, _ = budget_of(subject_cap_microdollars=1_000)
    ids = {held(await budget.reserve(key(), 0)).id for _ in range(1_000)}
    assert len(ids) == 1_000


def test_an_unreachable_store_denies_by_default_and_admits_when_told_to():
    assert InMemorySettings().on_unavailable is UnavailablePolicy.DENY
    assert UnavailablePolicy.DENY.admission() == UNAVAILABLE
    assert UnavailablePolicy.DENY.admission().denial is Denial.STORE_UNAVAILABLE
    assert UnavailablePolicy.ALLOW.admission().is_allowed


# -- bounded ledgers: one global pool ------------------------------------------


@synchronously
async def test_an_idle_ledger_holding_nothing_is_evicted_at_capacity():
    budget, runtime = budget_of(subject_cap_microdollars=1_000, idle_ttl="1ms", max_subjects=1)
    first, second = key(), key(subject="second")
    await budget.settle(first, held(await budget.reserve(first, 100)), 100)
    runtime.advance_ms(2)

    assert (await budget.reserve(second, 100)).is_allowed
    assert budget.ledger_keys() == [second]


@synchronously
async def test_an_outstanding_reservation_survives_pruning_and_still_settles():
    budget, runtime = budget_of(subject_cap_microdollars=1_000, idle_ttl="1ms", max_subjects=1)
    first, second = key(), key(subject="second")
    reservation = held(await budget.reserve(first, 500))
    runtime.advance_ms(2)
    assert await budget.reserve(second, 100) == UNAVAILABLE

    await budget.settle(first, reservation, 600)
    assert await budget.reserve(first, 401) == EXCEEDED


@synchronously
async def test_an_expired_hold_is_reclaimed_and_its_ledger_can_then_be_evicted():
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="1ms", reservation_ttl="1ms", max_subjects=1
    )
    first, second = key(), key(subject="second")
    held(await budget.reserve(first, 500))
    runtime.advance_ms(2)

    assert (await budget.reserve(second, 100)).is_allowed
    assert first not in budget.ledger_keys()


@synchronously
async def test_a_late_settlement_records_spend_after_its_ledger_was_evicted():
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="1ms", reservation_ttl="1ms", max_subjects=1
    )
    first, second = key(), key(subject="second")
    late = held(await budget.reserve(first, 100))
    runtime.advance_ms(2)
    second_hold = held(await budget.reserve(second, 100))  # evicts `first`

    await budget.settle(first, late, 900)
    assert await budget.reserve(first, 101) == EXCEEDED
    follow_up = held(await budget.reserve(first, 100))
    await budget.release(first, follow_up)
    await budget.release(second, second_hold)


@synchronously
async def test_an_active_ledger_keeps_its_spend_within_the_idle_ttl():
    budget, _ = budget_of(subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=1)
    first, second = key(), key(subject="second")
    await budget.settle(first, held(await budget.reserve(first, 600)), 600)

    assert await budget.reserve(second, 100) == UNAVAILABLE
    assert await budget.reserve(first, 401) == EXCEEDED


@synchronously
async def test_capacity_taken_by_held_ledgers_denies_fail_closed():
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="1ms", max_subjects=2, on_unavailable="deny"
    )
    first, second, third = key(), key(subject="second"), key(subject="third")
    first_hold = held(await budget.reserve(first, 100))
    second_hold = held(await budget.reserve(second, 100))
    runtime.advance_ms(2)

    assert await budget.reserve(third, 100) == UNAVAILABLE
    await budget.release(first, first_hold)
    await budget.release(second, second_hold)


@synchronously
async def test_capacity_taken_by_held_ledgers_can_fail_open_without_charging():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="1ms", max_subjects=1, on_unavailable="allow"
    )
    first, second = key(), key(subject="second")
    first_hold = held(await budget.reserve(first, 100))

    unenforced = held(await budget.reserve(second, 100))
    assert unenforced.id == ""
    await budget.settle(second, unenforced, 900)  # charges nothing
    await budget.release(first, first_hold)

    assert (await budget.reserve(second, 1_000)).is_allowed
    assert budget.spent(second) == 0


@synchronously
async def test_many_subjects_keep_the_ledger_count_bounded():
    max_subjects = 64
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000_000, idle_ttl="0ms", max_subjects=max_subjects
    )
    for index in range(5_000):
        if index >= max_subjects:
            runtime.advance_ms(1)  # lets every earlier ledger go idle
        k = key(subject=f"subject-{index}")
        await budget.settle(k, held(await budget.reserve(k, 1)), 1)

    assert len(budget.ledger_keys()) <= max_subjects


# -- bounded ledgers: per-namespace floors -------------------------------------


@synchronously
async def test_one_namespace_cannot_consume_another_namespaces_floor():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=4, namespace_count=2
    )
    for subject in ("a-1", "a-2"):
        k = key("a", subject)
        await budget.settle(k, held(await budget.reserve(k, 1)), 1)

    assert (await budget.reserve(key("b", "never-seen"), 1)).is_allowed


@synchronously
async def test_namespaces_beyond_the_configured_count_do_not_lock_out_free_capacity():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=10, namespace_count=2
    )
    # Ledgers from before a reload, when there were four namespaces.
    for namespace in ("a", "b", "c", "d"):
        for subject in ("1", "2"):
            budget.restore_ledger(key(namespace, subject))

    assert (await budget.reserve(key("a", "new"), 1)).is_allowed
    assert len(budget.ledger_keys()) <= budget.settings.max_subjects


@synchronously
async def test_the_configured_namespace_count_keeps_full_capacity_isolated():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=4, namespace_count=2
    )
    for namespace in ("a", "b"):
        for subject in ("1", "2"):
            budget.restore_ledger(key(namespace, subject))

    assert await budget.reserve(key("a", "new"), 1) == UNAVAILABLE


@synchronously
async def test_a_namespace_can_burst_into_headroom_no_floor_claims():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=7, namespace_count=2
    )
    for subject in ("a-1", "a-2", "a-3", "a-4"):
        k = key("a", subject)
        await budget.settle(k, held(await budget.reserve(k, 1)), 1)

    assert len(budget.ledger_keys()) == 4


@synchronously
async def test_at_full_capacity_only_the_requesting_namespace_is_pruned():
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="1ms", max_subjects=4, namespace_count=2
    )
    stale = key("a", "a-1")
    await budget.settle(stale, held(await budget.reserve(stale, 1)), 1)
    runtime.advance_ms(2)
    for namespace, subject in (("a", "a-2"), ("b", "b-1"), ("b", "b-2")):
        k = key(namespace, subject)
        await budget.settle(k, held(await budget.reserve(k, 1)), 1)

    assert (await budget.reserve(key("a", "a-new"), 1)).is_allowed
    retained = budget.ledger_keys()
    assert len(retained) == 4
    assert budget.namespace_counts() == {"a": 2, "b": 2}
    assert key("b", "b-1") in retained
    assert key("b", "b-2") in retained
    assert stale not in retained
    assert key("a", "a-2") in retained


@synchronously
async def test_a_ledger_with_a_live_hold_is_never_evicted():
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="1ms", max_subjects=2, namespace_count=2
    )
    first, second = key("a", "a-1"), key("b", "b-1")
    first_hold = held(await budget.reserve(first, 1))
    second_hold = held(await budget.reserve(second, 1))
    runtime.advance_ms(2)

    assert await budget.reserve(key("a", "a-2"), 1) == UNAVAILABLE
    await budget.release(first, first_hold)
    await budget.release(second, second_hold)


@synchronously
async def test_expired_holds_are_reclaimed_before_idle_eviction():
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000,
        idle_ttl="1ms",
        reservation_ttl="1ms",
        max_subjects=2,
        namespace_count=2,
    )
    first, second = key("a", "a-1"), key("b", "b-1")
    held(await budget.reserve(first, 1))
    second_hold = held(await budget.reserve(second, 1))
    runtime.advance_ms(3)

    assert (await budget.reserve(key("a", "a-2"), 1)).is_allowed
    assert first not in budget.ledger_keys()
    await budget.release(second, second_hold)


@synchronously
async def test_the_global_bound_holds_under_namespace_churn():
    max_subjects = 16
    budget, runtime = budget_of(
        subject_cap_microdollars=1_000_000,
        idle_ttl="0ms",
        max_subjects=max_subjects,
        namespace_count=2,
    )
    for index in range(1_000):
        runtime.advance_ms(1)
        k = key("a" if index % 2 == 0 else "b", f"subject-{index}")
        admission = await budget.reserve(k, 1)
        if admission.is_allowed:
            await budget.settle(k, held(admission), 1)
        assert len(budget.ledger_keys()) <= max_subjects


@synchronously
async def test_zero_namespaces_keep_one_global_capacity_pool():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=1, namespace_count=0
    )
    first = key("a", "a-1")
    hold = held(await budget.reserve(first, 1))

    assert await budget.reserve(key("b", "b-1"), 1) == UNAVAILABLE
    await budget.release(first, hold)


@synchronously
async def test_fewer_subjects_than_namespaces_keep_one_global_capacity_pool():
    budget, _ = budget_of(
        subject_cap_microdollars=1_000, idle_ttl="60s", max_subjects=1, namespace_count=2
    )
    first = key("a", "a-1")
    hold = held(await budget.reserve(first, 1))

    assert await budget.reserve(key("b", "b-1"), 1) == UNAVAILABLE
    await budget.release(first, hold)


# -- settings (not from axond's tests) -----------------------------------------


def test_settings_take_human_durations_and_derive_the_namespace_floor(caplog):
    settings = InMemorySettings(idle_ttl="60s", reservation_ttl="250ms")
    assert (settings.idle_ttl_ms, settings.reservation_ttl_ms) == (60_000, 250)
    assert InMemorySettings().idle_ttl_ms == 3_600_000
    with pytest.raises(ValueError):
        InMemorySettings(idle_ttl=60)  # a bare number has no unit

    runtime = ManualRuntime()
    assert InMemoryBudget(runtime, InMemorySettings(max_subjects=10, namespace_count=3)).floor == 3
    assert InMemoryBudget(runtime, InMemorySettings(namespace_count=0)).floor == 0
    with caplog.at_level(logging.WARNING, logger="stores.axond_budget.in_memory"):
        too_few = InMemoryBudget(runtime, InMemorySettings(max_subjects=1, namespace_count=2))
    assert too_few.floor == 0
    assert "floors are off" in caplog.text


def test_a_negative_amount_is_refused_by_the_in_memory_store_too():
    budget = InMemoryBudget(ManualRuntime(), InMemorySettings(subject_cap_microdollars=1_000))

    async def scenario():
        with pytest.raises(ValueError, match="micro-dollars >= 0"):
            await budget.reserve(BudgetKey("a", "s"), -1)

    asyncio.run(scenario())
