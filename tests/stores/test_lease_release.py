"""The lease limiter's background release under asyncio, on fakeredis and a
real server: axond's test cases of the release path, ported.

The first attempt on the shared connection (which generation, within which
budget), the fall-through to fresh connections, and a slow release that must
not cost a healthy connection. The seed's stubs delaying or swallowing
releases are the relay's ``delay_ms`` and ``blackholed`` here. Every bound
is the seed's, in the virtual time of a ``RelayClock``: what a real server
takes on a loaded machine never counts against a 25-50 ms timeout.
"""

from __future__ import annotations

import pytest
from relay_clock import RelayClock
from test_lease_relay import Relay, backend_connector, lease_settings, run

from stores.axond_leases import LeaseLimiter
from stores.axond_leases.contract import LeaseKey
from stores.axond_leases.timing import release_timeout_ms

KEY = LeaseKey("acme", "subject")


@pytest.fixture
def relay(backend_name, request):
    """A relay to the parametrised backend, its clock virtual (``relay.clock``)."""
    return Relay(backend_connector(backend_name, request), clock=RelayClock())


def test_release_uses_the_current_connection_after_replacement(relay, key_prefix):
    """The seed's live stub counting connections and releases."""
    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, relay.clock, lease_settings(key_prefix))
        try:
            admission = await limiter.acquire(KEY)
            assert admission.is_allowed
            old_generation = limiter.generation
            limiter.mark_connection_suspect(old_generation)
            await relay.clock.within(lambda: limiter.generation != old_generation, 1_000,
                                     "shared connection replacement did not complete")
            connections_after_swap = len(relay.connections)
            admission.permit.release()

            await relay.clock.within(lambda: relay.count("release") >= 1, 1_000,
                                     "release did not reach the relay")
            assert len(relay.connections) == connections_after_swap, \
                "a healthy current connection was passed over for a fresh one"
            assert relay.reached["release"] == [connections_after_swap], \
                "release did not go over the replacement connection"
        finally:
            await relay.aclose()

    run(scenario())


def test_stalled_shared_release_retires_after_release_budget(relay, key_prefix):
    """The seed's live stub holding releases for twice the release budget."""
    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, relay.clock, lease_settings(
            key_prefix, timeout="250ms", connect_timeout="25ms"))
        try:
            admission = await limiter.acquire(KEY)
            generation = limiter.generation
            budget_ms = release_timeout_ms(250)
            assert budget_ms > 250
            relay.delay_ms["release"] = budget_ms * 2
            admission.permit.release()

            released_at = relay.clock.now_ms()
            await relay.clock.within(lambda: relay.count("release") >= 1, 250,
                                     "shared release did not reach the relay")
            # Retired at its budget, not when the stalled reply would have come.
            await relay.clock.within(
                lambda: limiter.generation > generation
                or limiter.suspect_generation >= generation,
                budget_ms + 1, "stalled shared release was not bounded by its budget")
            assert relay.clock.now_ms() - released_at <= budget_ms + 1
        finally:
            await relay.aclose()

    run(scenario())


def test_stalled_shared_release_falls_through_to_fresh_retry(relay, key_prefix):
    """The seed's retry stub swallowing the release on the first connection;
    here connection 1 blackholes releases, and the lease is a real one, so
    the fresh retry must actually delete it: all within the seed's 1.5 s."""
    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, relay.clock, lease_settings(key_prefix))
        try:
            admission = await limiter.acquire(KEY)
            assert admission.is_allowed
            relay.connections[0].blackholed.add("release")
            admission.permit.release()
            deadline = relay.clock.now_ms() + 1_500  # the seed's, for both waits
            await relay.clock.within(lambda: len(relay.connections) >= 2,
                                     deadline - relay.clock.now_ms(),
                                     "bounded shared release did not reach a fresh retry "
                                     "connection")
            assert relay.sent_on("release", 1) == 1, \
                "the release should try the shared connection once, then go fresh"
            await relay.clock.within(lambda: relay.count("release") >= 1,
                                     deadline - relay.clock.now_ms(),
                                     "fresh retry did not release the lease")
            assert min(relay.reached["release"]) >= 2, \
                "lease was not released by a fresh connection"
            await relay.clock.sleep_ms(50)  # the release reached the server; let it run
            assert (await limiter.acquire(KEY)).is_allowed, "the lease was not released"
        finally:
            await relay.aclose()

    run(scenario())


def test_slow_shared_release_stays_within_release_budget(relay, key_prefix):
    """The seed's live stub answering releases 2 x the timeout late, inside
    the release budget (4 x the timeout, at least 1 s)."""
    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, relay.clock, lease_settings(
            key_prefix, timeout="250ms"))
        try:
            admission = await limiter.acquire(KEY)
            generation = limiter.generation
            assert release_timeout_ms(250) > 250
            relay.delay_ms["release"] = 500
            admission.permit.release()

            await relay.clock.within(lambda: relay.count("release") >= 1, 1_000,
                                     "slow release did not reach the relay")
            await relay.clock.sleep_ms(750)
            assert limiter.suspect_generation < generation, \
                "ordinary slow release retired a healthy generation"
            assert limiter.generation == generation, \
                "a release that was merely slow replaced a healthy connection"
            assert len(relay.connections) == 1
            assert (await limiter.acquire(KEY)).is_allowed
        finally:
            await relay.aclose()

    run(scenario())


def test_the_settings_say_the_release_budget_bounds_a_retry_s_connect():
    """A release retry's fresh connection is bounded by the release budget
    (``_on_fresh_connection``), not by ``connect_timeout``: the words say so."""
    from stores.axond_leases.settings import LeaseSettings
    bound, _, rest = LeaseSettings.model_fields["connect_timeout_ms"].description.partition(".")
    assert "release" not in bound and "release budget" in rest
