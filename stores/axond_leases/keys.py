"""Where a subject's leases live in Redis: one hash per (namespace, subject).

The key is ``{prefix}:{namespace|subject}:leases``: the whole identity is the
hash tag, so on a cluster every lease of one subject is in one slot. Both
parts are percent-escaped (``%``, ``|``, ``{``, ``}``) first: an unescaped
brace would move the tag, and an unescaped ``|`` would let ``("a|b", "c")``
and ``("a", "b|c")`` share a key, merging two subjects' limits.
"""

from __future__ import annotations

from stores.axond_leases.contract import LeaseKey

# ``%`` first in meaning: escaping it too keeps distinct identifiers distinct.
_ESCAPES = str.maketrans({"%": "%25", "|": "%7C", "{": "%7B", "}": "%7D"})


def encode_component(component: str) -> str:
    """``component`` with the characters that shape the key percent-escaped."""
    return component.translate(_ESCAPES)


def lease_key(key_prefix: str, key: LeaseKey) -> str:
    """The hash holding ``key``'s leases."""
    return (f"{key_prefix}:{{{encode_component(key.namespace)}|"
            f"{encode_component(key.subject)}}}:leases")
