"""Splitting an amount over causes, in whole micro-dollars.

The oracle attributes each wrongful admission's excess, and then each key's
cap overshoot, to causes in proportion to weights. Money stays integral: the
split uses the largest-remainder method, so the parts always add up to the
whole and a cause with all the weight gets all of it.

Every cause but one names something the lab itself did or decided: a fault
it injected, a message it lost, a restart under a persistence model, a TTL it
configured running out, the workload's estimates, fail-open admission,
per-replica ledgers. ``store_logic`` is the rest: damage nothing the lab did
explains is the store's own. Each family names its causes in its own
package; this module is the arithmetic they share.
"""

from __future__ import annotations

from collections.abc import Mapping

STORE_LOGIC = "store_logic"
"""The cause of damage that nothing the lab did explains: the store's own."""


def dominant(weights: Mapping[str, int | float], otherwise: str = STORE_LOGIC) -> str:
    """The cause with the most weight (ties by name), for a count that cannot
    be split; ``otherwise`` when no weight is positive."""
    positive = [cause for cause, weight in weights.items() if weight > 0]
    if not positive:
        return otherwise
    return min(positive, key=lambda cause: (-weights[cause], cause))


def apportion(amount: int, weights: Mapping[str, int | float],
              otherwise: str = STORE_LOGIC) -> dict[str, int]:
    """Split ``amount`` over the positive ``weights``; all of it to
    ``otherwise`` (the store's own logic) when there are none."""
    positive = {cause: weight for cause, weight in weights.items() if weight > 0}
    if amount <= 0:
        return {}
    if not positive:
        return {otherwise: amount}
    total = sum(positive.values())
    shares = {cause: amount * weight / total for cause, weight in positive.items()}
    parts = {cause: int(share) for cause, share in shares.items()}
    leftover = amount - sum(parts.values())
    # Largest remainders first; ties by cause name, so the split is deterministic.
    for cause in sorted(shares, key=lambda c: (parts[c] - shares[c], c))[:leftover]:
        parts[cause] += 1
    return {cause: part for cause, part in parts.items() if part}
