"""The budget contract every axond budget store keeps.

Spend is integer micro-dollars. Enforcement is *reserve, then settle*: a
request holds a conservative estimate before it runs, so requests already in
flight count against the cap, and afterwards converts that hold into what it
really spent.

Rules kept here:

* ``settle`` is called exactly once per admitted request, whatever happened to
  it, and never retried by the caller. A store must release and charge in one
  atomic step, and must not count on a second chance: a settlement that fails
  leaves the hold to expire on its own deadline (which is why the reservation
  TTL should exceed the longest request).
* ``release`` is ``settle`` of zero.
* A denial is either *exceeded* (the caller's problem, a 429) or *store
  unavailable* (the gateway's problem, a 503). When the store cannot be
  reached, ``UnavailablePolicy`` decides: deny (fail-closed, the default) or
  admit unenforced with a reservation that holds nothing (fail-open).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from stores.domains import Amount
from stores.quantities import DurationMs


@dataclass(frozen=True, slots=True)
class BudgetKey:
    """What a budget is scoped to: a subject within a namespace."""

    namespace: str
    subject: str


@dataclass(frozen=True, slots=True)
class Reservation:
    """A held estimate; the handle ``settle`` converts into measured spend."""

    id: str
    estimate_microdollars: int

    @classmethod
    def unheld(cls) -> Reservation:
        """What a store that holds nothing hands back (``NoBudget``, fail-open)."""
        return cls(id="", estimate_microdollars=0)

    @property
    def is_held(self) -> bool:
        return bool(self.id)


class Denial(enum.Enum):
    EXCEEDED = "exceeded"
    STORE_UNAVAILABLE = "store_unavailable"


class ExceededScope(enum.Enum):
    """Which cap a denial ran out of. Callers see the same 429 either way;
    the scope is for operators (and for the lab's trace)."""

    SUBJECT = "subject"
    NAMESPACE = "namespace"


@dataclass(frozen=True, slots=True)
class Admission:
    """The outcome of ``reserve``: a reservation, or a denial and its reason."""

    reservation: Reservation | None = None
    denial: Denial | None = None
    scope: ExceededScope | None = None

    @classmethod
    def allowed(cls, reservation: Reservation) -> Admission:
        return cls(reservation=reservation)

    @classmethod
    def exceeded(cls, scope: ExceededScope = ExceededScope.SUBJECT) -> Admission:
        return cls(denial=Denial.EXCEEDED, scope=scope)

    @classmethod
    def unavailable(cls) -> Admission:
        return cls(denial=Denial.STORE_UNAVAILABLE)

    @property
    def is_allowed(self) -> bool:
        return self.reservation is not None


@dataclass(frozen=True, slots=True)
class RecordedLedger:
    """What a store records for one key, as the lab's oracle reads it: settled
    spend, and every hold by reservation id as ``(amount, deadline_ms)``."""

    spent_microdollars: int
    holds: dict[str, tuple[int, int]]

    def held_at(self, now_ms: int) -> int:
        """The holds the store still counts at ``now_ms`` (deadline ahead)."""
        return sum(amount for amount, deadline_ms in self.holds.values() if deadline_ms > now_ms)


def require_amount(name: str, microdollars: int) -> int:
    """Money is a non-negative integer: a negative estimate would lower every
    other request's count, a negative actual would credit the budget."""
    if isinstance(microdollars, bool) or not isinstance(microdollars, int) or microdollars < 0:
        raise ValueError(f"{name} must be a whole number of micro-dollars >= 0, "
                         f"got {microdollars!r}")
    return microdollars


class UnavailablePolicy(enum.Enum):
    """What a shared store does when it cannot be reached."""

    DENY = "deny"
    ALLOW = "allow"

    def admission(self) -> Admission:
        """The admission for a reservation the store could not answer."""
        if self is UnavailablePolicy.ALLOW:
            return Admission.allowed(Reservation.unheld())
        return Admission.unavailable()


class BudgetError(Exception):
    """A store refused to start or a command was misused; the message is for
    the operator and says what to do."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(f"budget backend `{backend}`: {message}")
        self.backend = backend
        self.message = message


class BudgetStore(Protocol):
    """What a gateway calls on the request path."""

    name: str

    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission: ...

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None: ...

    async def release(self, key: BudgetKey, reservation: Reservation) -> None: ...


class SharedSettings(BaseModel):
    """Settings of the shared (Redis) budget stores."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    reloadable: ClassVar[tuple[str, ...]] = (
        "subject_cap_microdollars", "namespace_cap_microdollars", "reservation_ttl")
    """What an operator may change while the fleet runs (``reconfigure``): the caps
    and the hold TTL, read by each replica at boot."""

    subject_cap_microdollars: Amount = Field(
        1_000_000, description="Spend cap of one (namespace, subject), in micro-dollars."
    )
    namespace_cap_microdollars: Amount | None = Field(
        None,
        description="Spend cap of a whole namespace; set, it selects the v2 layout.",
    )
    # gt=0: a hold that expires as it is made reserves nothing, so every
    # admission would be unenforced; the store is meaningless, not just unwise.
    reservation_ttl_ms: DurationMs = Field(
        "5m",
        gt=0,
        alias="reservation_ttl",
        description="How long a hold outlives a request that never settles, e.g. '5m'.",
    )
    on_unavailable: UnavailablePolicy = Field(
        UnavailablePolicy.DENY,
        description="'deny' (fail-closed) or 'allow' (fail-open) when the store is unreachable.",
    )
    key_prefix: str = Field("axond:budget", description="Prefix of every key the store writes.")

    @property
    def enforces_namespace_cap(self) -> bool:
        return self.namespace_cap_microdollars is not None


class NamespaceCapSettings(SharedSettings):
    """Settings of a store that always runs the v2 layout: the namespace cap is required."""

    namespace_cap_microdollars: Amount | None = Field(
        None, description="Spend cap of a whole namespace, in micro-dollars (required)."
    )

    @field_validator("namespace_cap_microdollars")
    @classmethod
    def _namespace_cap_is_set(cls, cap: int | None) -> int | None:
        if cap is None:
            raise ValueError(
                "the v2 layout enforces a namespace cap: set `namespace_cap_microdollars` "
                "(or pick the v1 store for a subject cap alone)"
            )
        return cap


class SubjectCapSettings(SharedSettings):
    """Settings of a store that runs the v1 layout: a subject cap alone."""

    @field_validator("namespace_cap_microdollars")
    @classmethod
    def _no_namespace_cap(cls, cap: int | None) -> int | None:
        if cap is not None:
            raise ValueError(
                "the v1 layout enforces only the subject cap; a namespace cap needs the "
                "v2 layout (store = 'axond_budget.redis_v2')"
            )
        return cap


class NoSettings(BaseModel):
    """``NoBudget`` takes no settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class NoBudget:
    """Always admits and holds nothing: the default when no budget is set."""

    name = "none"

    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        return Admission.allowed(Reservation.unheld())

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        return None

    async def release(self, key: BudgetKey, reservation: Reservation) -> None:
        return None
