"""What one owned acquire invoke came back with, and what that proves.

An invoke ends in one of three ways: the script's reply (``{status,
echoed_lease_id}``), a driver error (the connection failed: the script may or
may not have run), or its liveness deadline (likewise unknown). Only a reply
says anything about the store; and a reply is only *attributable* to this
acquire when it echoes this acquire's lease id and arrived on a generation
still trusted (``generations.ConnectionRecovery.is_untrusted``): on a shared,
multiplexed connection a dropped reply shifts every later reply onto the
wrong caller.

The rules below are axond's, named as it names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GRANTED = 1
REFUSED = 0


@dataclass(frozen=True, slots=True)
class InvokeOutcome:
    """One owned acquire invoke's result: a reply, an error, or the deadline."""

    status: int | None = None
    """The script's verdict (1 granted, 0 refused), when it replied."""
    echoed_lease_id: str | None = None
    error: BaseException | None = None
    """The driver's error, when the call failed."""
    elapsed: bool = False
    """The invoke's liveness deadline passed first."""

    @classmethod
    def replied(cls, status: int, echoed_lease_id: str) -> InvokeOutcome:
        return cls(status=status, echoed_lease_id=echoed_lease_id)

    @classmethod
    def failed(cls, error: BaseException) -> InvokeOutcome:
        return cls(error=error)

    @classmethod
    def timed_out(cls) -> InvokeOutcome:
        return cls(elapsed=True)

    @classmethod
    def from_reply(cls, raw: Any) -> InvokeOutcome:
        """The script's raw reply read as ``(status, echoed id)``; anything
        else (a reply meant for another command, shifted onto this one) is a
        failure to parse it, as redis-rs's typed read fails."""
        if isinstance(raw, list | tuple) and len(raw) == 2:
            status, echoed = raw
            if isinstance(echoed, bytes):
                echoed = echoed.decode()
            try:
                return cls.replied(int(status), str(echoed))
            except (TypeError, ValueError):
                pass
        return cls.failed(ValueError(f"unexpected reply to acquire: {raw!r}"))

    @property
    def answered(self) -> bool:
        """The script replied (a verdict, attributable or not)."""
        return self.status is not None

    @property
    def granted(self) -> bool:
        return self.status == GRANTED

    @property
    def refused(self) -> bool:
        return self.status == REFUSED

    @property
    def ambiguous(self) -> bool:
        """Neither a grant nor a refusal: a lease may exist that nobody owns."""
        return not (self.granted or self.refused)

    def describe(self) -> str:
        if self.elapsed:
            return "operation timed out"
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        return f"reply {self.status} for lease {self.echoed_lease_id}"


def compensate_abandoned_result(outcome: InvokeOutcome, result_untrusted: bool) -> bool:
    """Whether an acquire nobody will act on must release its lease: a grant
    always; any reply at all when it came on an untrusted generation (even a
    refusal, which may be another caller's reply while ours created a lease).
    A trusted refusal proves no lease was written. axond also calls this
    ``should_compensate_abandoned_send``; one rule, one function."""
    return outcome.granted or (result_untrusted and outcome.answered)


def result_has_mismatched_lease_id(outcome: InvokeOutcome, lease_id: str) -> bool:
    """A reply that echoes another acquire's lease id: the connection's
    replies are misaligned."""
    return outcome.answered and outcome.echoed_lease_id != lease_id
