"""Historical variants of the lease limiter: the bugs the fixed one fixed.

Each variant is ``LeaseLimiter`` with one thing changed, stating only that
thing, and registers through ``KINDS`` here with ``kinds.redis_kind``
(``store_class=`` a subclass, or ``scripts=SCRIPTS.replacing(...)``); the
package's ``KINDS`` includes them. None is written yet.
"""

from __future__ import annotations

from stores.registry import StoreKind

KINDS: tuple[StoreKind, ...] = ()
