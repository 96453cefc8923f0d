"""Splitting an amount over causes, in whole micro-dollars.

The oracle attributes each wrongful admission's excess, and then each key's
cap overshoot, to causes in proportion to weights. Money stays integral: the
split uses the largest-remainder method, so the parts always add up to the
whole and a cause with all the weight gets all of it.
"""

from __future__ import annotations

from collections.abc import Mapping

CAUSES = (
    "estimate_underrun",
    "hold_expired_while_running",
    "settlement_lost",
    "server_data_loss",
    "eviction",
    "fail_open_admission",
    "duplicate_execution",
    "per_replica_ledger",
    "unexplained",
)
"""Every cause an overshoot can be attributed to (see docs/metrics.md)."""


def apportion(amount: int, weights: Mapping[str, int | float]) -> dict[str, int]:
    """Split ``amount`` over the positive ``weights``; ``{"unexplained": amount}``
    when there are none."""
    positive = {cause: weight for cause, weight in weights.items() if weight > 0}
    if amount <= 0:
        return {}
    if not positive:
        return {"unexplained": amount}
    total = sum(positive.values())
    shares = {cause: amount * weight / total for cause, weight in positive.items()}
    parts = {cause: int(share) for cause, share in shares.items()}
    leftover = amount - sum(parts.values())
    # Largest remainders first; ties by cause name, so the split is deterministic.
    for cause in sorted(shares, key=lambda c: (parts[c] - shares[c], c))[:leftover]:
        parts[cause] += 1
    return {cause: part for cause, part in parts.items() if part}
