"""The counter contract every av_state ``StateStore`` keeps (seed 004).

Counters are non-negative integers under caller-chosen keys; a session's keys
share one prefix (``ActionBudget::session_prefix`` in av_state, outside the
seed's excerpt, wraps a digest in a ``{hash-tag}``), so one script can span all
of them on a cluster and ``remove_prefix`` clears the session whole.

Rules kept here:

* ``try_spend_many`` checks every spend, then charges every spend, in one
  atomic step: either all are charged or none. A refusal names the first
  spend (0-based) that would pass its limit; a commit reports the smallest
  headroom left across the batch, measured inside that same step.
* A spend's amount and limit, an ``add``'s delta and a ``fetch_max`` value stay
  within ``JCS_SAFE_MAX`` (av_core's JSON-safe integer bound, outside the
  seed's excerpt): past it the call fails with ``CounterOverflow`` naming the
  key, as does a counter read back past it.
* A batch naming one key twice is refused before anything runs
  (``DuplicateSpendKey``): the check phase reads each key once, so both spends
  would be judged against the pre-commit value. av_state's shared guard
  ``refuse_duplicate_spend_keys`` lies outside the excerpt; its rule, evident
  from the seed's comment, is ported here.
* Refunds are best effort: a failure is logged, never raised, so a backend
  blip on the compensation path cannot fail the caller. A refund clamps the
  counter at zero, never resurrects a counter that was removed, and takes
  amounts up to ``I64_MAX`` exactly (larger ones are clamped to it).
* The empty batch commits, with ``EMPTY_BATCH_REMAINING`` (u64::MAX) as its
  headroom: nothing was spent, so nothing bounds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

COUNTER_TTL_SECONDS = 86_400
"""Every counter a Redis store touches expires this long after it was last
touched: the backstop that reclaims abandoned sessions (24 h)."""

REFUND_MARKER_TTL_SECONDS = 300
"""A refund's one-shot replay marker need only outlive a driver's transparent
retry window (seconds); 5 minutes is generous without keeping a day of them."""

JCS_SAFE_MAX = 2**53 - 1
"""av_core's JSON-safe integer bound (``av_core::error::JCS_SAFE_MAX``, outside
the seed's excerpt): the largest integer a JSON double carries exactly."""

I64_MAX = 2**63 - 1
"""Redis integers are signed 64-bit: the largest amount ``DECRBY`` takes."""

EMPTY_BATCH_REMAINING = 2**64 - 1
"""The headroom the empty batch commits with: the seed's ``u64::MAX`` sentinel."""


@dataclass(frozen=True, slots=True)
class Spend:
    """Charge ``amount`` to ``key`` unless the counter would pass ``limit``."""

    key: str
    amount: int
    limit: int


@dataclass(frozen=True, slots=True)
class Refund:
    """Give back ``amount`` of what ``key`` was charged (clamped at zero)."""

    key: str
    amount: int


@dataclass(frozen=True, slots=True)
class Committed:
    """Every spend of the batch was charged."""

    post_commit_min_remaining: int
    """The smallest ``limit - counter`` across the batch right after the charge
    (``EMPTY_BATCH_REMAINING`` for the empty batch)."""


@dataclass(frozen=True, slots=True)
class Refused:
    """Nothing was charged: spend ``index`` (0-based) would pass its limit."""

    index: int


TrySpendOutcome = Committed | Refused


class StateError(Exception):
    """A counter operation failed; the message says why."""


class BackendError(StateError):
    """The backend failed or could not be reached. The caller cannot tell
    whether the script ran: a spend may have been charged."""


class CounterOverflow(StateError):
    """An amount, or a counter's value, lies outside what a counter holds."""

    def __init__(self, key: str) -> None:
        super().__init__(f"counter {key!r}: a value or amount outside 0..{JCS_SAFE_MAX}")
        self.key = key


class DuplicateSpendKey(StateError):
    """One batch names the same key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"a spend batch names key {key!r} more than once")
        self.key = key


class StateStore(Protocol):
    """What av_state calls on its counters (the seed's ``StateStore`` trait)."""

    @property
    def counter_ttl_seconds(self) -> int | None:
        """How long an untouched counter lives; ``None``: forever."""
        ...

    async def try_spend_many(self, spends: Sequence[Spend]) -> TrySpendOutcome: ...

    async def try_spend(self, spend: Spend) -> TrySpendOutcome: ...

    async def add(self, key: str, delta: int) -> int: ...

    async def get(self, key: str) -> int: ...

    async def fetch_max(self, key: str, value: int) -> int: ...

    async def refund(self, key: str, amount: int) -> None: ...

    async def refund_many(self, refunds: Sequence[Refund]) -> None: ...

    async def remove(self, key: str) -> None: ...

    async def remove_prefix(self, prefix: str) -> None: ...


def require_count(name: str, value: int) -> int:
    """Amounts are whole numbers >= 0 (the seed's ``u64``): a negative one
    would turn a spend into a credit or a refund into a charge."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    return value


def require_safe(key: str, value: int) -> int:
    """``value`` as a counter amount, or ``CounterOverflow`` past ``JCS_SAFE_MAX``."""
    if require_count(f"the amount for {key!r}", value) > JCS_SAFE_MAX:
        raise CounterOverflow(key)
    return value


def refuse_duplicate_spend_keys(spends: Sequence[Spend]) -> None:
    """``DuplicateSpendKey`` for the first key a batch names a second time."""
    seen: set[str] = set()
    for spend in spends:
        if spend.key in seen:
            raise DuplicateSpendKey(spend.key)
        seen.add(spend.key)


def check_spends(spends: Sequence[Spend]) -> None:
    """Refuse a batch before anything runs: duplicate keys, then any amount
    or limit outside a counter's range (the seed's order)."""
    refuse_duplicate_spend_keys(spends)
    for spend in spends:
        require_safe(spend.key, spend.amount)
        require_safe(spend.key, spend.limit)


def read_counter(key: str, value: int) -> int:
    """A counter's stored value as a count, or ``CounterOverflow`` when it lies
    outside ``0..JCS_SAFE_MAX`` (a counter something else wrote)."""
    if value < 0 or value > JCS_SAFE_MAX:
        raise CounterOverflow(key)
    return value


def refund_amount(amount: int) -> int:
    """A refund's amount as the backends take it: ``DECRBY`` is signed 64-bit,
    so a larger amount (``u64::MAX``, say) is clamped rather than wrapped."""
    return min(require_count("a refund amount", amount), I64_MAX)
