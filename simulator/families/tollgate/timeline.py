"""How ``replay --plot`` draws a ledger run: each spend from its arrival to
its admission or refusal, and the involved accounts' usage as the ledger
billed it against what their holders consumed, with the residual of the
conservation equation beside them.

Only the drawing is here; ``simulator.timeline`` lays out the figure.
"""

from __future__ import annotations

from typing import Any

from simulator.families import TimelineLanes
from simulator.families.record_series import involved_title, summed

Key = tuple[str, str]


def straying_accounts(samples: list[dict[str, Any]], limit: int = 3) -> list[Key]:
    """The accounts whose record strayed furthest from the truth: billed
    against consumed, plus the equation's residual."""
    worst: dict[Key, int] = {}
    for row in samples:
        if row["subject"] != "*":
            key = (row["namespace"], row["subject"])
            gap = abs(row["units_billed"] - row["units_consumed"]) + abs(row["residual_units"])
            worst[key] = max(worst.get(key, 0), gap)
    return sorted(worst, key=lambda key: (-worst[key], key))[:limit]


def draw_billing(axes: Any, samples: list[dict[str, Any]], keys: set[Key],
                 cap: int | None) -> None:
    """Billed against consumed for ``keys``, summed per instant, and the residual."""
    times, sums = summed(samples, keys, {"billed": lambda row: row["units_billed"],
                                         "consumed": lambda row: row["units_consumed"],
                                         "residual": lambda row: row["residual_units"]})
    seconds = [time / 1e6 for time in times]
    axes.step(seconds, sums["consumed"], where="post", color="tab:red",
              label="consumed by holders (truth)")
    axes.step(seconds, sums["billed"], where="post", color="tab:blue", label="billed (ledger)")
    residual = axes.twinx()
    residual.step(seconds, sums["residual"], where="post", color="tab:purple", linestyle="--",
                  label="conservation residual")
    residual.set_ylabel("residual (units)", fontsize=8)
    axes.set_ylabel("units")
    axes.set_title(involved_title(keys, "accounts"), loc="left", fontsize=9)
    axes.legend(loc="upper left", fontsize=7)
    residual.legend(loc="lower right", fontsize=7)


def no_cap(settings: Any) -> int | None:
    # An account's funding moves with deposits and expiry: no one line to draw.
    return None


LANES = TimelineLanes(served="spend_admitted", refused="spend_refused",
                      served_label="spend (arrival to admission)",
                      strayed_keys=straying_accounts, draw_record=draw_billing, cap=no_cap)
