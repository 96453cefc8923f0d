"""How ``replay --plot`` draws a lease run: requests from arrival to the end
of their work, and the callers holding against the leases the store counts,
with ``max_in_flight`` as the cap line.

Only the drawing is here; ``simulator.timeline`` lays out the figure (and
chooses matplotlib's backend), so this module imports no plotting library.
"""

from __future__ import annotations

from typing import Any

from simulator.families import TimelineLanes
from simulator.families.record_series import involved_title, summed

Key = tuple[str, str]


def straying_keys(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The keys where the store's count strayed furthest from the callers
    holding, over the whole series: what to show when no fault names a replica."""
    worst: dict[Key, int] = {}
    for row in samples:
        if row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            gap = row["leases_leaked"] + row["callers_uncounted"] + row["concurrency_excess"]
            worst[key] = max(worst.get(key, 0), gap)
    return sorted(worst, key=lambda key: (-worst[key], key))[:limit]


def draw_leases(axes: Any, samples: list[dict[str, Any]], keys: set[Key],
                cap: int | None) -> None:
    """Callers holding (the truth) against the leases the store counts, and
    the leaked ones, summed over the involved keys, from the per-key samples."""
    times, sums = summed(samples, keys, {"holding": lambda row: row["callers_holding"],
                                         "counted": lambda row: row["leases_counted"],
                                         "leaked": lambda row: row["leases_leaked"]})
    seconds = [time / 1e6 for time in times]
    axes.step(seconds, sums["holding"], where="post", color="tab:red",
              label="callers holding (truth)")
    axes.step(seconds, sums["counted"], where="post", color="tab:blue",
              label="leases counted (store)")
    axes.step(seconds, sums["leaked"], where="post", color="tab:blue", linestyle=":",
              label="leases leaked")
    if cap is not None and len(keys) == 1:
        axes.axhline(cap, color="black", linewidth=1, label="max_in_flight")
    axes.set_ylabel("leases")
    axes.set_title(involved_title(keys), loc="left", fontsize=9)
    axes.legend(loc="upper left", fontsize=7)


def max_in_flight(settings: Any) -> int | None:
    return getattr(settings, "max_in_flight", None)


LANES = TimelineLanes(served="work_completed", refused="request_denied",
                      served_label="served (acquire to the end of its work)",
                      strayed_keys=straying_keys, draw_record=draw_leases, cap=max_in_flight)
