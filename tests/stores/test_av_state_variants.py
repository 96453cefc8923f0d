"""The historical variants of av_state's Redis store, and what their bugs cost.

Each variant is tried twice: under plain asyncio against fakeredis and a real
server (the bug itself, a few calls in a row, beside the fixed store making
the same calls), and as a whole simulation (its scenario,
``data/scenarios/av-state-variant-*.toml``, on the variant and on the fixed
store with the same seed: the damage on one, none on the other, and never
``store_logic`` on the fixed store where the lab injected a fault). Their race
reports are replayed by ``tests/simulator/test_races.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from blame import blamed_on_the_store
from test_av_state_store import Bench, FixedIdRuntime, runner

from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from stores import registry
from stores.av_state import variants
from stores.av_state.contract import (
    COUNTER_TTL_SECONDS,
    I64_MAX,
    JCS_SAFE_MAX,
    Committed,
    Refund,
    Refused,
    Spend,
)
from stores.av_state.redis_store import SCRIPTS, with_ttls
from stores.scripts import Patch

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"
FIXED = "av_state.redis"
LUA_VARIANTS = ("refund_without_marker", "refund_not_exists_gated", "refund_many_tonumber",
                "add_without_ttl", "refusal_without_ttl_refresh")
PYTHON_VARIANTS = {"remove_prefix_noop": (variants.RemovePrefixNoop, {"remove_prefix"}),
                   "marker_outside_slot": (variants.MarkerOutsideSlot, {"refund_marker"})}
"""Variants whose seam is a method of the store, not a script: the subclass,
and the methods it overrides."""
VARIANTS = (*LUA_VARIANTS, *PYTHON_VARIANTS)


def kind_name(variant: str) -> str:
    return f"av_state.variants.{variant}"


@dataclass(frozen=True)
class Damage:
    """What a variant's scenario breaks, and where the lab files it."""

    metrics: tuple[str, ...]
    """Each above zero on the variant, zero on the fixed store under the same seed."""
    filed_under: tuple[str, ...]
    """The metrics split by cause that carry all of it on the variant."""


DAMAGE = {
    "refund_without_marker": Damage(
        ("budget_minted_units",), ("budget_minted_units_by_store_logic",)),
    "refund_not_exists_gated": Damage(
        ("counters_resurrected", "counters_without_ttl", "counters_without_ttl_at_end"),
        ("counters_resurrected_by_store_logic", "counters_without_ttl_by_store_logic")),
    "refund_many_tonumber": Damage(
        ("partial_batches", "partial_refunds"), ("partial_batches_by_store_logic",)),
    "add_without_ttl": Damage(
        ("counters_without_ttl", "counters_without_ttl_at_end"),
        ("counters_without_ttl_by_store_logic",)),
    "refusal_without_ttl_refresh": Damage(
        ("counter_resets", "budget_overshoot_units"),
        ("counter_resets_by_store_logic", "budget_overshoot_units_by_store_logic")),
    # Its scenario recycles session ids, and where two of an agent's sessions
    # overlap both stores show shared_prefix damage: the store's part is compared.
    "remove_prefix_noop": Damage(
        ("false_refusals_by_store_logic", "counters_present_at_end"),
        ("false_refusals_by_store_logic",)),
}
"""Each variant's damage in its scenario, ``data/scenarios/av-state-variant-*.toml``."""


@pytest.fixture
def on_kind(backend_name, request, key_prefix):
    """``on_kind(kind)(scenario, runtime=None)``: a scenario against a fresh
    store of ``kind``, on fakeredis and on the real server."""
    url = request.getfixturevalue("redis_url") if backend_name != "fakeredis" else None

    def of(kind: str):
        seam = PYTHON_VARIANTS.get(kind.removeprefix("av_state.variants."))
        return runner(backend_name, url, key_prefix, registry.get(kind).scripts,
                      *(seam[0],) if seam else ())

    return of


# -- the kinds -------------------------------------------------------------------


def test_every_variant_is_the_fixed_store_with_a_script_or_two_replaced_or_one_method():
    assert {kind.name for kind in variants.KINDS} == {kind_name(name) for name in VARIANTS}
    fixed = registry.get(FIXED)
    for name, (store_class, methods) in PYTHON_VARIANTS.items():
        kind = registry.get(kind_name(name))
        assert kind.protocol == fixed.protocol
        assert kind.scripts == fixed.scripts  # the shipped scripts, every one
        assert store_class.__bases__ == (variants.RedisStateStore,)
        overridden = {attribute for attribute, value in vars(store_class).items()
                      if callable(value) and not attribute.startswith("__")}
        assert overridden == methods
    for name in LUA_VARIANTS:
        kind = registry.get(kind_name(name))
        assert kind.protocol == fixed.protocol  # run and judged as the av_state family
        assert set(kind.scripts) == set(fixed.scripts)  # every call keeps its label
        replaced = {script for script in fixed.scripts
                    if kind.scripts[script] != fixed.scripts[script]}
        assert replaced, f"{name} replaces no script"
        assert replaced <= {"refund", "refund_many", "add", "try_spend"}


SEAMS = {
    "refund_without_marker": {
        "refund": (["if redis.call('SET', KEYS[2], '1', 'NX', 'EX', "
                    "${REFUND_MARKER_TTL_SECONDS}) == false then", "    return -1", "end"], []),
        "refund_many": (["if redis.call('SET', KEYS[#KEYS], '1', 'NX', 'EX', "
                         "${REFUND_MARKER_TTL_SECONDS}) == false then", "    return -1", "end"],
                        []),
    },
    "refund_not_exists_gated": {
        "refund": (["if redis.call('EXISTS', KEYS[1]) == 0 then", "    return 0", "end",
                    "    redis.call('SET', KEYS[1], 0, 'EX', ${COUNTER_TTL_SECONDS})"],
                   ["    redis.call('SET', KEYS[1], 0)"]),
        "refund_many": (["    if redis.call('EXISTS', key) == 1 then", "    end",
                         "            redis.call('SET', key, 0, 'EX', ${COUNTER_TTL_SECONDS})"],
                        ["            redis.call('SET', key, 0)"]),
    },
    "refund_many_tonumber": {
        "refund_many": (["        local new = redis.call('DECRBY', key, ARGV[i])"],
                        ["        local new = redis.call('DECRBY', key, tonumber(ARGV[i]))"]),
    },
    "add_without_ttl": {
        "add": (["local result = redis.call('INCRBY', KEYS[1], ARGV[1])",
                 "-- The same TTL as try_spend: a counter touched only through add "
                 "(bookkeeping,",
                 "-- telemetry) would otherwise live forever and leak memory until Redis OOMs.",
                 "redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})",
                 "return result"],
                ["return redis.call('INCRBY', KEYS[1], ARGV[1])"]),
    },
    "refusal_without_ttl_refresh": {
        "try_spend": (["        -- Refresh the TTL of every existing key before refusing. "
                       "Otherwise a",
                       "        -- session at its cap that keeps retrying (every attempt refused, "
                       "the",
                       "        -- commit loop never reached) has its counter expire a day after "
                       "its",
                       "        -- last successful spend, and the next attempt sees 0: the cap",
                       "        -- silently resets mid-session. The TTL reclaims abandoned "
                       "sessions;",
                       "        -- an actively retrying session is not abandoned.",
                       "        for _, other in ipairs(KEYS) do",
                       "            if redis.call('EXISTS', other) == 1 then",
                       "                redis.call('EXPIRE', other, ${COUNTER_TTL_SECONDS})",
                       "            end",
                       "        end"],
                      []),
    },
}
"""Each variant's seam, by script: the shipped lines it takes out, and the
lines it puts in. Every other line, and every other script, is the shipped one."""


def changed_lines(shipped: str, patched: str) -> tuple[Counter, Counter]:
    """The lines only ``shipped`` has and the lines only ``patched`` has."""
    before, after = Counter(shipped.splitlines()), Counter(patched.splitlines())
    return before - after, after - before


@pytest.mark.parametrize("name", LUA_VARIANTS)
def test_each_variant_is_the_shipped_scripts_with_its_seam_changed_and_nothing_else(name):
    scripts = getattr(variants, name.upper())  # placeholders unsubstituted, as SCRIPTS
    assert registry.get(kind_name(name)).scripts == with_ttls(scripts)
    changed = {script for script in SCRIPTS if scripts[script] != SCRIPTS[script]}
    assert changed == set(SEAMS[name])
    for script, (taken_out, put_in) in SEAMS[name].items():
        assert changed_lines(SCRIPTS[script], scripts[script]) == (Counter(taken_out),
                                                                    Counter(put_in))


def test_a_patch_whose_text_is_not_in_the_script_is_refused():
    with pytest.raises(ValueError, match=r"cannot patch script 'refund'.* is not in it.*"
                                         r"DECRBY', KEYS\[1\], tonumber"):
        SCRIPTS.patching(refund=Patch("redis.call('DECRBY', KEYS[1], tonumber(ARGV[1]))", ""))


def test_a_patch_whose_text_occurs_twice_is_refused():
    # add.lua EXPIREs on its refusal path (indented) and after its INCRBY.
    with pytest.raises(ValueError, match=r"cannot patch script 'add'.* occurs 2 times"):
        SCRIPTS.patching(add=Patch("redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})", ""))


def test_each_patch_applies_to_the_text_the_one_before_it_left():
    # The second patch's text is gone once the first has run.
    gone = Patch("return -1", "return -2")
    with pytest.raises(ValueError, match="'refund'.* is not in it"):
        SCRIPTS.patching(refund=(gone, gone))
    assert SCRIPTS.patching(refund=(gone, Patch("return -2", "return -3")))["refund"] == \
        SCRIPTS["refund"].replace("return -1", "return -3")


def test_a_patch_to_no_script_or_that_changes_nothing_is_refused():
    with pytest.raises(ValueError, match="no script named 'refunds' to patch"):
        SCRIPTS.patching(refunds=Patch("return -1", ""))
    with pytest.raises(ValueError, match="changes nothing"):
        Patch("return -1", "return -1")
    with pytest.raises(ValueError, match="old is empty"):
        Patch("", "-- anything")


@pytest.fixture(scope="module")
def summaries():
    """The summaries of a variant's scenario on the variant and on the fixed
    store, with the scenario's seed (each pair run once per module)."""
    runs: dict[str, tuple[dict, dict]] = {}

    def of(name: str) -> tuple[dict, dict]:
        if name not in runs:
            path = SCENARIOS / f"av-state-variant-{name.replace('_', '-')}.toml"
            variant = load_scenario(path)
            assert variant.store == kind_name(name)
            fixed = load_scenario(path, {"store": FIXED})
            runs[name] = (run_scenario(variant, seed=variant.seed).summary,
                          run_scenario(fixed, seed=variant.seed).summary)
        return runs[name]

    return of


# -- whole simulations -------------------------------------------------------------


@pytest.mark.parametrize("name", DAMAGE)
def test_the_variant_breaks_its_metrics_and_the_fixed_store_does_not_under_one_seed(
        summaries, name):
    variant, fixed = summaries(name)
    assert variant["sessions_opened"] == fixed["sessions_opened"]  # the same traffic
    for metric in DAMAGE[name].metrics:
        assert variant[metric] > 0, f"{name}: {metric} = {variant[metric]}"
        assert fixed[metric] == 0, f"the fixed store: {metric} = {fixed[metric]}"


@pytest.mark.parametrize("name", DAMAGE)
def test_the_damage_is_filed_where_the_lab_says_it_came_from(summaries, name):
    variant, _ = summaries(name)
    for split in DAMAGE[name].filed_under:
        whole = split.split("_by_")[0]
        assert variant[split] == variant[whole] > 0, f"{name}: {split} = {variant[split]}"


@pytest.mark.parametrize("name", DAMAGE)
def test_the_fixed_store_is_never_blamed_in_a_variant_scenario(summaries, name):
    _, fixed = summaries(name)
    assert blamed_on_the_store(fixed) == {}


# -- the bug itself, a few calls in a row ------------------------------------------


async def counters(bench: Bench, *keys: str) -> list[int]:
    return [await bench.store.get(key) for key in keys]


@pytest.mark.parametrize(("kind", "after_two_sends"), [
    (FIXED, [70, 70, 60]),
    (kind_name("refund_without_marker"), [40, 40, 20]),
], ids=["fixed", "refund_without_marker"])
def test_a_re_sent_refund_credits_twice_only_without_its_marker(on_kind, kind,
                                                                 after_two_sends):
    """Each refund sent twice with the same marker, as a driver re-sends one
    whose reply it lost."""
    async def scenario(bench: Bench) -> None:
        one, first, second = bench.key("one"), bench.key("first"), bench.key("second")
        for key in (one, first, second):
            await bench.store.try_spend(Spend(key, 100, 1_000))
        for _ in range(2):
            await bench.store.refund(one, 30)
            await bench.store.refund_many([Refund(first, 30), Refund(second, 40)])
        # Debited 100 once each: the variant gave back 60 and 80.
        assert await counters(bench, one, first, second) == after_two_sends

    on_kind(kind)(scenario, FixedIdRuntime())


@pytest.mark.parametrize("kind", [FIXED, kind_name("refund_not_exists_gated")],
                         ids=["fixed", "refund_not_exists_gated"])
def test_a_refund_after_cleanup_resurrects_the_counter_without_a_ttl_only_ungated(
        on_kind, kind):
    async def scenario(bench: Bench) -> None:
        tokens, calls = bench.key("tokens"), bench.key("calls")
        await bench.store.try_spend_many([Spend(tokens, 500, 1_000), Spend(calls, 1, 10)])
        await bench.store.remove_prefix(f"{bench.prefix}:")
        await bench.store.refund(tokens, 200)
        await bench.store.refund_many([Refund(calls, 1)])
        for key in (tokens, calls):
            if kind == FIXED:
                assert not await bench.exists(key)
            else:
                assert await bench.store.get(key) == 0
                assert await bench.pttl(key) == -1, "resurrected with no TTL: never expires"

    on_kind(kind)(scenario)


@pytest.mark.parametrize(("kind", "after"), [
    (FIXED, [7, 0, 6]),
    (kind_name("refund_many_tonumber"), [7, 10, 10]),
], ids=["fixed", "refund_many_tonumber"])
def test_an_i64_max_refund_half_commits_a_batch_only_through_tonumber(on_kind, kind, after,
                                                                       caplog):
    async def scenario(bench: Bench) -> None:
        first, everything, last = bench.key("calls"), bench.key("tokens"), bench.key("tool")
        for key in (first, everything, last):
            await bench.store.add(key, 10)
        with caplog.at_level(logging.WARNING, logger="stores.av_state"):
            # Best effort either way: the variant's failure is logged, not raised.
            await bench.store.refund_many(
                [Refund(first, 3), Refund(everything, I64_MAX), Refund(last, 4)])
        # The variant refunded the key before the huge amount, and no other.
        assert await counters(bench, first, everything, last) == after
        assert bool(caplog.records) == (kind != FIXED)

    on_kind(kind)(scenario)


@pytest.mark.parametrize("kind", [FIXED, kind_name("add_without_ttl")],
                         ids=["fixed", "add_without_ttl"])
def test_a_counter_only_add_touches_expires_only_when_add_sets_its_ttl(on_kind, kind):
    async def scenario(bench: Bench) -> None:
        bookkeeping = bench.key("bookkeeping")
        await bench.store.add(bookkeeping, 1)
        await bench.store.add(bookkeeping, 1)
        assert await bench.store.get(bookkeeping) == 2
        ttl_ms = await bench.pttl(bookkeeping)
        if kind == FIXED:
            assert COUNTER_TTL_SECONDS * 1_000 - 10_000 < ttl_ms <= COUNTER_TTL_SECONDS * 1_000
        else:
            assert ttl_ms == -1

    on_kind(kind)(scenario)


@pytest.mark.parametrize(("kind", "after_the_day"), [
    (FIXED, Refused(1)),
    (kind_name("refusal_without_ttl_refresh"), Committed(1)),
], ids=["fixed", "refusal_without_ttl_refresh"])
def test_a_session_refused_at_its_cap_keeps_it_only_when_refusals_refresh_the_ttl(
        on_kind, kind, after_the_day):
    """A session spends its cap, then keeps calling and is refused; the day
    its counters were given at its last commit is played as 300 ms left."""
    async def scenario(bench: Bench) -> None:
        tokens, calls = bench.key("tokens"), bench.key("calls")
        call = [Spend(tokens, 100, 10_000), Spend(calls, 1, 2)]
        for remaining in (1, 0):
            assert await bench.store.try_spend_many(call) == Committed(remaining)
        for key in (tokens, calls):
            await bench.reader.pexpire(key, 300)  # the day since the last commit nearly over
        assert await bench.store.try_spend_many(call) == Refused(1)  # at its cap, still calling
        for key in (tokens, calls):
            ttl_ms = await bench.pttl(key)
            if kind == FIXED:
                assert COUNTER_TTL_SECONDS * 1_000 - 10_000 < ttl_ms <= COUNTER_TTL_SECONDS * 1_000
            else:
                assert 0 < ttl_ms <= 300, "a refusal left the old TTL running"
        await asyncio.sleep(0.5)
        # The variant's counters expired under the session: its cap reset, and
        # the call it was refused a moment ago commits against a fresh budget.
        assert await bench.store.try_spend_many(call) == after_the_day
        assert await counters(bench, tokens, calls) == ([200, 2] if kind == FIXED else [100, 1])

    on_kind(kind)(scenario)


@pytest.mark.parametrize("kind", [FIXED, kind_name("remove_prefix_noop")],
                         ids=["fixed", "remove_prefix_noop"])
def test_a_recycled_session_id_starts_from_zero_only_when_remove_prefix_deletes(on_kind, kind):
    """A session spends, is cleaned up, and its id opens again: the same keys."""
    async def scenario(bench: Bench) -> None:
        tokens, calls = bench.key("tokens"), bench.key("calls")
        call = [Spend(tokens, 100, 10_000), Spend(calls, 1, 2)]
        for remaining in (1, 0):
            assert await bench.store.try_spend_many(call) == Committed(remaining)
        await bench.store.remove_prefix(f"{bench.prefix}:")
        if kind == FIXED:
            assert [await bench.exists(key) for key in (tokens, calls)] == [False, False]
            # The new incarnation starts from zero: its first call commits.
            assert await bench.store.try_spend_many(call) == Committed(1)
        else:
            # Nothing was deleted: the counters wait, a day's TTL on them, for
            # the id to open again, and its first call meets the old cap.
            assert await counters(bench, tokens, calls) == [200, 2]
            for key in (tokens, calls):
                assert 0 < await bench.pttl(key) <= COUNTER_TTL_SECONDS * 1_000
            assert await bench.store.try_spend_many(call) == Refused(1)

    on_kind(kind)(scenario)


# -- an earlier version the lab cannot tell from the fixed one ------------------------

SUM_CHECK = SCRIPTS.patching(try_spend=Patch(
    "    if current > limit or amount > limit - current then\n",
    "    if current + amount > limit then\n"))
"""try_spend.lua before it checked by subtraction (seed 004:L31): the sum
``current + amount``, in a Lua double. Not a kind: within the store's bound
it decides every spend as the shipped script does (below), so no run could
show it."""

EDGES = (0, 1, 2, JCS_SAFE_MAX - 1, JCS_SAFE_MAX)


@pytest.mark.parametrize("backend", ["fakeredis", "redis", "valkey"])
def test_the_sum_check_rounds_yet_decides_as_the_subtraction_within_the_bound(
        backend, request, key_prefix):
    """Every stored count, amount and limit at the edges of ``0..JCS_SAFE_MAX``
    (the store refuses any other amount or limit before the script runs):
    the sum rounds past 2**53, but a rounded sum past 2**53 is still past any
    limit the store lets through, so both scripts refuse the same spends."""
    servers = {"redis": "redis_server", "valkey": "valkey_server"}
    url = request.getfixturevalue(servers[backend]).url if backend in servers else None
    cases = [(current, amount, limit) for current in EDGES for amount in EDGES
             for limit in EDGES]
    decided: dict[str, list] = {}
    for name, scripts in (("shipped", SCRIPTS), ("sum", SUM_CHECK)):
        async def scenario(bench: Bench, name=name) -> None:
            key = bench.key("tokens")
            # A double holds no odd number past 2**53: the old check's sum rounds.
            assert await bench.reader.eval(
                "return tostring(tonumber(ARGV[1]) + tonumber(ARGV[2]))", 0,
                JCS_SAFE_MAX, 2) in ("9.007199254741e+15", "9007199254740992")
            decided[name] = []
            for current, amount, limit in cases:
                await bench.reader.set(key, current)
                outcome = await bench.store.try_spend(Spend(key, amount, limit))
                decided[name].append((type(outcome).__name__, await bench.store.get(key)))

        runner(backend, url, key_prefix, scripts)(scenario)
    assert decided["sum"] == decided["shipped"]
    assert {decision for decision, _ in decided["shipped"]} == {"Committed", "Refused"}
