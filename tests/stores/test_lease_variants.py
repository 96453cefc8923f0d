"""The historical variants of the lease limiter, and what their bugs cost.

Each variant is tried twice: under plain asyncio against fakeredis and a real
server, through the lease tests' relay (the bug itself, one call at a time,
beside the fixed store), and as a whole simulation (its scenario,
``data/scenarios/leases-variant-*.toml``, on the variant and on the fixed
store with the same seed: the damage on one, none on the other, filed under
the lab's fault that triggered it and never under ``store_logic`` where the
lab injected one). Their race reports are replayed by
``tests/simulator/test_races.py``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest
from blame import blamed_on_the_store
from relay_clock import RelayClock
from test_lease_acquire import abort, held_leases
from test_lease_relay import Mode, Relay, backend_connector, eventually, lease_settings, run

from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from stores import registry
from stores.asyncio_runtime import AsyncioRuntime
from stores.axond_leases import LeaseLimiter, variants
from stores.axond_leases.contract import Denial, LeaseKey
from stores.axond_leases.timing import release_timeout_ms
from stores.axond_leases.variants import (
    CancellationDropsInvoke,
    InvokeSharesCallerTimeout,
    ProcessLocalLeaseIds,
    ReleaseNeverRetried,
    TrustsMisalignedReply,
    UncompensatedAbandon,
    UntrustedDenialRefuses,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"
FIXED = "axond_leases.redis"
KEY = LeaseKey("acme", "subject")


@dataclass(frozen=True)
class Damage:
    """What a variant's scenario breaks, and where the lab files it."""

    metric: str
    """Above zero on the variant, zero on the fixed store under the same seed."""
    filed_under: tuple[str, ...]
    """The metrics split by cause that carry it on the variant (each above zero)."""
    exposed_by: str | None
    """What exposed it (``<metric>_exposed_by``): each bug needs a fault to
    show, and the fault contract excuses none of what it adds. ``None``: the
    lab files the damage under its own fault (what the store does wrong is
    out of the oracle's sight)."""
    fixed_share: float = 0.0
    """How much of the variant's damage the fixed store may show under the
    same seed, as a share of the variant's (0: none at all)."""


DAMAGE = {
    "uncompensated_abandon": Damage(
        "false_denials",
        ("false_denials_by_store_logic", "leaked_lease_seconds_by_store_logic"),
        "slow_reply on acquire"),
    "trusts_misaligned_reply": Damage(
        "misaligned_results_accepted",
        ("false_denials_by_store_logic", "leaked_lease_seconds_by_store_logic"),
        "misaligned_reply on acquire"),
    "release_never_retried": Damage(
        "false_denials",
        ("false_denials_by_store_logic", "leaked_lease_seconds_by_store_logic"),
        "request_lost on release"),
    "process_local_lease_ids": Damage(
        "concurrency_excess_lease_seconds", ("concurrency_excess_lease_seconds_by_store_logic",),
        "replicas_sharing_key on acquire"),
    "cancellation_drops_invoke": Damage(
        "false_denials",
        ("false_denials_by_store_logic", "leaked_lease_seconds_by_store_logic"),
        "slow_reply on acquire"),
    # A refusal read off a retired generation: the store records the
    # generation a reply came on, and a sound store answers it unavailable.
    "untrusted_denial_refuses": Damage(
        "false_denials", ("false_denials_by_store_logic",), "slow_reply on acquire"),
    # A needless "unavailable", which fail-open admits: the connection was
    # retired before the seed's liveness budget with nothing failed, so the
    # excess is the store's. The fixed store's slowed callers themselves are
    # admitted unenforced too (the policy), so it shows a little.
    "invoke_shares_caller_timeout": Damage(
        "concurrency_excess_lease_seconds", ("concurrency_excess_lease_seconds_by_store_logic",),
        "slow_reply on acquire", fixed_share=0.1),
}
"""Each variant's damage in its scenario, all of it the store's (colliding
ids need no fault at all: a fleet of replicas on one key exposes them),
except where ``exposed_by`` is ``None``."""
EXPOSED = [name for name, damage in DAMAGE.items() if damage.exposed_by is not None]


@pytest.fixture(scope="module")
def summaries():
    """The summaries of a variant's scenario on the variant and on the fixed
    store, with the scenario's seed (each pair run once per module)."""
    runs: dict[str, tuple[dict, dict]] = {}

    def of(name: str) -> tuple[dict, dict]:
        if name not in runs:
            path = SCENARIOS / f"leases-variant-{name.replace('_', '-')}.toml"
            variant = load_scenario(path)
            assert variant.store == f"axond_leases.variants.{name}"
            fixed = load_scenario(path, {"store": FIXED})
            runs[name] = (run_scenario(variant, seed=variant.seed).summary,
                          run_scenario(fixed, seed=variant.seed).summary)
        return runs[name]

    return of


# -- whole simulations ---------------------------------------------------------


def test_every_variant_is_a_lease_kind_with_a_scenario_showing_its_damage():
    names = {kind.name for kind in variants.KINDS}
    assert names == {f"axond_leases.variants.{name}" for name in DAMAGE}
    fixed = registry.get(FIXED)
    for name in names:
        kind = registry.get(name)
        assert kind.protocol == fixed.protocol  # run and judged as the lease family
        assert kind.scripts == fixed.scripts  # each changes Python, never a script


@pytest.mark.parametrize("name", DAMAGE)
def test_the_variant_breaks_its_metric_and_the_fixed_store_does_not_under_one_seed(
        summaries, name):
    variant, fixed = summaries(name)
    damage = DAMAGE[name]
    metric = damage.metric
    assert variant["requests_arrived"] == fixed["requests_arrived"]  # the same traffic
    assert variant[metric] > 0, f"{name}: {metric} = {variant[metric]}"
    assert fixed[metric] <= damage.fixed_share * variant[metric], \
        f"the fixed store: {metric} = {fixed[metric]}"


@pytest.mark.parametrize("name", DAMAGE)
def test_the_damage_is_filed_where_the_variant_says(summaries, name):
    variant, _ = summaries(name)
    for split in DAMAGE[name].filed_under:
        assert variant[split] > 0, f"{name}: {split} = {variant[split]}"


@pytest.mark.parametrize("name", EXPOSED)
def test_the_damage_is_the_stores_exposed_by_the_fault_that_triggered_it(summaries, name):
    variant, _ = summaries(name)
    damage = DAMAGE[name]
    assert variant[f"{damage.metric}_exposed_by"] == damage.exposed_by


def test_only_the_variant_replaces_its_connection_after_a_merely_slow_reply(summaries):
    """The seed's own assertion, in a whole run: a reply slower than the
    caller's wait but inside the invoke's liveness costs the fixed store no
    connection; the variant retires and replaces its one."""
    variant, fixed = summaries("invoke_shares_caller_timeout")
    assert fixed["connection_opened_count"] == fixed["replicas"]  # its boot connection only
    assert variant["connection_opened_count"] > variant["replicas"]
    assert variant["requests_admitted_unenforced"] > fixed["requests_admitted_unenforced"]


def test_the_fixed_store_answers_unavailable_where_the_variant_answers_exceeded(summaries):
    """The same callers, refused either way: the variant's false denials are
    the fixed store's fail-closed denials."""
    variant, fixed = summaries("untrusted_denial_refuses")
    extra_refusals = variant["requests_denied_exceeded"] - fixed["requests_denied_exceeded"]
    assert extra_refusals >= variant["false_denials"] > 0
    assert fixed["fail_closed_denials"] - variant["fail_closed_denials"] == extra_refusals
    assert variant["requests_denied"] == fixed["requests_denied"]


@pytest.mark.parametrize("name", DAMAGE)
def test_the_fixed_store_is_never_blamed_in_a_variant_scenario(summaries, name):
    _, fixed = summaries(name)
    assert blamed_on_the_store(fixed) == {}


# -- the bug itself, one call at a time ------------------------------------------


@pytest.fixture
def relay(backend_name, request):
    """A relay to the parametrised backend."""
    return Relay(backend_connector(backend_name, request))


@pytest.mark.parametrize("cls", [LeaseLimiter, UncompensatedAbandon],
                         ids=["fixed", "uncompensated_abandon"])
def test_a_lease_written_after_its_caller_left_is_given_back_only_by_the_fixed_store(
        relay, key_prefix, cls):
    """The relay holds the acquire 100 ms before the server runs it; its
    caller is aborted first (as the fixed store's own test does)."""
    async def scenario() -> None:
        limiter = await cls.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        try:
            relay.delay_ms["acquire"] = 100
            acquire = asyncio.create_task(limiter.acquire(KEY))
            await eventually(lambda: relay.count("acquire") >= 1, 1,
                             "acquire did not reach the relay")
            await abort(acquire)
            # The owned invoke ends (its slot returned) once the late grant is in.
            await eventually(lambda: limiter.recovery.invoke_slots.taken == 0, 1,
                             "the owned invoke did not end")
            if cls is LeaseLimiter:
                await eventually(lambda: relay.count("release") >= 1, 1,
                                 "the lease created after its caller left was not released")
            await asyncio.sleep(0.05)  # a release on its way reaches the server
            leases = await held_leases(relay.target, limiter)
            if cls is LeaseLimiter:
                assert leases == {}
            else:
                assert relay.count("release") == 0
                assert len(leases) == 1, "the abandoned lease should wait for its TTL"
        finally:
            await relay.aclose()

    run(scenario())


@pytest.mark.parametrize("cls", [LeaseLimiter, TrustsMisalignedReply],
                         ids=["fixed", "trusts_misaligned_reply"])
def test_a_grant_meant_for_another_acquire_is_a_permit_only_without_the_echo_check(
        relay, key_prefix, cls):
    """One reply lost on the shared connection: the second acquire's grant
    lands on the first caller."""
    async def scenario() -> None:
        limiter = await cls.connect(relay, AsyncioRuntime(), lease_settings(
            key_prefix, max_in_flight=2, timeout="1s"))
        try:
            relay.connections[0].drop_next_reply()
            first = asyncio.create_task(limiter.acquire(KEY))
            await eventually(lambda: relay.count("acquire") >= 1, 1, "first acquire not sent")
            second = asyncio.create_task(limiter.acquire(KEY))

            admission = await first
            if cls is LeaseLimiter:
                # The echo differs: unavailable, and the generation retired.
                assert admission.denial is Denial.STORE_UNAVAILABLE
                assert "different lease id" in admission.reason
                assert limiter.suspect_generation >= 1
            else:
                assert admission.is_allowed, "the variant should take the second's grant"
                assert limiter.suspect_generation == 0, "nothing retires the shifted connection"
            await abort(second)
        finally:
            await relay.aclose()

    run(scenario())


def test_a_release_whose_one_attempt_is_lost_leaves_the_lease_to_its_ttl(relay, key_prefix):
    """Connection 1 swallows releases (the fixed store's retry on a fresh
    connection is ``test_stalled_shared_release_falls_through_to_fresh_retry``).
    About a second: the attempt's budget has a one-second floor."""
    async def scenario() -> None:
        limiter = await ReleaseNeverRetried.connect(relay, AsyncioRuntime(),
                                                    lease_settings(key_prefix))
        try:
            admission = await limiter.acquire(KEY)
            assert admission.is_allowed
            relay.connections[0].blackholed.add("release")
            admission.permit.release()

            await eventually(lambda: relay.sent_on("release", 1) >= 1, 1,
                             "the shared release was not attempted")
            await asyncio.sleep(release_timeout_ms(50) / 1000 + 0.2)
            assert relay.count("release") == 0, "the variant retried its release"
            assert len(await held_leases(relay.target, limiter)) == 1
            assert (await limiter.acquire(KEY)).denial is not None
        finally:
            await relay.aclose()

    run(scenario())


@pytest.mark.parametrize("cls", [LeaseLimiter, ProcessLocalLeaseIds],
                         ids=["fixed", "process_local_lease_ids"])
def test_lease_ids_from_a_per_process_counter_let_three_callers_hold_two_slots(
        backend_name, request, key_prefix, cls):
    """Three gateway processes (a runtime each) acquire on one key limited to two."""
    target = backend_connector(backend_name, request)
    settings = lease_settings(key_prefix, max_in_flight=2, timeout="250ms",
                              connect_timeout="250ms")

    async def scenario() -> None:
        limiters = [await cls.connect(target, AsyncioRuntime(), settings) for _ in range(3)]
        try:
            admissions = [await limiter.acquire(KEY) for limiter in limiters]
            leases = await held_leases(target, limiters[0])
            if cls is LeaseLimiter:
                assert [admission.is_allowed for admission in admissions] == [True, True, False]
                assert len(leases) == 2
            else:
                assert all(admission.is_allowed for admission in admissions)
                assert list(leases) == ["1"], "every process's first lease is field 1"
        finally:
            for limiter in limiters:
                await limiter.aclose()

    run(scenario())


@pytest.mark.parametrize("cls", [LeaseLimiter, UntrustedDenialRefuses],
                         ids=["fixed", "untrusted_denial_refuses"])
def test_a_refusal_from_a_suspect_generation_is_unavailable_only_in_the_fixed_store(
        relay, key_prefix, cls):
    """The seed's own case: a first lease fills the limit, the second acquire
    is held 50 ms at the relay, and its generation is marked suspect before
    the refusal comes back. Under ``on_unavailable = allow`` the fixed store
    admits the caller unenforced (an outcome nobody can attribute follows
    the policy: the seed's test of the fixed store, its "fixed" case here);
    the variant answers a hard "exceeded"."""
    # The seed's 50 ms hold and 100 ms timeout, in virtual time: on a loaded
    # machine the real server's work no longer eats into them.
    clock = relay.clock = RelayClock()

    async def scenario() -> None:
        limiter = await cls.connect(relay, clock, lease_settings(
            key_prefix, timeout="100ms", on_unavailable="allow"))
        try:
            holder = await limiter.acquire(KEY)
            assert holder.is_allowed and holder.permit.enforced
            relay.delay_ms["acquire"] = 50
            with clock.held():  # marked suspect before the held reply can come back
                acquire = asyncio.create_task(limiter.acquire(KEY))
                await eventually(lambda: relay.count("acquire") >= 2, 5,
                                 "the delayed acquire did not reach the relay")
                generation = limiter.generation
                limiter.mark_connection_suspect(generation)

            admission = await acquire
            # Either way the store records what the lab judges it by: the
            # answer came off a generation it no longer trusted.
            assert (admission.generation, admission.untrusted) == (generation, True)
            if cls is LeaseLimiter:
                assert admission.is_allowed and not admission.permit.enforced
            else:
                assert admission.denial is Denial.EXCEEDED, \
                    "the variant should take the untrusted refusal at its word"
        finally:
            await relay.aclose()

    run(scenario())


@pytest.mark.parametrize("cls", [LeaseLimiter, InvokeSharesCallerTimeout],
                         ids=["fixed", "invoke_shares_caller_timeout"])
def test_a_reply_slower_than_the_wait_retires_the_connection_only_in_the_variant(
        relay, key_prefix, cls):
    """The seed's case (its live stub delaying acquires; its 50 ms timeout and
    100 ms delay, doubled): the relay holds the acquire 200 ms; the caller's
    wait is 100 ms. The fixed store keeps its slow but usable invoke's
    generation (the seed's caller-timeout test); the variant retires it."""
    async def scenario() -> None:
        limiter = await cls.connect(relay, AsyncioRuntime(),
                                    lease_settings(key_prefix, timeout="100ms"))
        try:
            generation, connections = limiter.generation, len(relay.connections)
            relay.delay_ms["acquire"] = 200
            assert (await limiter.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            await asyncio.sleep(0.3)
            if cls is LeaseLimiter:
                assert limiter.generation == generation, \
                    "caller timeout retired a generation whose invoke was still within its liveness"
                assert len(relay.connections) == connections, \
                    "caller timeout triggered an unnecessary replacement"
                assert limiter.retirement(generation) is None
            else:
                assert limiter.suspect_generation >= generation, \
                    "the variant's invoke shares the caller's 100 ms and retires its generation"
                assert limiter.generation > generation
                assert len(relay.connections) > connections
                retirement = limiter.retirement(generation)
                assert retirement is not None and retirement.invoke == "acquire"
                assert 100 <= retirement.ran_ms < 200, "retired at the caller's timeout"
            relay.delay_ms["acquire"] = 0
            assert (await limiter.acquire(KEY)).is_allowed, \
                "after a slow reply timed its caller out, the store should serve again"
        finally:
            await relay.aclose()

    run(scenario())


@pytest.mark.parametrize("cls", [LeaseLimiter, CancellationDropsInvoke],
                         ids=["fixed", "cancellation_drops_invoke"])
def test_a_cancelled_caller_leaves_its_invoke_running_only_in_the_fixed_store(
        relay, key_prefix, cls):
    """The seed's two cases of an aborted caller (its live stub delaying
    acquires by 100 ms; the caller's wait is 1 s): the fixed store keeps its
    generation usable and gives back the lease written after the caller left
    (the seed's dropped-shared-acquire-future test); the variant
    retires the generation and leaves the lease to its TTL."""
    async def scenario() -> None:
        limiter = await cls.connect(relay, AsyncioRuntime(),
                                    lease_settings(key_prefix, timeout="1s"))
        try:
            generation = limiter.generation
            relay.delay_ms["acquire"] = 100
            acquire = asyncio.create_task(limiter.acquire(KEY))
            await eventually(lambda: relay.count("acquire") >= 1, 1,
                             "the acquire did not reach the relay")
            await abort(acquire)
            await asyncio.sleep(0.25)  # past the relay's delay: the fixed store's script ran
            if cls is LeaseLimiter:
                assert limiter.suspect_generation < generation, \
                    "abandoning the wait retired a still-running generation"
                await eventually(lambda: relay.count("release") >= 1, 1,
                                 "the lease created after its caller left was not released")
                assert await held_leases(relay.target, limiter) == {}
                # The abandoned invoke's lease was compensated: the one slot is free.
                assert (await limiter.acquire(KEY)).is_allowed
            else:
                assert limiter.suspect_generation >= generation, \
                    "the variant drops the invoke unfinished, which retires its generation"
                # The relay closes the retired connection's queue with it, so
                # here the script may never run; nothing is sent to give back
                # a lease it might have written (the next test: one it did).
                assert relay.count("release") == 0
        finally:
            await relay.aclose()

    run(scenario())


@pytest.mark.parametrize("cls", [LeaseLimiter, CancellationDropsInvoke],
                         ids=["fixed", "cancellation_drops_invoke"])
def test_the_lease_of_a_cancelled_caller_s_invoke_is_given_back_only_by_the_fixed_store(
        relay, key_prefix, cls):
    """The relay runs the acquire but loses every reply (``STALL``); the
    caller is aborted at once. The fixed store's invoke runs on to its
    liveness deadline (4 x 100 ms) and compensates the ambiguous outcome;
    the variant's was cancelled with the caller, and its lease stays."""
    async def scenario() -> None:
        limiter = await cls.connect(relay, AsyncioRuntime(),
                                    lease_settings(key_prefix, timeout="100ms"))
        try:
            relay.set_mode(Mode.STALL)
            acquire = asyncio.create_task(limiter.acquire(KEY))
            await eventually(lambda: relay.count("acquire") >= 1, 1,
                             "the acquire did not reach the relay")
            await abort(acquire)
            await asyncio.sleep(0.6)  # past the fixed store's invoke deadline and release
            relay.set_mode(Mode.FORWARD)
            leases = await held_leases(relay.target, limiter)
            if cls is LeaseLimiter:
                await eventually(lambda: relay.count("release") >= 1, 1,
                                 "the ambiguous acquire was not compensated")
                assert await held_leases(relay.target, limiter) == {}
            else:
                assert relay.count("release") == 0
                assert len(leases) == 1, "the dropped invoke's lease should wait for its TTL"
        finally:
            await relay.aclose()

    run(scenario())
