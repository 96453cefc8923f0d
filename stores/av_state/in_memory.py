"""av_state's in-memory ``StateStore``: the Redis store's twin in one process's
dict (seed 004's ``InMemoryStore``, which lies outside the excerpt; what it
does is read off the Redis store's comments, which hold the two to one
contract).

The same methods give the same results as ``RedisStateStore``, with one
stated divergence: counters never expire (``counter_ttl_seconds`` is
``None``). Against Redis a session idle longer than a day has its counters
reset; here it keeps them forever. The lab reports what that does to long
sessions rather than hiding it.

Rules kept here:

* No call awaits anything, so on one event loop each call is atomic with
  respect to the others: a batch is checked whole, then charged whole, and a
  refund batch is clamped and applied whole; no call ever leaves a partial
  batch.
* No refund replay markers: a marker guards against a driver re-sending a
  script whose reply was lost, and no driver stands between a caller and a
  dict, so no call here is ever delivered twice.
* A refund never re-creates a counter that was removed, as the Redis
  store's ``EXISTS`` gate ensures there.
"""

from __future__ import annotations

from collections.abc import Sequence

from stores.av_state.contract import (
    EMPTY_BATCH_REMAINING,
    JCS_SAFE_MAX,
    Committed,
    CounterOverflow,
    Refund,
    Refused,
    Spend,
    TrySpendOutcome,
    check_spends,
    read_counter,
    refund_amount,
    require_safe,
)


class InMemoryStateStore:
    """Session counters in this process's memory; they never expire."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    @property
    def counter_ttl_seconds(self) -> int | None:
        return None

    def counters(self) -> dict[str, int]:
        """Every counter held, by key (a copy; reading changes nothing)."""
        return dict(self._counters)

    async def try_spend_many(self, spends: Sequence[Spend]) -> TrySpendOutcome:
        spends = tuple(spends)
        check_spends(spends)
        if not spends:
            return Committed(EMPTY_BATCH_REMAINING)
        for index, spend in enumerate(spends):
            current = self._counters.get(spend.key, 0)
            if current > spend.limit or spend.amount > spend.limit - current:
                return Refused(index)
        remaining = []
        for spend in spends:
            new = self._counters.get(spend.key, 0) + spend.amount
            self._counters[spend.key] = new
            remaining.append(max(0, spend.limit - new))
        return Committed(min(remaining))

    async def try_spend(self, spend: Spend) -> TrySpendOutcome:
        return await self.try_spend_many((spend,))

    async def add(self, key: str, delta: int) -> int:
        require_safe(key, delta)
        current = self._counters.get(key, 0)
        if current > JCS_SAFE_MAX or delta > JCS_SAFE_MAX - current:
            raise CounterOverflow(key)
        self._counters[key] = current + delta
        return current + delta

    async def get(self, key: str) -> int:
        return read_counter(key, self._counters.get(key, 0))

    async def fetch_max(self, key: str, value: int) -> int:
        require_safe(key, value)
        current = read_counter(key, self._counters.get(key, 0))
        if value > current or key not in self._counters:
            self._counters[key] = current = value
        return current

    async def refund(self, key: str, amount: int) -> None:
        await self.refund_many((Refund(key, amount),))

    async def refund_many(self, refunds: Sequence[Refund]) -> None:
        # Every amount is clamped before the first counter changes, so a bad
        # amount refuses the batch whole instead of halfway.
        amounts = [(refund.key, refund_amount(refund.amount)) for refund in refunds]
        for key, amount in amounts:
            if key in self._counters:
                self._counters[key] = max(0, self._counters[key] - amount)

    async def remove(self, key: str) -> None:
        self._counters.pop(key, None)

    async def remove_prefix(self, prefix: str) -> None:
        for key in [key for key in self._counters if key.startswith(prefix)]:
            del self._counters[key]


def read_ledgers(store: InMemoryStateStore) -> dict[str, int]:
    """Every counter ``store`` holds, ``{key: value}``: what the lab's oracle
    reads of an in-process kind."""
    return store.counters()
