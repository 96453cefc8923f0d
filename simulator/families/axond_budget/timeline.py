"""How ``replay --plot`` draws a budget run: requests from reserve to settle,
and the keys' recorded spend against the true spend and the cap.

Only the drawing is here; ``simulator.timeline`` lays out the figure (and
chooses matplotlib's backend), so this module imports no plotting library.
"""

from __future__ import annotations

from typing import Any

from simulator.families import TimelineLanes
from simulator.families.record_series import involved_title, summed

Key = tuple[str, str]


def drifting_keys(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The keys whose record strays furthest from the truth at the last sample:
    what to show when no fault names a replica (a broken migration, say)."""
    last: dict[Key, int] = {}
    for row in samples:
        if row.get("scope", "subject") == "subject" and row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            last[key] = row["recorded_spend_microdollars"] - row["true_spend_microdollars"]
    return sorted(last, key=lambda key: (-abs(last[key]), key))[:limit]


def draw_spend(axes: Any, samples: list[dict[str, Any]], keys: set[Key],
               cap: int | None) -> None:
    """The store's record (settled spend, and that plus live holds) against the
    true spend, summed over the involved keys, from the per-key samples."""
    times, sums = summed(
        samples, keys,
        {"truth": lambda row: row["true_spend_microdollars"],
         "recorded": lambda row: row["recorded_spend_microdollars"],
         "counted": lambda row: (row["recorded_spend_microdollars"]
                                 + row["holds_live_microdollars"])},
        where=lambda row: row.get("scope", "subject") == "subject")
    seconds = [time / 1e6 for time in times]
    axes.plot(seconds, sums["truth"], color="tab:red", label="true spend")
    axes.plot(seconds, sums["recorded"], color="tab:blue", label="recorded spend (store)")
    axes.plot(seconds, sums["counted"], color="tab:blue", linestyle=":",
              label="recorded + live holds (what the store counts)")
    if cap is not None and len(keys) == 1:
        axes.axhline(cap, color="black", linewidth=1, label="cap")
    axes.set_ylabel("micro-dollars")
    axes.set_title(involved_title(keys), loc="left", fontsize=9)
    axes.legend(loc="upper left", fontsize=7)


def subject_cap(settings: Any) -> int | None:
    return getattr(settings, "subject_cap_microdollars", None)


LANES = TimelineLanes(served="request_settled", refused="request_denied",
                      served_label="served (reserve to settle)", strayed_keys=drifting_keys,
                      draw_record=draw_spend, cap=subject_cap)
