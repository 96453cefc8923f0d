"""The tests' throwaway ``redis-server`` (the lab's own, ``simulator.backends.
local_server``), and the rule for tests that need one: they skip loudly when
it is absent, and fail instead when ``REQUIRE_REDIS=1`` (CI sets it)."""

from __future__ import annotations

import os

from simulator.backends.local_server import ThrowawayRedis, free_port, redis_binary

__all__ = ["ThrowawayRedis", "free_port", "redis_binary", "redis_required"]


def redis_required() -> bool:
    return os.environ.get("REQUIRE_REDIS") == "1"
