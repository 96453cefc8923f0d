"""How ``replay --plot`` draws a session-counter run: sessions from their
opening to their close, and the involved sessions' counters as the store
records them against what their callers were told, with the limit.

Only the drawing is here; ``simulator.timeline`` lays out the figure (and
chooses matplotlib's backend), so this module imports no plotting library.
"""

from __future__ import annotations

from typing import Any

from simulator.families import TimelineLanes
from simulator.families.record_series import involved_title, summed

Key = tuple[str, str]


def straying_keys(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The sessions' keys (namespace, subject) whose counters strayed furthest
    from the truth over the whole series: what to show when no fault names a replica."""
    worst: dict[Key, int] = {}
    for row in samples:
        if row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            gap = abs(row["counter_record_units"] - row["counter_truth_units"])
            worst[key] = max(worst.get(key, 0), gap + row["counter_overshoot_units"])
    return sorted(worst, key=lambda key: (-worst[key], key))[:limit]


def draw_counters(axes: Any, samples: list[dict[str, Any]], keys: set[Key],
                  cap: int | None) -> None:
    """The counters of the involved sessions: the store's record against the
    truth (committed minus refunded), summed per instant, and the highest limit."""
    times, sums = summed(samples, keys, {"record": lambda row: row["counter_record_units"],
                                         "truth": lambda row: row["counter_truth_units"]})
    limits = [row["limit"] for row in samples if (row["namespace"], row["subject"]) in keys]
    hours = [time / 3.6e9 for time in times]
    axes.step(hours, sums["truth"], where="post", color="tab:red",
              label="told committed, minus refunds (truth)")
    axes.step(hours, sums["record"], where="post", color="tab:blue", label="counters (store)")
    if len(keys) == 1 and max(limits, default=0):
        axes.axhline(max(limits), color="black", linewidth=1, label="limit")
    axes.set_ylabel("units (hours on x)")
    axes.set_title(involved_title(keys, "sessions"), loc="left", fontsize=9)
    axes.legend(loc="upper left", fontsize=7)


def no_cap(settings: Any) -> int | None:
    # Limits come with each call, not with the store's settings.
    return None


LANES = TimelineLanes(served="session_closed", refused="spend_refused",
                      served_label="session (opened to closed)",
                      strayed_keys=straying_keys, draw_record=draw_counters, cap=no_cap)
