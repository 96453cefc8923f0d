"""A budget store's holds hash keeps its expiry: the seed's reserve gives it
twice the reservation TTL after every write, so an idle budget's holds
vanish with it (``hold_keys_without_ttl``, ``store_only``). Mutation found
the gap: a reserve without its ``PEXPIRE`` survived every invariant."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from stores import registry

PLAIN = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt" / "axond-budget.toml"
EXPIRE = "redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)\n"


@pytest.fixture(scope="module")
def without_expiry():
    base = registry.get("axond_budget.redis_v1")
    assert EXPIRE in base.scripts["reserve_v1"]
    kind = base.with_scripts("axond_budget.redis_v1.holds_without_expiry",
                             base.scripts.replacing(
                                 reserve_v1=base.scripts["reserve_v1"].replace(EXPIRE, "")))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
        registry.register(kind)
        yield kind.name


def test_a_holds_hash_left_without_expiry_is_the_store_s(without_expiry):
    fixed = run_scenario(load_scenario(PLAIN, {"duration": "1s"})).summary
    broken = run_scenario(load_scenario(PLAIN, {"duration": "1s",
                                                "store": without_expiry})).summary
    assert fixed["hold_keys_without_ttl"] == 0
    assert broken["hold_keys_without_ttl"] > 0
    assert broken["hold_keys_without_ttl_exposed_by"] == "no fault"
