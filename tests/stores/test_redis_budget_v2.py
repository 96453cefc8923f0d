"""The v2 (namespace-cap) Redis budget store, on fakeredis and real Redis.

axond 0.3.39's own tests of the v2 layout and its boot fences, ported: the
same ``RedisBudget`` class, under plain asyncio, with the clock driven by
``ManualRuntime``. The migration's tests are in ``test_migration.py``; both
use ``Lab`` from ``tests/budget_lab.py``.
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from budget_lab import in_acme, run
from manual_runtime import ManualRuntime
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis_server import free_port

from stores import registry
from stores.axond_budget.contract import (
    Admission,
    BudgetError,
    BudgetKey,
    Denial,
    ExceededScope,
    SharedSettings,
)
from stores.axond_budget.redis_budget import (
    LAYOUT_V2,
    RedisBudget,
    decode_ledger_value,
    escape_identifier,
    layout_key,
    ledger_keys,
    v1_keys,
    v1_patterns,
    v2_keys,
)

SCRIPTS = Path(__file__).resolve().parents[2] / "stores" / "axond_budget"
KEY = BudgetKey("acme", "GW_INBOUND_ACME_KEY")
NAMESPACE_DENIAL = Admission.exceeded(ExceededScope.NAMESPACE)
SUBJECT_DENIAL = Admission.exceeded(ExceededScope.SUBJECT)


def hash_tag(key: str) -> str:
    """What Redis hashes for a key's slot: from the first ``{`` to the next ``}``."""
    start = key.index("{") + 1
    return key[start:key.index("}", start)]


# -- the key layout ------------------------------------------------------------


def test_every_v2_key_in_a_namespace_shares_the_namespace_hash_tag():
    # One script may span all four keys only if a cluster puts them in one slot.
    keys = v2_keys("axond:budget", in_acme("subject-a"))
    other = v2_keys("axond:budget", in_acme("subject-b"))
    for key in (*keys, other.subject_spent):
        assert hash_tag(key) == "acme", key
    assert keys.subject_spent != other.subject_spent
    assert keys.namespace_spent == other.namespace_spent


def test_braces_in_identifiers_cannot_move_the_hash_tag():
    keys = v2_keys("axond:budget", BudgetKey("ac}me", "sub{ject}"))
    assert hash_tag(keys.subject_spent) == "ac%7Dme"
    assert hash_tag(keys.subject_spent) == hash_tag(keys.namespace_spent)
    # Reversible, so distinct identifiers stay distinct.
    assert escape_identifier("a%7B") != escape_identifier("a{")


def test_a_v2_key_is_not_mistaken_for_v1_state():
    spent_pattern, holds_pattern = v1_patterns("axond:budget")
    assert spent_pattern.startswith("axond:budget:{")
    for v2_key in v2_keys("axond:budget", KEY):
        assert v2_key.startswith("axond:budget:v2:{")
        assert not fnmatch.fnmatchcase(v2_key, spent_pattern)
        assert not fnmatch.fnmatchcase(v2_key, holds_pattern)
    v1_spent, v1_holds = v1_keys("axond:budget", KEY)
    assert fnmatch.fnmatchcase(v1_spent, spent_pattern)
    assert fnmatch.fnmatchcase(v1_holds, holds_pattern)


def script_code(name: str) -> str:
    """A script's text without its comments, so a word in a comment cannot
    satisfy (or spoil) an assertion about the code."""
    lines = RedisBudget.scripts.source(name.removesuffix(".lua")).splitlines()  # as it runs
    return "\n".join(line.split("--", 1)[0] for line in lines)


@pytest.mark.parametrize("name", ["reserve_v1.lua", "reserve_v2.lua"])
def test_the_reserve_scripts_reclaim_expired_holds_before_deciding(name):
    code = script_code(name)
    assert "deadline_ms <= now_ms" in code
    # Expired holds are reclaimed (by live_holds) before any decision or write.
    first_reclaim = code.index("live_holds(KEYS")
    assert first_reclaim < code.index("> ") and first_reclaim < code.index("HSET")
    # The decision reads settled spend *and* live holds, so in-flight requests count.
    assert re.search(r"\w*settled \+ \w*live \+ estimate > \w*cap\b", code)


def test_the_v2_reserve_decides_both_caps_before_it_holds_either():
    code = script_code("reserve_v2.lua")
    first_write = code.index("HSET")
    assert code.index("> subject_cap then") < first_write
    assert code.index("> namespace_cap then") < first_write
    # And a settlement releases and charges both scopes, or neither.
    settle = script_code("settle_v2.lua")
    assert settle.count("INCRBY") == 2
    assert settle.count("HDEL") == 2


# -- enforcing both caps ---------------------------------------------------------


def test_two_subjects_cannot_collectively_exceed_the_namespace_cap(lab):
    async def scenario():
        store = await lab.namespace_store(subject_cap=1_000, namespace_cap=1_200)
        first, second = in_acme("first"), in_acme("second")
        held = await store.reserve(first, 800)
        assert held.is_allowed
        # 800 held + 800 asked is over the namespace cap, though each subject has room.
        assert await store.reserve(second, 800) == NAMESPACE_DENIAL
        assert (await store.reserve(second, 300)).is_allowed
        await store.settle(first, held.reservation, 800)
        # Settled spend counts like a hold: 800 + 300 held leave 100.
        assert await store.reserve(second, 200) == NAMESPACE_DENIAL

    run(scenario)


def test_a_denial_by_either_cap_leaves_no_hold_in_either_scope(lab):
    async def scenario():
        store = await lab.namespace_store(subject_cap=600, namespace_cap=1_000)
        keys = v2_keys(lab.prefix, KEY)
        held = await store.reserve(KEY, 600)
        assert await store.reserve(KEY, 1) == SUBJECT_DENIAL
        assert await store.reserve(in_acme("other"), 500) == NAMESPACE_DENIAL
        only = [held.reservation.id]
        assert list(await lab.redis.hgetall(keys.subject_holds)) == only
        assert list(await lab.redis.hgetall(keys.namespace_holds)) == only
        other_holds = v2_keys(lab.prefix, in_acme("other")).subject_holds
        assert await lab.redis.exists(other_holds) == 0

    run(scenario)


def test_a_subject_cap_still_binds_under_a_generous_namespace_cap(lab):
    async def scenario():
        store = await lab.namespace_store(subject_cap=500, namespace_cap=1_000_000)
        held = await store.reserve(KEY, 500)
        assert held.is_allowed
        assert await store.reserve(KEY, 1) == SUBJECT_DENIAL
        await store.settle(KEY, held.reservation, 0)
        assert (await store.reserve(KEY, 500)).is_allowed

    run(scenario)


def test_namespaces_do_not_share_a_cap(lab):
    async def scenario():
        store = await lab.namespace_store(subject_cap=1_000, namespace_cap=1_000)
        acme, other = BudgetKey("acme", "s"), BudgetKey("other", "s")
        held = await store.reserve(acme, 1_000)
        assert held.is_allowed
        await store.settle(acme, held.reservation, 1_000)
        assert (await store.reserve(acme, 1)).denial is Denial.EXCEEDED
        assert (await store.reserve(other, 1_000)).is_allowed

    run(scenario)


def test_releasing_frees_the_estimate_in_both_scopes(lab):
    # A hold left in the namespace hash would wedge the namespace on nothing.
    async def scenario():
        store = await lab.namespace_store(subject_cap=1_000, namespace_cap=1_000)
        held = await store.reserve(KEY, 1_000)
        assert held.is_allowed
        await store.release(KEY, held.reservation)
        assert (await store.reserve(in_acme("another"), 1_000)).is_allowed

    run(scenario)


def test_a_partial_settlement_charges_both_scopes_once(lab):
    # What axond's test asserts: one settlement of 100 against a 900 hold frees
    # the hold in both scopes and charges the namespace 100, not the estimate
    # and not twice. (It settles once; for a replayed settlement see below.)
    async def scenario():
        store = await lab.namespace_store(subject_cap=1_000, namespace_cap=1_000)
        held = await store.reserve(KEY, 900)
        await store.settle(KEY, held.reservation, 100)
        another = in_acme("another")
        assert (await store.reserve(another, 900)).is_allowed
        assert await store.reserve(another, 1) == NAMESPACE_DENIAL
        assert await lab.spent(KEY) == 100
        assert await lab.namespace_spent("acme") == 100

    run(scenario)


def test_a_replayed_settlement_charges_both_scopes_again(lab):
    # The contract has settle called exactly once and never retried, and the
    # script charges even when the hold is gone (an expired hold's spend is
    # real). So a settlement replayed by a driver retry is a double charge, in
    # both scopes alike: the lab's duplicate-settlement faults measure this.
    async def scenario():
        store = await lab.namespace_store(subject_cap=1_000, namespace_cap=1_000)
        held = await store.reserve(KEY, 900)
        await store.settle(KEY, held.reservation, 100)
        await store.settle(KEY, held.reservation, 100)
        assert await lab.spent(KEY) == 200
        assert await lab.namespace_spent("acme") == 200

    run(scenario)


def test_an_expired_hold_frees_the_namespace_cap_too(lab):
    async def scenario():
        runtime = ManualRuntime()
        # A long TTL, and expiry forced by backdating the hold, as axond's test does.
        store = await lab.namespace_store(1_000, 1_000, ttl="10m", runtime=runtime)
        died, alive = in_acme("died"), in_acme("alive")
        held = await store.reserve(died, 900)
        assert held.is_allowed
        assert await store.reserve(alive, 900) == NAMESPACE_DENIAL
        # The replica holding it died; its hold is now past its deadline in both
        # scopes it was recorded in.
        keys = v2_keys(lab.prefix, died)
        stale = f"900:{runtime.now_ms() - 1}"
        for holds in (keys.subject_holds, keys.namespace_holds):
            assert await lab.redis.hset(holds, held.reservation.id, stale) == 0, "rewritten"
        assert (await store.reserve(alive, 900)).is_allowed

    run(scenario)


def test_a_hold_stops_counting_in_both_scopes_at_its_deadline(lab):
    async def scenario():
        runtime = ManualRuntime()
        # The server's own key TTL (wall clock) stays far away; deadlines follow
        # the test's clock.
        store = await lab.namespace_store(1_000, 1_000, ttl="10s", runtime=runtime)
        assert (await store.reserve(in_acme("died"), 900)).is_allowed
        runtime.advance_ms(9_999)
        assert await store.reserve(in_acme("alive"), 900) == NAMESPACE_DENIAL
        runtime.advance_ms(1)
        assert (await store.reserve(in_acme("alive"), 900)).is_allowed

    run(scenario)


def test_two_replicas_enforce_one_namespace_cap_under_contention(lab):
    async def scenario():
        replica_a = await lab.namespace_store(1_000_000, 1_000,
                                              runtime=ManualRuntime(id_prefix="a"))
        replica_b = await lab.v2(1_000_000, 1_000, runtime=ManualRuntime(id_prefix="b"))

        async def admit(index: int) -> bool:
            # A distinct subject each, far under the subject cap: only the
            # namespace cap can deny anyone.
            store = replica_a if index % 2 == 0 else replica_b
            key = in_acme(f"subject-{index}")
            admission = await store.reserve(key, 100)
            if admission.is_allowed:
                await store.settle(key, admission.reservation, 100)
            return admission.is_allowed

        # All forty in flight at once: only the server's atomic scripts order them.
        admitted = await asyncio.gather(*(admit(index) for index in range(40)))
        assert sum(admitted) == 10
        assert await lab.namespace_spent("acme") == 1_000

    run(scenario)


def test_a_pipe_bearing_subject_is_unambiguous_under_the_v2_layout(lab):
    async def scenario():
        store = await lab.namespace_store(1_000, 1_000)
        piped, plain = in_acme("sub|ject"), in_acme("sub")
        held = await store.reserve(piped, 300)
        assert held.is_allowed
        await store.settle(piped, held.reservation, 300)
        assert await lab.spent(piped) == 300
        assert await lab.spent(plain) == 0, "no key collision"
        assert await lab.namespace_spent("acme") == 300

    run(scenario)


# -- boot fences ------------------------------------------------------------------


def test_the_namespace_cap_refuses_to_boot_against_unmigrated_state(lab):
    async def scenario():
        with pytest.raises(BudgetError, match="migrate_v1_to_v2"):
            await lab.v2()

    run(scenario)


def test_a_v1_key_written_after_the_migration_is_rejected(lab):
    async def scenario():
        await lab.migrate()
        with pytest.raises(BudgetError, match="namespace_cap_microdollars"):
            await lab.v1()
        # The v1 replica that ignored that refusal (or never restarted) writes anyway.
        await lab.redis.set(lab.v1_spent_key(in_acme("stale")), 10)
        with pytest.raises(BudgetError, match="v1 budget key"):
            await lab.v2()

    run(scenario)


def test_a_v1_holds_hash_left_after_the_migration_is_rejected_too(lab):
    async def scenario():
        await lab.migrate()
        await lab.redis.hset(v1_keys(lab.prefix, in_acme("stale"))[1], "r", "5:1")
        with pytest.raises(BudgetError, match="1 v1 budget key"):
            await lab.v2()

    run(scenario)


def test_an_unreachable_server_fails_a_v2_boot():
    async def scenario():
        client = aioredis.Redis(port=free_port(), decode_responses=True,
                                retry=Retry(NoBackoff(), 0), socket_connect_timeout=1)
        settings = SharedSettings(namespace_cap_microdollars=1_000)
        with pytest.raises(BudgetError, match="did not answer"):
            await RedisBudget.connect(client, ManualRuntime(), settings)

    run(scenario)


# -- the registered kind ----------------------------------------------------------


def test_the_v2_kind_requires_a_namespace_cap():
    kind = registry.get("axond_budget.redis_v2")
    with pytest.raises(ValueError, match="set `namespace_cap_microdollars`"):
        kind.settings_model.model_validate({"subject_cap_microdollars": 1_000})
    assert kind.settings_model.model_validate(
        {"namespace_cap_microdollars": 5_000}).enforces_namespace_cap


def test_the_v2_kind_names_both_scopes_ledgers_for_the_oracle():
    settings = SharedSettings(namespace_cap_microdollars=5_000)
    keys = v2_keys(settings.key_prefix, KEY)
    assert registry.get("axond_budget.redis_v2").ledger_keys(settings, KEY) == {
        keys.subject_spent: "spent", keys.subject_holds: "holds",
        keys.namespace_spent: "namespace_spent", keys.namespace_holds: "namespace_holds"}
    assert ledger_keys(SharedSettings(), KEY) == dict(
        zip(v1_keys(settings.key_prefix, KEY), ["spent", "holds"], strict=True))
    assert decode_ledger_value("namespace_spent", "250") == 250
    assert decode_ledger_value("namespace_holds", ["r1", "40:99"]) == {"r1": (40, 99)}
    assert decode_ledger_value("namespace_holds", None) == {}


def test_the_v2_kind_boots_a_fresh_keyspace_as_migrated(lab):
    async def scenario():
        kind = registry.get("axond_budget.redis_v2")
        settings = kind.settings_model.model_validate(
            {"namespace_cap_microdollars": 1_000, "key_prefix": lab.prefix})
        store = await kind.build(lab.client(), ManualRuntime(), settings)
        assert await lab.redis.get(layout_key(lab.prefix)) == LAYOUT_V2
        assert (await store.reserve(KEY, 1_000)).is_allowed
        # A second replica boots on the keyspace the first is serving.
        assert await kind.build(lab.client(), ManualRuntime(), settings)

    run(scenario)


def test_the_v2_kind_does_not_stamp_a_keyspace_that_holds_anything(lab):
    # Unmarked but not empty is for the boot fences to judge, not to paper over:
    # here, v1 spend the migration has not carried.
    async def scenario():
        kind = registry.get("axond_budget.redis_v2")
        settings = kind.settings_model.model_validate(
            {"namespace_cap_microdollars": 1_000, "key_prefix": lab.prefix})
        await lab.redis.set(lab.v1_spent_key(KEY), 400)
        with pytest.raises(BudgetError, match="migrate_v1_to_v2"):
            await kind.build(lab.client(), ManualRuntime(), settings)
        assert await lab.redis.get(layout_key(lab.prefix)) is None

    run(scenario)
