"""Hash slots as Redis Cluster computes them, and how a new cluster spreads
them over its primaries.

A key's slot is the CRC16 (XMODEM) of its hash tag, modulo 16,384. The tag
is what lies between the key's first ``{`` and the first ``}`` after it,
when that is not empty; otherwise the whole key. redis-py's ``key_slot`` is
the reference implementation, and the lab calls it (on the key's UTF-8
bytes, as a driver sends them).
"""

from __future__ import annotations

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

HASH_SLOTS = REDIS_CLUSTER_HASH_SLOTS
"""16,384: the slots every key of a cluster falls in."""

RUN_PREFIX = "lab:"
"""The prefix of a run's keys on the embedded backend and on a throwaway
cluster: an untagged key's slot is its name's under it."""

CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot"
"""What a cluster node answers a command (a function's FCALL, a script's
EVALSHA, a multi-key command) whose declared keys span slots."""


def hash_tag(key: str) -> str | None:
    """The part of ``key`` that decides its slot when it is not the whole key:
    between the first ``{`` and the first ``}`` after it, if not empty."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end < 0 or end == start + 1:
        return None
    return key[start + 1:end]


def slot_of(key: str) -> int:
    """The hash slot Redis Cluster puts ``key`` in."""
    return key_slot(key.encode())


def slots_of(keys: tuple[str, ...] | list[str]) -> set[int]:
    return {slot_of(key) for key in keys}


def slot_ranges(primaries: int) -> list[range]:
    """The slots of each primary of a new cluster, as ``redis-cli --cluster
    create`` assigns them: contiguous ranges of about 16,384 / N slots, the
    last one taking the rest (3 primaries: 0-5460, 5461-10922, 10923-16383)."""
    if not 1 <= primaries <= HASH_SLOTS:
        raise ValueError(f"a cluster has 1 to {HASH_SLOTS} primaries, not {primaries}")
    per_primary = HASH_SLOTS / primaries
    ranges, first, cursor = [], 0, 0.0
    for index in range(primaries):
        last = _round_half_away(cursor + per_primary - 1)
        if last > HASH_SLOTS or index == primaries - 1:
            last = HASH_SLOTS - 1
        last = max(last, first)
        ranges.append(range(first, last + 1))
        first = last + 1
        cursor += per_primary
    return ranges


def _round_half_away(value: float) -> int:
    """C's ``lround``: halves away from zero (Python's ``round`` goes to even)."""
    return int(value + 0.5)


def shard_of_slot(slot: int, ranges: list[range]) -> int:
    """Which primary (by index in ``ranges``) serves ``slot``."""
    for index, served in enumerate(ranges):
        if slot in served:
            return index
    raise ValueError(f"no primary serves slot {slot}")


TRYAGAIN = "TRYAGAIN Multiple keys request during rehashing of slot"
"""What a node answers a command of several keys, some of them not there,
while their slot moves (Redis 7.0: on the slot's old node, and on the new one
when asked with ``ASKING``)."""


def moved(slot: int, address: str) -> str:
    """A node's answer for a slot another node serves: go there from now on."""
    return f"MOVED {slot} {address}"


def ask(slot: int, address: str) -> str:
    """A migrating slot's old node's answer when a command's keys are not
    there (any more): ask the new node, this once, with ``ASKING`` first."""
    return f"ASK {slot} {address}"


REDIRECTS = ("MOVED ", "ASK ", "TRYAGAIN ")
"""How the replies begin that a cluster client may follow: a command sent
to the wrong node, or one to send again."""


def redirected_to(message: str) -> tuple[str, int, str] | None:
    """``(code, slot, address)`` of a ``MOVED`` or ``ASK`` reply; ``None``
    for anything else (``TRYAGAIN`` names no node)."""
    code, _, rest = message.partition(" ")
    if code not in ("MOVED", "ASK"):
        return None
    slot, _, address = rest.partition(" ")
    return code, int(slot), address
