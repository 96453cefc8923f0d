"""The tollgate variants beside the fixed ledger, on their own scenarios.

Each variant (``stores/tollgate/variants.py``) has a scenario,
``data/scenarios/tollgate-variant-<name>.toml``, that shows its damage: run on
the variant, the damage is filed under ``store_logic``; run on
``tollgate.ledger`` with the same scenario and seed, none of it appears and
nothing is blamed on the store. Each variant changes one rule, so its damage
must come from that rule only: the tests below move the scenario just off
the rule's ground (a deep account, a lost request instead of a lost reply,
losses aimed at other calls, a pause past the grace) and the damage is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from blame import blamed_on_the_store
from manual_runtime import ManualRuntime
from test_tollgate_holder_retire import LostConsolidation
from tollgate_ledgers import fresh_schema

from simulator.run.compose import RunResult, run_scenario
from simulator.scenario.model import load_scenario
from stores.registry import get
from stores.tollgate.domain import LeaseGrant, UsageEvent
from stores.tollgate.errors import AllocateStorage
from stores.tollgate.holder import HeldLease
from stores.tollgate.settings import TollgateSettings
from stores.tollgate.variants import SpendsThroughAmbiguity

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"
FIXED = "tollgate.ledger"

DAMAGE = {
    "release-then-acquire": "regrant_shortfall_units",
    "spends-through-ambiguity": "billing_loss_units_by_store_logic",
    "replay-bills-twice": "double_billed_units",
    "reclaim-without-grace": "units_forfeited_in_grace",
    "settled-release-succeeds": "fencing_violations",
    "consolidation-shrinks-holding": "regrant_shortfall_units",
    "reclaim-credits-back": "billing_loss_units_by_store_logic",
    "consolidation-ignores-demand": "demand_shortfall_units",
    "rollover-deposits-twice": "allowance_deposited_twice_units",
    "statement-without-expiry": "conservation_violations",
}
"""Each variant's scenario, by name, and the metric its damage moves."""


def kind_of(name: str) -> str:
    return f"tollgate.variants.{name.replace('-', '_')}"


def run(name: str, store: str, **overrides: Any) -> RunResult:
    """The variant scenario ``name`` on ``store``, with dotted-path overrides."""
    path = SCENARIOS / f"tollgate-variant-{name}.toml"
    return run_scenario(load_scenario(path, {"store": store, **overrides}))


def store_logic(metric: str) -> str:
    return metric if metric.endswith("_by_store_logic") else f"{metric}_by_store_logic"


def ledger_of(kind: str, deposit: int, **settings: Any) -> Any:
    """The ledger ``kind``'s service node runs, in memory: one account, funded
    with ``deposit`` units."""
    service = asyncio.run(get(kind).service(
        None, TollgateSettings(deposit=deposit, **settings), [("ns-0", "subject-0")], "lab_test"))
    return service.ledger


def events(result: RunResult) -> list[dict[str, Any]]:
    """The run's trace, one dict per event."""
    columns = result.trace.columns
    return [dict(zip(columns, row, strict=True))
            for row in zip(*columns.values(), strict=True)]


@pytest.fixture(scope="module")
def beside() -> dict[str, tuple[dict, dict]]:
    """Each variant scenario's summary on the variant and on the fixed ledger."""
    return {name: (run(name, kind_of(name)).summary, run(name, FIXED).summary)
            for name in DAMAGE}


def test_every_variant_has_a_scenario_naming_it():
    named = {path.stem.removeprefix("tollgate-variant-")
             for path in SCENARIOS.glob("tollgate-variant-*.toml")}
    assert named == set(DAMAGE)
    for name in DAMAGE:
        assert load_scenario(SCENARIOS / f"tollgate-variant-{name}.toml").store == kind_of(name)


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_each_variant_is_blamed_for_its_damage_and_the_fixed_ledger_for_nothing(beside, name):
    variant, fixed = beside[name]
    metric = DAMAGE[name]
    assert variant[metric] > 0
    assert store_logic(metric) in blamed_on_the_store(variant)
    assert fixed[metric] == 0
    assert blamed_on_the_store(fixed) == {}


def test_the_composing_holder_is_re_granted_less_only_near_exhaustion():
    # Accounts deep enough never cap a grant: the variant exchanges its
    # leases as often as ever (by release then acquire: the ledger sees no
    # consolidate) and is always re-granted at least what it gave back.
    deep = run("release-then-acquire", kind_of("release-then-acquire"),
               **{"store_settings.deposit": 100_000_000})
    # (The lifecycle labels any grant obtained for credit given back so.)
    exchanges = [event for event in events(deep)
                 if event["kind"] == "lease_obtained" and event["outcome"] == "consolidate"]
    assert len(exchanges) > 50
    assert deep.summary["consolidations"] == 0
    assert deep.summary["regrants_below_credit"] == 0
    assert blamed_on_the_store(deep.summary) == {}


def test_keeping_an_ambiguous_consolidations_lease_costs_only_when_it_committed():
    # A lost request: the consolidation never ran, the old lease is still
    # active, and spending it further is sound. Only a lost reply (the
    # scenario's) hides a commit that closed it.
    lost_requests = run("spends-through-ambiguity", kind_of("spends-through-ambiguity"),
                        **{"faults.schedule.0.fault": "lose_request"}).summary
    assert lost_requests["spends_refused_by_storage"] > 0  # as ambiguous to the holder
    assert lost_requests["billing_loss_units"] == 0
    assert blamed_on_the_store(lost_requests) == {}


def _ambiguous_exchange(meanwhile) -> tuple[SpendsThroughAmbiguity, HeldLease]:
    """The variant holder after a consolidation of account 1's lease failed in
    transit, ``meanwhile(holder)`` having run while the call waited."""
    grant = LeaseGrant(lease_id=3, account_id=1, granted=100, fencing_token=7, expires_at=0)
    lease = HeldLease(grant, spent=90)
    holder = SpendsThroughAmbiguity(None, ManualRuntime(), TollgateSettings())
    holder.leases[1] = lease
    holder.client = LostConsolidation(lambda: meanwhile(holder))
    with pytest.raises(AllocateStorage):
        asyncio.run(holder._exchange(1, lease, 50))
    return holder, lease


def test_the_ambiguity_variant_puts_the_consolidated_lease_back_in_service():
    holder, lease = _ambiguous_exchange(lambda holder: None)
    assert holder.leases == {1: lease}
    assert holder.retiring == []


def test_the_ambiguity_variant_leaves_a_lease_the_background_loop_released_meanwhile():
    # The loop retired the lease (past its spending time) and released it
    # while the consolidation waited: the variant stopped with ValueError.
    def retired_and_released(holder):
        holder._retire(1)
        holder.retiring.clear()

    holder, _ = _ambiguous_exchange(retired_and_released)
    assert holder.leases == {}
    assert holder.retiring == []


def test_the_replay_variant_bills_twice_only_a_batch_delivered_twice(beside):
    variant, fixed = beside["replay-bills-twice"]
    assert variant["usage_events_replayed"] == fixed["usage_events_replayed"] > 0
    # The same lost replies aimed at releases: no batch arrives twice, and
    # the variant's run is the fixed ledger's, event for event.
    elsewhere = {"faults.schedule.0.call": "release"}
    variant_run = run("replay-bills-twice", kind_of("replay-bills-twice"), **elsewhere)
    fixed_run = run("replay-bills-twice", FIXED, **elsewhere)
    assert variant_run.summary["usage_events_replayed"] == 0
    assert variant_run.summary["double_billed_units"] == 0
    assert variant_run.summary["trace_fingerprint"] == fixed_run.summary["trace_fingerprint"]


def test_reclaiming_without_grace_forfeits_only_releases_inside_the_grace():
    # Pauses of 4 s outlast a 1 s lease and its 2 s grace: both ledgers have
    # reclaimed the lease when its holder wakes, refuse the release alike and
    # file the same settlement loss. Neither owed the holder anything.
    past_grace = {"faults.pause.duration": "4s"}
    variant = run("reclaim-without-grace", kind_of("reclaim-without-grace"), **past_grace).summary
    fixed = run("reclaim-without-grace", FIXED, **past_grace).summary
    assert variant["leases_reclaimed"] == fixed["leases_reclaimed"] > 0
    assert variant["settlement_loss_units"] == fixed["settlement_loss_units"] > 0
    assert variant["units_forfeited_in_grace"] == fixed["units_forfeited_in_grace"] == 0
    assert blamed_on_the_store(variant) == {}


def test_the_settled_release_variant_differs_only_in_answering_success_for_a_settled_lease():
    variant = run("settled-release-succeeds", kind_of("settled-release-succeeds"))
    fixed = run("settled-release-succeeds", FIXED)
    differing = [(ours, theirs)
                 for ours, theirs in zip(events(variant), events(fixed), strict=True)
                 if ours != theirs]
    assert len(differing) == variant.summary["fencing_violations"] > 0
    for ours, theirs in differing:
        assert (ours["detail"], ours["outcome"], theirs["outcome"]) == (
            "release", "nil", "lease not active")
        assert {**ours, "outcome": ""} == {**theirs, "outcome": ""}


def test_a_consolidation_without_its_floor_shrinks_only_a_holding_whose_spend_is_unfundable():
    # 100 units: lease A takes 50 (half the balance), lease B 25 of the rest.
    # A is exchanged with 49 units unspent: the restored balance is 74.
    def exchange(kind: str, needed: int) -> int:
        ledger = ledger_of(kind, 100)
        a = asyncio.run(ledger.acquire(1, 1_000, 1_000, 0)).grant
        asyncio.run(ledger.acquire(1, 1_000, 1_000, 0))
        return asyncio.run(ledger.consolidate(a.lease_id, a.fencing_token, 49, 1_000, needed,
                                              1_000, 1)).grant.granted

    variant = kind_of("consolidation-shrinks-holding")
    # A spend of 100 the restored 74 cannot fund: the variant sizes the
    # exchange like an acquire, 37, below the 49 given back; the fixed
    # ledger keeps the holding.
    assert (exchange(variant, 100), exchange(FIXED, 100)) == (37, 49)
    # A spend of 60 it can fund is proven demand: both grow to it, so the
    # variant changed the floor and nothing else.
    assert exchange(variant, 60) == exchange(FIXED, 60) == 60


def test_a_sweep_crediting_unbilled_units_back_leaves_late_usage_nowhere_to_land():
    # A lease of 50 units (TTL 1 s, grace 500 ms) with 10 billed; 15 more
    # were consumed and are still on their way when the sweep runs at 2 s.
    def reclaim_then_bill_late(kind: str) -> tuple[int, int, int, int]:
        ledger = ledger_of(kind, 100, reclaim_grace="500ms")
        lease = asyncio.run(ledger.acquire(1, 50, 1_000, 0)).grant

        def usage(request_id: str, units: int) -> UsageEvent:
            return UsageEvent(request_id, lease.lease_id, 1, lease.fencing_token, units)

        asyncio.run(ledger.ingest([usage("r1", 10)], 100))
        (reclaimed,) = asyncio.run(ledger.reclaim_expired_batch(2_000, 10)).reclaimed
        late = asyncio.run(ledger.ingest([usage("r2", 15)], 2_100))
        books = asyncio.run(ledger.conservation(1))
        return reclaimed.forfeited, books.balance, late.accepted, books.settled_usage

    # The fixed sweep credits nothing: 40 units of provisional loss, which
    # the late 15 convert into billed usage. The variant credits the 40
    # back to the balance (90 of the 100 deposited): the 15 are refused.
    assert reclaim_then_bill_late(FIXED) == (40, 50, 1, 25)
    assert reclaim_then_bill_late(kind_of("reclaim-credits-back")) == (0, 90, 0, 10)


def test_the_crediting_sweep_changes_nothing_for_a_lease_its_holder_released():
    # A holder that releases in time proves what it did not spend: both
    # ledgers credit it and settle alike; the variant differs in the sweep only.
    def release(kind: str) -> Any:
        ledger = ledger_of(kind, 100)
        lease = asyncio.run(ledger.acquire(1, 50, 1_000, 0)).grant
        asyncio.run(ledger.release(lease.lease_id, lease.fencing_token, 30, 900))
        asyncio.run(ledger.reclaim_expired_batch(60_000, 10))
        return asyncio.run(ledger.conservation(1))

    assert release(kind_of("reclaim-credits-back")) == release(FIXED)


def test_a_consolidation_ignoring_the_refused_quote_re_grants_the_same_half_forever():
    # The seed's case (GL-131): a lease of 30 exchanged for a spend of 51
    # into a restored balance of 60. 60 units deposited, lease A takes 30
    # (half of them), then A is exchanged with all 30 unspent, again and
    # again, each time for the spend of 51 it could not fund.
    def exchanges(kind: str, needed: int, times: int = 3) -> list[int]:
        ledger = ledger_of(kind, 60)
        lease = asyncio.run(ledger.acquire(1, 1_000, 10_000, 0)).grant
        granted = []
        for now in range(1, times + 1):
            lease = asyncio.run(ledger.consolidate(lease.lease_id, lease.fencing_token,
                                                   lease.granted, 1_000, needed, 10_000,
                                                   now)).grant
            granted.append(lease.granted)
        return granted

    variant = kind_of("consolidation-ignores-demand")
    assert exchanges(variant, 51) == [30, 30, 30]
    assert exchanges(FIXED, 51) == [51, 51, 51]
    # A quote the restored balance cannot fund grows nothing, on either:
    # the variant changed the growth to a fundable quote and nothing else.
    assert exchanges(variant, 61) == exchanges(FIXED, 61) == [30, 30, 30]


def test_the_oracle_counts_a_shortfall_only_against_a_quote_the_restored_balance_funds():
    from simulator.families.tollgate.oracle import LedgerOracle
    from stores.tollgate.domain import LeaseGrant

    oracle = LedgerOracle([("ns-0", "subject-0")], grace_ms=1_000)
    oracle.transaction(0, 7, "consolidate", ())

    def sized(granted: int, needed: int, balance_left: int) -> int:
        oracle.exchange_sized(LeaseGrant(1, 1, 1, granted, 10_000), needed, balance_left)
        return oracle.counts.get("demand_shortfall_units")

    assert sized(30, 51, 30) == 21      # 60 restored funds 51: 21 short
    assert sized(30, 61, 30) == 21      # 60 cannot fund 61: nothing more
    assert sized(51, 51, 9) == 21       # grown to the quote: nothing more
    assert oracle.counts.get("regrants_below_demand") == 1
    assert [found.metric for found in oracle.store_found] == ["demand_shortfall_units"]


def two_passes_at_a_boundary(kind: str, url: str | None, race: bool) -> tuple[Any, ...]:
    """Two rollover passes of ``kind`` over one account (a top-up of 100, an
    allowance of 40 a second) at 1.5 s, on the ledger at ``url`` (``None``: in
    memory), each as its holder sends it; ``race``: the variant's two reads
    both land before either roll. The account's deposited and expired
    units, and its period, after them."""
    settings = TollgateSettings(deposit=100, budget_allowance=40, budget_period="1s")

    async def passes() -> tuple[Any, ...]:
        service = await get(kind).service(url, settings, [("ns-0", "subject-0")],
                                          fresh_schema())
        try:
            now = 1_500
            if kind == FIXED:
                for _ in range(2):
                    await service.transact("roll_due_periods", (10,), now)
            elif race:
                due = [await service.transact("due_periods", (10,), now) for _ in range(2)]
                for accounts in due:
                    await service.transact("roll_periods", (accounts,), now)
            else:
                for _ in range(2):
                    accounts = await service.transact("due_periods", (10,), now)
                    if accounts:
                        await service.transact("roll_periods", (accounts,), now)
            view = await service.ledger.account_view(1)
            books = view.conservation
            assert books.holds()
            return books.deposited, books.expired, books.balance, view.period_start
        finally:
            await service.close()

    return asyncio.run(passes())


@pytest.fixture(params=["memory", "postgresql"])
def ledger_url(request) -> str | None:
    if request.param == "memory":
        return None
    return request.getfixturevalue("postgres_server").dsn


def test_two_passes_racing_a_boundary_deposit_its_allowance_twice_only_on_the_variant(
        ledger_url):
    # Seed 003 L1142-L1147. The fixed ledger checks and crosses the boundary
    # in one transaction: the second pass finds the period crossed, one
    # allowance of 40. The variant's second roll, of an account it read as
    # due before the first rolled it, crosses it again: 40 more deposited,
    # the 40 just deposited expired as if their period had closed.
    variant = kind_of("rollover-deposits-twice")
    assert two_passes_at_a_boundary(FIXED, ledger_url, race=True) == (140, 0, 140, 1_000)
    assert two_passes_at_a_boundary(variant, ledger_url, race=True) == (180, 40, 140, 1_000)
    # Passes that do not interleave (the second reads after the first
    # rolled) deposit once on the variant too: the damage is the split.
    assert two_passes_at_a_boundary(variant, ledger_url, race=False) == (140, 0, 140, 1_000)


def statement_after_a_boundary(kind: str, url: str | None) -> Any:
    """One account (a top-up of 100, an allowance of 40 a second) rolled into
    its first period at 0.5 s, 15 of the allowance leased and released
    unspent but 5, then rolled into the next at 1.5 s: its statement."""
    settings = TollgateSettings(deposit=100, budget_allowance=40, budget_period="1s")

    async def roll() -> Any:
        service = await get(kind).service(url, settings, [("ns-0", "subject-0")],
                                          fresh_schema())
        try:
            ledger = service.ledger
            await ledger.roll_due_periods(500, 10)
            lease = (await ledger.acquire(1, 15, 1_000, 600)).grant
            await ledger.ingest([UsageEvent("r1", lease.lease_id, 1, lease.fencing_token, 5)],
                                700)
            await ledger.release(lease.lease_id, lease.fencing_token, 10, 800)
            await ledger.roll_due_periods(1_500, 10)
            return await ledger.conservation(1)
        finally:
            await service.close()

    return asyncio.run(roll())


def test_a_statement_without_expiry_fails_by_exactly_what_a_rollover_expired(ledger_url):
    # Seed 003 L204-L216 (GL-97). The first period's 40 less the 5 billed:
    # 35 expire at 1.5 s. The fixed statement puts them on the right and
    # holds; the variant's has no term for them and is 35 short.
    fixed = statement_after_a_boundary(FIXED, ledger_url)
    assert (fixed.deposited, fixed.balance, fixed.settled_usage, fixed.expired) == (
        180, 140, 5, 35)
    assert fixed.holds()
    variant = statement_after_a_boundary(kind_of("statement-without-expiry"), ledger_url)
    assert variant == dataclasses.replace(fixed, expired=0)
    assert not variant.holds() and variant.residual() == 35
