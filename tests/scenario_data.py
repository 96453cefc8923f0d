"""Scenarios as data, for tests that vary one small base scenario."""

from __future__ import annotations


def merge(base: dict, change: dict) -> dict:
    """``base`` with ``change`` laid over it, tables merged key by key."""
    merged = dict(base)
    for key, value in change.items():
        nested = isinstance(value, dict) and isinstance(base.get(key), dict)
        merged[key] = merge(base[key], value) if nested else value
    return merged


BUDGET_FLEET = {
    "name": "budget-fleet",
    "duration": "3s",
    "drain": "3s",
    "store": "axond_budget.redis_v1",
    "store_settings": {"subject_cap_microdollars": 40_000, "reservation_ttl": "1s"},
    "fleet": {"replicas": 20},
    "network": {"latency": "lognormal(1ms, 0.5)", "reply_loss": 0.02, "timeout": "50ms"},
    "workload": {"arrivals": "poisson(300/s)", "keys": {"subjects": 30},
                 "estimate_microdollars": 3000, "actual_microdollars": "uniform(0, 4000)",
                 "duration": "lognormal(200ms, 0.8)"},
}
"""A small budget fleet over thirty subjects (their tags spread over a
cluster's shards), busy enough for a restart to lose holds."""
