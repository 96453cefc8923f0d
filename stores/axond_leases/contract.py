"""The concurrency-lease contract: at most ``max_in_flight`` requests of one
(namespace, subject) in flight across the whole fleet.

A request ``acquire``s a lease before it runs and drops its ``Permit`` when it
ends; dropping releases the lease in the background. Every lease carries a
deadline, so one whose release never arrives (its replica died, every release
attempt failed) stops counting at the lease TTL.

Rules kept here:

* A denial is either *exceeded* (``max_in_flight`` leases are live: the
  caller's 429) or *store unavailable* (the gateway's 503). When the store
  cannot answer, ``UnavailablePolicy`` decides: deny (fail-closed, the
  default) or admit unenforced, with a permit that holds no lease (fail-open).
* ``Permit.release`` never blocks and never fails: it starts the release and
  returns, as dropping the permit does in axond. Calling it twice releases once.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LeaseKey:
    """What a concurrency limit is scoped to: a subject within a namespace."""

    namespace: str
    subject: str


class Denial(enum.Enum):
    EXCEEDED = "exceeded"
    STORE_UNAVAILABLE = "store_unavailable"


class Release(Protocol):
    """A lease's background release (``release.LeaseRelease``)."""

    def spawn(self) -> None: ...


class Permit:
    """An admitted request's hold on one lease, or on none when the store
    admitted it unenforced (``lease_id is None``)."""

    __slots__ = ("_lease_id", "_release")

    def __init__(self, lease_id: str | None, release: Release | None) -> None:
        self._lease_id = lease_id
        self._release = release

    @classmethod
    def unenforced(cls) -> Permit:
        """What fail-open admission hands back: a permit that holds nothing."""
        return cls(None, None)

    @property
    def lease_id(self) -> str | None:
        return self._lease_id

    @property
    def enforced(self) -> bool:
        """Whether a lease in the store counts this request."""
        return self._lease_id is not None

    def release(self) -> None:
        """Start releasing the lease in the background (once: a second call,
        like a second drop, does nothing)."""
        release, self._release = self._release, None
        if release is not None:
            release.spawn()

    def __repr__(self) -> str:
        return f"Permit(lease_id={self._lease_id!r})"


@dataclass(frozen=True, slots=True)
class Admission:
    """The outcome of ``acquire``: a permit, or a denial; ``reason`` says why,
    in words an operator reads (the log line the store wrote)."""

    permit: Permit | None = None
    denial: Denial | None = None
    reason: str = ""
    generation: int | None = None
    """The shared connection's generation whose reply it was decided on, or
    that it found recovering (``None``: no reply decided it)."""
    untrusted: bool = False
    """That generation was no longer trusted when the store decided."""

    @classmethod
    def allowed(cls, permit: Permit, reason: str = "admitted") -> Admission:
        return cls(permit=permit, reason=reason)

    @classmethod
    def exceeded(cls, reason: str = "max_in_flight leases are live") -> Admission:
        return cls(denial=Denial.EXCEEDED, reason=reason)

    @classmethod
    def unavailable(cls, reason: str) -> Admission:
        return cls(denial=Denial.STORE_UNAVAILABLE, reason=reason)

    def on(self, generation: int, untrusted: bool) -> Admission:
        """This admission, decided on ``generation`` (trusted or not then)."""
        return dataclasses.replace(self, generation=generation, untrusted=untrusted)

    @property
    def is_allowed(self) -> bool:
        return self.permit is not None


class UnavailablePolicy(enum.Enum):
    """What the limiter does when the store cannot answer."""

    DENY = "deny"
    ALLOW = "allow"

    def admission(self, reason: str) -> Admission:
        """The admission for an acquire the store could not decide."""
        if self is UnavailablePolicy.ALLOW:
            return Admission.allowed(Permit.unenforced(),
                                     f"{reason}; admitted unenforced (on_unavailable = allow)")
        return Admission.unavailable(reason)


class LeaseConnectError(Exception):
    """The limiter could not reach its server at boot; the message says why."""


class LeaseConnectTimeout(LeaseConnectError):
    """The server did not answer at boot within ``connect_timeout``."""

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(f"Redis connection timed out after {timeout_ms}ms")
        self.timeout_ms = timeout_ms
