"""The scenarios the migration mutants share."""

from __future__ import annotations

from typing import Any


def killed_migration(crash_after_commands: int) -> dict[str, Any]:
    """A v1 fleet migrated to v2 at 1 s, the migration killed after
    ``crash_after_commands`` commands and re-run 200 ms later; the v2 fleet
    then spends until both caps bind (the shape of
    ``data/scenarios/variant-claim-without-slot.toml``)."""
    return {
        "name": "killed-migration", "duration": "3s", "drain": "1s",
        "store": "axond_budget.redis_v1",
        "store_settings": {"subject_cap_microdollars": 20_000},
        "fleet": {"replicas": 10},
        "network": {"latency": "lognormal(1ms, 0.3)"},
        "workload": {"arrivals": "poisson(300/s)", "keys": {"subjects": 6, "namespaces": 2},
                     "estimate_microdollars": 500, "actual_microdollars": "uniform(0, 500)",
                     "duration": "20ms"},
        "migrations": [{"at": "1s", "to": "axond_budget.redis_v2",
                        "settings": {"namespace_cap_microdollars": 60_000},
                        "crash_after_commands": crash_after_commands,
                        "rerun_after": "200ms", "restart_after": "200ms"}],
    }
