"""The keys a Redis state store writes beside the caller's counters.

A refund's replay marker is a suffix on the counter it refunds (a batch's, on
its first counter), so it shares the counter's ``{hash-tag}`` and the refund
script stays single-slot on a cluster. ``remove_prefix`` matches a session's
keys with a ``SCAN`` pattern that takes the prefix literally.
"""

from __future__ import annotations

from stores.axond_budget.redis_budget import glob_escape

MARKER_INFIX = ":r:"
"""What separates a counter key from a refund id in a replay marker's key."""


def refund_marker_key(counter_key: str, refund_id: str) -> str:
    """The one-shot marker of refund ``refund_id`` against ``counter_key``."""
    return f"{counter_key}{MARKER_INFIX}{refund_id}"


def prefix_pattern(prefix: str) -> str:
    """A ``SCAN MATCH`` pattern for every key starting with ``prefix``: its glob
    metacharacters escaped, so a prefix holding ``*`` or ``[`` cannot match
    other sessions' keys."""
    return f"{glob_escape(prefix)}*"
