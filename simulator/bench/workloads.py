"""What each family's bench line runs: a committed scenario, and the overrides
that shorten it for ``bench --quick`` (or for the full bench, when the
scenario as committed would take longer than the bench's budget: about five
minutes for every line together, one for ``--quick``).

A line's run is the family's own scenario, faults and all, so the lab's rate
is the one a user of that family gets; only its length changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from simulator import lab_path
from simulator.scenario.model import Scenario, load_scenario


@dataclass(frozen=True)
class BenchWorkload:
    """A scenario (a path inside the lab) a bench line runs, with the overrides
    (``--set`` style) of its full and ``--quick`` runs."""

    scenario: str
    quick: Mapping[str, Any]
    full: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only copies: a workload is a shared constant.
        object.__setattr__(self, "quick", MappingProxyType(dict(self.quick)))
        object.__setattr__(self, "full", MappingProxyType(dict(self.full)))

    def load(self, quick: bool) -> Scenario:
        return load_scenario(lab_path(self.scenario), dict(self.quick if quick else self.full))


BUDGET = BenchWorkload("data/scenarios/bench-2000.toml", {"duration": "1s"})
"""axond_budget: 2,000 replicas at 10,000 requests/s, no faults (3 s; 1 s quick)."""

LEASES = BenchWorkload("data/scenarios/leases.toml", {"duration": "10s", "drain": "10s"})
"""axond_leases: 300 replicas, one limiter, crashes, stalls and lost replies
(60 s and a 20 s drain; 10 s and 10 s quick, one lease TTL to drain)."""

AV_STATE = BenchWorkload("data/scenarios/av-state.toml", {"duration": "2h", "drain": "48h"})
"""av_state: 20 replicas, sessions of up to 48 h, lost replies and re-sends
(12 h of arrivals; 2 h quick, drained the same 48 h so that every session ends)."""

LEASES_BUSY = BenchWorkload("data/scenarios/bench-leases-busy.toml", {"duration": "1s"})
"""axond_leases, busy as ``bench-2000``: 2,000 replicas at 5,000 requests/s on
2,000 keys, no faults (3 s; 1 s quick)."""
AV_STATE_BUSY = BenchWorkload("data/scenarios/bench-av-state-busy.toml",
                              {"duration": "300ms"}, {"duration": "1s"})
"""av_state, busy as ``bench-2000``: 2,000 replicas, 5,000 new sessions/s each
spending four times a second, no faults (1 s, 300 ms quick; a 2 s drain)."""
TOLLGATE = BenchWorkload("data/scenarios/tollgate.toml", {"duration": "15s", "drain": "30s"})
"""tollgate: 20 replicas funding spends from leases, crashes, lost replies
(60 s and a 90 s drain; 15 s and 30 s quick, past one lease TTL and its grace)."""

TOLLGATE_POSTGRES = BenchWorkload("data/scenarios/tollgate.toml",
                                  {"duration": "3s", "drain": "3s"},
                                  {"duration": "20s", "drain": "30s"})
"""tollgate on a throwaway PostgreSQL: the same scenario, shorter, since each of
its transactions and the oracle's reads after it are database round trips
(20 s and a 30 s drain, about 1,300 transactions; 3 s and 3 s quick)."""
