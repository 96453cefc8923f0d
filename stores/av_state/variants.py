"""Historical variants of the Redis state store: the bugs the seed's comments
say the fixed one fixed.

Each variant will be ``RedisStateStore`` with one thing changed (a script
replaced through ``SCRIPTS.replacing``, or one seam of the class), registered
through ``KINDS`` here with ``kinds.redis_kind``; the package's ``KINDS``
includes them. None is written yet.
"""

from __future__ import annotations

from stores.registry import StoreKind

KINDS: tuple[StoreKind, ...] = ()
