"""The v1-to-v2 migration, on fakeredis and real Redis.

axond 0.3.39's migration tests, ported. An interrupted run is simulated by
running the claim and apply steps by hand (``claim_v1_spend``,
``apply_claim``), exactly as far as a dying process would have got.
"""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from budget_lab import Lab, in_acme, run
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis_server import free_port

from stores.axond_budget.contract import (
    Admission,
    BudgetError,
    BudgetKey,
    ExceededScope,
    SharedSettings,
)
from stores.axond_budget.migration import (
    Claim,
    applied_claims_key,
    apply_claim,
    attribute_v1_key,
    claim_key,
    claim_v1_spend,
    migrate_redis,
    migrate_v1_to_v2,
    sequence_key,
)
from stores.axond_budget.redis_budget import (
    LAYOUT_MIGRATING,
    LAYOUT_V2,
    RedisBudget,
    layout_key,
    v1_keys,
)

FIRST, SECOND = in_acme("first"), in_acme("second")
NAMESPACE_DENIAL = Admission.exceeded(ExceededScope.NAMESPACE)
SUBJECT_DENIAL = Admission.exceeded(ExceededScope.SUBJECT)


async def spend(store: RedisBudget, key: BudgetKey, amount: int) -> None:
    """Reserve and settle ``amount`` through ``store``."""
    held = await store.reserve(key, amount)
    assert held.is_allowed
    await store.settle(key, held.reservation, amount)


async def spend_under_v1(lab: Lab, key: BudgetKey, amount: int, cap: int = 10_000) -> None:
    """Spend ``amount`` as a gateway without the namespace cap would."""
    await spend(await lab.v1(cap), key, amount)


# -- attribution ---------------------------------------------------------------


def attribute(redis_key: str, *namespaces: str) -> BudgetKey:
    return attribute_v1_key("axond:budget", redis_key, ":spent", namespaces)


@pytest.mark.parametrize(("redis_key", "namespaces", "owner"), [
    # A `|` inside the namespace: a first-`|` split would hand this to `team`.
    ("axond:budget:{team|west|sub}:spent", ("team|west",), BudgetKey("team|west", "sub")),
    # A brace inside either identifier stays inside the one tag.
    ("axond:budget:{ac}me|sub{ject}:spent", ("ac}me",), BudgetKey("ac}me", "sub{ject")),
    # The same id configured twice agrees with itself: no ambiguity.
    ("axond:budget:{acme|sub}:spent", ("acme", "acme"), BudgetKey("acme", "sub")),
])
def test_a_v1_key_is_attributed_to_the_configured_namespace_that_owns_it(redis_key,
                                                                          namespaces, owner):
    assert attribute(redis_key, *namespaces) == owner


@pytest.mark.parametrize(("redis_key", "namespaces", "reason"), [
    # `acme` prefixes the tag, but the tag also reads as namespace `acme|sub`.
    ("axond:budget:{acme|sub|ject}:spent", ("acme",), "still contains a `|`"),
    # Both `team` and `team|west` could own it.
    ("axond:budget:{team|west|sub}:spent", ("team", "team|west"), "ambiguous"),
    ("axond:budget:{gone|sub}:spent", ("acme",), "none of the configured namespace ids"),
    ("axond:budget:layout", ("acme",), "does not have the `<prefix>:{namespace|subject}` shape"),
    ("axond:budget:{acme}:spent", ("acme",), "none of the configured namespace ids"),
])
def test_a_v1_key_no_single_configured_namespace_owns_is_refused(redis_key, namespaces,
                                                                  reason):
    with pytest.raises(BudgetError) as refusal:
        attribute(redis_key, *namespaces)
    assert reason in str(refusal.value)
    assert redis_key in str(refusal.value)


# -- carrying spend ---------------------------------------------------------------


def test_the_migration_carries_v1_spend_into_both_scopes(lab):
    async def scenario():
        for key in (FIRST, SECOND):
            await spend_under_v1(lab, key, 400, cap=1_000)
        report = await lab.migrate()
        assert (report.subjects, report.namespaces, report.carried_microdollars) == (2, 1, 800)
        # Running it again finds nothing new: no carry, same totals.
        again = await lab.migrate()
        assert (again.subjects, again.carried_microdollars) == (0, 0)

        store = await lab.v2(1_000, 1_000)
        # 800 already spent in the namespace: 200 left, in both scopes.
        assert await store.reserve(in_acme("third"), 201) == NAMESPACE_DENIAL
        assert await store.reserve(FIRST, 601) == SUBJECT_DENIAL
        assert await lab.namespace_spent("acme") == 800

    run(scenario)


def test_the_migration_drops_v1_holds_and_counts_them(lab):
    async def scenario():
        store = await lab.v1()
        assert (await store.reserve(FIRST, 300)).is_allowed  # never settled
        report = await lab.migrate()
        assert report.reservation_hashes == 1
        assert report.carried_microdollars == 0
        assert await lab.redis.exists(v1_keys(lab.prefix, FIRST)[1]) == 0
        assert (await lab.v2(1_000, 1_000)) is not None

    run(scenario)


def test_migrating_an_empty_keyspace_only_stamps_the_v2_layout(lab):
    async def scenario():
        report = await lab.migrate()
        assert report == type(report)()
        assert await lab.redis.get(layout_key(lab.prefix)) == LAYOUT_V2

    run(scenario)


def test_a_v1_write_after_the_migration_is_added_not_dropped(lab):
    async def scenario():
        v1 = await lab.v1(10_000)
        await spend(v1, FIRST, 400)
        assert (await lab.migrate()).carried_microdollars == 400
        # A replica that booted before the migration, and did not get the memo,
        # settles another 150 under v1.
        await spend(v1, FIRST, 150)
        recovery = await lab.migrate()
        assert recovery.carried_microdollars == 150, "added to the 400 already carried"
        assert await lab.spent(FIRST) == 550
        assert await lab.namespace_spent("acme") == 550
        assert (await lab.migrate()).carried_microdollars == 0
        assert await lab.spent(FIRST) == 550

    run(scenario)


def test_recovering_a_stray_v1_write_keeps_the_v2_spend_beside_it(lab):
    # The recovery runs beside a live v2 fleet, so it adds its delta to the
    # namespace total instead of recomputing the total from the subjects.
    async def scenario():
        await spend_under_v1(lab, FIRST, 400)
        await lab.migrate()
        await spend(await lab.v2(10_000, 10_000), SECOND, 250)
        await lab.redis.set(lab.v1_spent_key(FIRST), 150)  # a stray v1 replica

        recovery = await lab.migrate()
        assert recovery.carried_microdollars == 150
        assert await lab.spent(FIRST) == 550
        assert await lab.spent(SECOND) == 250, "the v2-only subject is untouched"
        assert await lab.namespace_spent("acme") == 800, "400 + 250 + 150, nothing overwritten"

    run(scenario)


# -- refusing to guess ---------------------------------------------------------------


def test_a_configured_namespace_that_is_only_a_prefix_does_not_claim_the_key(lab):
    async def scenario():
        # Written by namespace `team|west`, since removed from the configuration.
        orphan = f"{lab.prefix}:{{team|west|abc}}:spent"
        await lab.redis.set(orphan, 70)
        with pytest.raises(BudgetError, match="still contains a `|`") as refusal:
            await lab.migrate(("team",))
        assert orphan in str(refusal.value)
        assert await lab.redis.get(orphan) == "70", "nothing moved or deleted"
        assert await lab.namespace_spent("team") == 0
        assert await lab.redis.get(layout_key(lab.prefix)) is None, "nothing stamped"

        # The owning namespace, `|` and all, resolves it.
        report = await lab.migrate(("team|west",))
        assert report.carried_microdollars == 70
        assert await lab.namespace_spent("team|west") == 70
        assert await lab.namespace_spent("team") == 0

    run(scenario)


def test_an_unattributable_v1_key_aborts_the_migration_intact(lab):
    async def scenario():
        await spend_under_v1(lab, FIRST, 400, cap=1_000)
        orphan = f"{lab.prefix}:{{retired|sub}}:spent"
        await lab.redis.set(orphan, 25)
        # `retired` is not configured, and `team` cannot claim it either.
        for namespaces in (("acme",), ("acme", "team")):
            with pytest.raises(BudgetError) as refusal:
                await lab.migrate(namespaces)
            assert orphan in str(refusal.value)
        # Untouched and unmarked, so the operator can fix the config and re-run.
        assert await lab.redis.get(lab.v1_spent_key(FIRST)) == "400"
        assert await lab.redis.get(orphan) == "25"
        assert await lab.redis.get(layout_key(lab.prefix)) is None
        report = await lab.migrate(("acme", "retired"))
        assert report.carried_microdollars == 425

    run(scenario)


def test_a_key_prefix_with_glob_characters_scans_only_its_own_keys(lab):
    # SCAN patterns are globs; the prefix is matched literally, so a migration
    # (or a boot check) never reaches into a neighbour's keyspace.
    async def scenario():
        odd, neighbour = f"{lab.prefix}[x]*", f"{lab.prefix}x-other"
        await lab.redis.set(v1_keys(odd, FIRST)[0], 40)
        await lab.redis.set(v1_keys(neighbour, FIRST)[0], 60)
        report = await migrate_v1_to_v2(lab.client(), odd, ["acme"])
        assert report.carried_microdollars == 40
        assert await lab.redis.get(v1_keys(neighbour, FIRST)[0]) == "60"
        assert await lab.redis.get(layout_key(neighbour)) is None

    run(scenario)


def test_the_migration_needs_the_namespace_cap_it_migrates_to():
    # Refused before touching Redis: this client could not reach a server.
    async def scenario():
        client = aioredis.Redis(port=free_port(), decode_responses=True,
                                retry=Retry(NoBackoff(), 0), socket_connect_timeout=1)
        with pytest.raises(BudgetError, match="needs `namespace_cap_microdollars` set"):
            await migrate_redis(client, SharedSettings(), ["acme"])

    run(scenario)


def test_the_migration_entry_point_migrates_for_a_configuration_with_the_cap(lab):
    async def scenario():
        await spend_under_v1(lab, FIRST, 400)
        settings = lab.settings(1_000, namespace_cap=1_000)
        report = await migrate_redis(lab.client(), settings, ["acme"])
        assert report.carried_microdollars == 400

    run(scenario)


# -- bookkeeping and interruptions -----------------------------------------------------


def test_a_finished_migration_leaves_no_bookkeeping_behind(lab):
    async def scenario():
        await lab.redis.set(lab.v1_spent_key(FIRST), 250)
        await lab.migrate()
        assert await lab.spent(FIRST) == 250
        for key in (sequence_key(lab.prefix, FIRST), applied_claims_key(lab.prefix, "acme"),
                    claim_key(lab.prefix, FIRST)):
            assert await lab.redis.exists(key) == 0, f"{key} outlived the migration"
        # Later stray v1 spend is carried once too: the record of old tokens
        # went with the sequence, so a restarted sequence cannot look old.
        await lab.redis.set(lab.v1_spent_key(FIRST), 100)
        assert (await lab.migrate()).carried_microdollars == 100
        assert await lab.spent(FIRST) == 350
        assert await lab.namespace_spent("acme") == 350

    run(scenario)


def test_a_migration_that_stopped_part_way_serves_neither_layout(lab):
    async def scenario():
        for key, spend in ((FIRST, 300), (SECOND, 200)):
            await lab.redis.set(lab.v1_spent_key(key), spend)
        # The run stamped the marker, carried the first subject whole, and died.
        await lab.redis.set(layout_key(lab.prefix), LAYOUT_MIGRATING)
        claim = await claim_v1_spend(lab.redis, lab.prefix, FIRST)
        assert await apply_claim(lab.redis, lab.prefix, FIRST, claim) == 300
        await lab.redis.delete(claim_key(lab.prefix, FIRST))

        # The ledger is split across layouts: neither configuration may serve.
        for boot in (lambda: lab.v2(), lambda: lab.v1()):
            with pytest.raises(BudgetError, match="did not finish"):
                await boot()

        resumed = await lab.migrate()
        assert resumed.carried_microdollars == 200, "the carried subject is not charged again"
        assert await lab.spent(FIRST) == 300
        assert await lab.spent(SECOND) == 200
        assert await lab.namespace_spent("acme") == 500
        assert await lab.v2()

    run(scenario)


class DiesOnApply:
    """A data port whose connection drops when the migration applies a claim."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def register_script(self, source: str):
        if "HSETNX" not in source:
            return self.inner.register_script(source)

        async def lost(keys=(), args=()):
            raise RedisConnectionError("Connection closed by server.")

        return lost


def test_a_migration_that_dies_mid_carry_leaves_the_keyspace_marked_migrating(lab):
    async def scenario():
        for key, spend_microdollars in ((FIRST, 300), (SECOND, 200)):
            await lab.redis.set(lab.v1_spent_key(key), spend_microdollars)
        with pytest.raises(BudgetError, match="failed during the migration"):
            await migrate_v1_to_v2(DiesOnApply(lab.client()), lab.prefix, ["acme"])
        assert await lab.redis.get(layout_key(lab.prefix)) == LAYOUT_MIGRATING
        for boot in (lambda: lab.v2(), lambda: lab.v1()):
            with pytest.raises(BudgetError, match="did not finish"):
                await boot()
        resumed = await lab.migrate()
        assert resumed.carried_microdollars == 500
        assert (await lab.spent(FIRST), await lab.spent(SECOND)) == (300, 200)
        assert await lab.namespace_spent("acme") == 500
        assert await lab.v2()

    run(scenario)


def test_an_outstanding_migration_claim_stops_either_configuration_booting(lab):
    async def scenario():
        await spend(await lab.namespace_store(1_000, 1_000), FIRST, 400)
        # A stray v1 write, and a recovery that died between claiming it and
        # adding it to v2: no v1 key is left, the claim holds 150.
        await lab.redis.set(lab.v1_spent_key(FIRST), 150)
        assert await claim_v1_spend(lab.redis, lab.prefix, FIRST) is not None

        # Refused though the marker says v2 and no v1 key is left to find.
        with pytest.raises(BudgetError, match="migrate_v1_to_v2") as refusal:
            await lab.v2()
        assert claim_key(lab.prefix, FIRST) in str(refusal.value)
        # Without the cap the marker alone refuses: no scan is needed, since
        # claims only exist on a keyspace a migration has stamped.
        with pytest.raises(BudgetError, match="must stay set"):
            await lab.v1()

        recovery = await lab.migrate()
        assert recovery.carried_microdollars == 150
        assert await lab.spent(FIRST) == 550
        assert await lab.namespace_spent("acme") == 550
        assert await lab.v2()

    run(scenario)


def test_a_carry_interrupted_after_its_claim_is_finished_once(lab):
    async def scenario():
        await lab.redis.set(lab.v1_spent_key(FIRST), 300)
        # Died after claiming, before applying: only the claim accounts for it.
        assert await claim_v1_spend(lab.redis, lab.prefix, FIRST) == Claim(1, 300)
        assert await lab.redis.get(lab.v1_spent_key(FIRST)) is None, "drained atomically"
        assert await lab.redis.get(claim_key(lab.prefix, FIRST)) == "1:300"

        resumed = await lab.migrate()
        assert resumed.carried_microdollars == 300, "the parked claim is finished, not lost"
        assert await lab.spent(FIRST) == 300
        assert await lab.namespace_spent("acme") == 300

    run(scenario)


def test_a_carry_interrupted_after_its_apply_is_not_charged_again(lab):
    async def scenario():
        await lab.redis.set(lab.v1_spent_key(FIRST), 300)
        await lab.migrate()
        # Died after applying claim 2 (75), before deleting it.
        await lab.redis.set(claim_key(lab.prefix, FIRST), "2:75")
        await lab.redis.set(sequence_key(lab.prefix, FIRST), 2)
        for expected in (75, 0):
            added = await apply_claim(lab.redis, lab.prefix, FIRST, Claim(2, 75))
            assert added == expected, "a claim is applied at most once"
        recovered = await lab.migrate()
        assert recovered.carried_microdollars == 0, "the applied claim is not charged again"
        assert await lab.spent(FIRST) == 375
        assert await lab.namespace_spent("acme") == 375
        assert await lab.redis.exists(claim_key(lab.prefix, FIRST)) == 0

    run(scenario)


def test_a_v2_store_serves_what_a_finished_migration_carried(lab):
    async def scenario():
        await spend_under_v1(lab, FIRST, 900, cap=1_000)
        await lab.migrate()
        store = await lab.v2(1_000, 5_000)
        assert await store.reserve(FIRST, 101) == Admission.exceeded()
        assert (await store.reserve(FIRST, 100)).is_allowed

    run(scenario)
