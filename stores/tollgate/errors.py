"""tollgate's refusal vocabulary (seed 003): domain refusals apart from storage failures.

Rules kept here:

* A ``StoreError`` is a backend failure (connection lost, transaction aborted):
  retry with backoff, outcome possibly ambiguous. It is never a subclass of a
  domain refusal, and a refusal is never a ``StoreError``; where an operation's
  error type must carry both (the seed's ``AllocateError::Storage``), the
  storage failure is *wrapped* (``AllocateStorage``), so ``except Fenced`` can
  never catch a dropped connection.
* ``AllocateError``'s refusals each own one dense slot, in the seed's
  ``NAMES`` order, so a per-reason tally indexes by ``index`` and labels by
  ``name``: the variant's name, never its message (a storage message varies
  per failure and would mint a label per connection error).
* Status refusals (``SetStatusError``), creation, budget and ingest refusals
  are separate families, as the seed keeps them: a status refusal can never
  come out of ``acquire``, so it must not widen the allocator's tally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class BalanceExhaustion:
    """Evidence that no funding remains, outstanding leases included."""

    period_end: int | None
    """When a scheduled allowance next refills the account (ms); ``None``
    when it has no schedule and only a deposit can."""


@dataclass(frozen=True, slots=True)
class BalanceShortfall:
    """The ledger's remaining funding: unleased balance plus what active leases
    have not yet billed. An upper bound on what the account can still spend."""

    remaining: int
    period_end: int | None


class StoreError(Exception):
    """The backend failed, unrelated to any domain rule; retryable with backoff.
    It reads "store error: ..." (seed 003), and so does every refusal that
    wraps it (``AllocateStorage``, ``IngestUnavailable`` from a store)."""

    def __str__(self) -> str:
        return f"store error: {super().__str__()}"


class AllocateError(Exception):
    """A refusal from the allocator (or a wrapped storage failure)."""

    NAMES: ClassVar[tuple[str, ...]] = (
        "unknown_account",
        "account_inactive",
        "insufficient_balance",
        "invalid_ttl",
        "unknown_lease",
        "fenced",
        "lease_not_active",
        "invalid_release",
        "storage",
        "balance_exhausted",
        "balance_insufficient",
    )
    COUNT: ClassVar[int] = len(NAMES)
    index: ClassVar[int] = -1
    message: ClassVar[str] = ""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.message)

    @property
    def name(self) -> str:
        """The refusal's stable metric label."""
        return self.NAMES[self.index]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.args == self.args

    def __hash__(self) -> int:
        return hash((type(self), self.args))


class UnknownAccount(AllocateError):
    index = 0
    message = "unknown account"


class AccountInactive(AllocateError):
    """The account exists but its status may not spend."""

    index = 1
    message = "account inactive"


class InsufficientBalance(AllocateError):
    """Nothing left to lease, and no attestation of why: keep polling, since a
    settlement or a top-up can restore balance."""

    index = 2
    message = "insufficient balance"


class InvalidTtl(AllocateError):
    """A lease needs one strictly positive, representable lifetime."""

    index = 3
    message = "lease TTL must specify one positive duration"


class UnknownLease(AllocateError):
    index = 4
    message = "unknown lease"


class Fenced(AllocateError):
    """The token does not match the lease record the lease id names. Tokens of
    *other* active leases are irrelevant: a newer token fences nothing."""

    index = 5
    message = "fencing token mismatch"


class LeaseNotActive(AllocateError):
    """The lease exists but was released, reclaimed, or is past its grace."""

    index = 6
    message = "lease not active"


class InvalidRelease(AllocateError):
    """``unspent + recorded usage > granted``: a client accounting bug,
    surfaced rather than absorbed."""

    index = 7
    message = "invalid release"


class AllocateStorage(AllocateError):
    """A storage failure on an allocator call: the outcome is ambiguous."""

    index = 8

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error


class BalanceExhausted(AllocateError):
    """The ledger confirms no funding remains, outstanding leases included."""

    index = 9
    message = "account balance exhausted"

    def __init__(self, evidence: BalanceExhaustion) -> None:
        super().__init__(self.message)
        self.evidence = evidence

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BalanceExhausted) and other.evidence == self.evidence

    def __hash__(self) -> int:
        return hash((BalanceExhausted, self.evidence))


class BalanceInsufficient(AllocateError):
    """No grant is possible, and all remaining funding (never zero) is held in
    other leases; zero remaining is ``BalanceExhausted``."""

    index = 10

    def __init__(self, evidence: BalanceShortfall) -> None:
        super().__init__(
            f"insufficient balance ({evidence.remaining} units remain, all held in leases)"
        )
        self.evidence = evidence

    def __eq__(self, other: object) -> bool:
        # The evidence whole: the same shortfall ending at another period is another answer.
        return isinstance(other, BalanceInsufficient) and other.evidence == self.evidence

    def __hash__(self) -> int:
        return hash((BalanceInsufficient, self.evidence))


class CreateAccountError(Exception):
    """Refusals from account creation; storage failures wrap as ``StoreError``."""


class AccountAlreadyExists(CreateAccountError):
    """Creation is never destructive (an overwrite would reset balances and
    fencing under live leases) and never silently idempotent."""

    def __init__(self) -> None:
        super().__init__("account already exists")


class SetStatusError(Exception):
    """Refusals from a status or capacity-class transition."""


class StatusUnknownAccount(SetStatusError):
    def __init__(self) -> None:
        super().__init__("unknown account")


class AccountClosed(SetStatusError):
    """``Closed`` is terminal: entered from any status, never left; the refusal
    changes nothing."""

    def __init__(self) -> None:
        super().__init__("account is closed")


class BudgetError(Exception):
    """Refusals from setting a budget schedule."""


class BudgetUnknownAccount(BudgetError):
    """Never a silent no-op: a mistyped id must be learnt now, not at the boundary."""

    def __init__(self) -> None:
        super().__init__("no such account")


class IngestError(Exception):
    """An ingest attempt failed; ``retryable`` says whether replaying the batch
    unchanged could ever succeed."""

    retryable: ClassVar[bool] = True


class IngestUnavailable(IngestError):
    """The sink could not be reached or answer in time: retry the same batch."""

    retryable = True


class IngestRefused(IngestError):
    """The sink refused this batch and will refuse it again unchanged (say, an
    accumulated total it would overflow): retrying cannot help. It reads
    "refused: ..." (seed 003)."""

    retryable = False

    def __str__(self) -> str:
        return f"refused: {super().__str__()}"
