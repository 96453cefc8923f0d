"""What the lease oracle knows: each request from its caller's side, each
lease in the store's record, and both per key.

These are the oracle's books, nothing more: plain records the oracle
(``oracle``) updates from the facts it hears, and the verdict (``excess``,
``leaks``) reads. A lease belongs to the request whose command wrote it
(``Lease.owner``), never to whoever its id points at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.engine.runtime import EPOCH_MS

Key = tuple[str, str]

NO_REQUEST = -1
"""The owner of a lease no request's command wrote (brought back by a restore
with no known writer), and the tag of a change no command made."""

WAITING, HOLDING, OVER = "waiting", "holding", "over"
"""A request's state from its caller's side: its acquire is in flight; it
holds a permit (admitted, work running); it is over (denied, completed or
aborted)."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault the lab did to a request's message: what, on which call, when."""

    what: str
    call: str
    at_us: int


@dataclass(frozen=True, slots=True)
class Judged:
    """A key as a request's acquire found it: judged at the end of the run,
    with what the store did afterwards (did it give back the leases it
    counted then?) known."""

    at_us: int
    judged_ms: int
    """The clock the acquire's replica sent: leases past it were reclaimed."""
    holding: frozenset[int]
    """The callers holding a permit then."""
    leases: tuple[Lease, ...]
    """The leases the store counted then."""


@dataclass(frozen=True, slots=True)
class Untrusted:
    """The generation (shared connection) a request's answer was read off,
    which its store no longer trusted then (``retirements``): was its
    retirement warranted, and what made it untrusted."""

    generation: int
    warranted: bool
    """The connection had really failed (or the store's rule allows it): a
    sound store would not trust it either."""
    fault: Fault | None
    """The first fault the lab did on the replica while the generation was
    current: what exposes a store that acts on it wrongly."""
    why: str
    """In words: how the generation was retired."""


def deadline_us(deadline_ms: int) -> int:
    """A lease's deadline (epoch ms, as a replica's clock wrote it) as virtual time."""
    return (deadline_ms - EPOCH_MS) * 1_000


@dataclass(slots=True, eq=False)
class Lease:
    """One lease as the store recorded it, from its writing to its removal."""

    key: Key
    lease_id: str
    owner: int
    """The request whose command wrote it (``NO_REQUEST``: none known)."""
    written_us: int
    deadline_ms: int
    created_how: str
    """``command``, or how a restore brought it back (``data_loss``)."""
    removed_us: int | None = None
    removed_how: str = ""
    """``command``, ``key_expired``, ``data_loss``, ``evicted``."""
    removed_by: int = NO_REQUEST
    """The request whose command removed it."""

    @property
    def deadline_us(self) -> int:
        return deadline_us(self.deadline_ms)

    def counted_until(self, end_us: int) -> int:
        """When the store stopped counting it: removed, or past its deadline
        (``end_us`` while it still counts)."""
        removed = end_us if self.removed_us is None else self.removed_us
        return max(self.written_us, min(removed, self.deadline_us))

    def counts_at(self, now_us: int) -> bool:
        return self.removed_us is None and self.deadline_us > now_us


@dataclass(slots=True, eq=False)
class LeaseRequest:
    """One request as its caller lived it, and what the lab did to its messages."""

    number: int
    key: Key
    replica: int
    arrived_us: int
    honest_deadline_ms: int | None
    """The writer's clock at arrival plus the configured TTL: the earliest a
    lease of it may honestly stop counting (``None``: no TTL configured)."""
    state: str = WAITING
    enforced: bool = True
    """Admitted with a lease (``False``: admitted unenforced, fail-open)."""
    admitted_us: int | None = None
    over_us: int | None = None
    completed_us: int | None = None
    denied_us: int | None = None
    denial: str = ""
    aborted_us: int | None = None
    """When its replica crashed under it: while it waited or held, or while
    the release (or compensation) it had spawned may still have been running."""
    lease: Lease | None = None
    """The lease its command wrote on its key (its first: a second one is
    no request's, as a driver retry re-sends the same id)."""
    acquire_faults: frozenset[str] = frozenset()
    """What the lab did to its acquire's messages: shared empty default, as
    most meet none."""
    acquire_fault: Fault | None = None
    """The first of them, with the call it hit: what exposes a store that
    leaves such an acquire's lease behind."""
    release_failures: int = 0
    """Faults that may fail a call, on its release (or, once denied, on its
    compensating release) after it was over."""
    release_attempts_failed: int = 0
    """Release attempts that ended in failure (``causes.ATTEMPT_ENDS``)."""
    release_fault: Fault | None = None
    """The first fault on its release (or compensation), with the call it hit
    and when (the latest fact the oracle had heard by then)."""
    release_misaligned: bool = False
    """Its release read another release's reply: the release script echoes
    nothing (seed), so a sound store may take it for its own success."""
    release_failed_us: int | None = None
    """When the last of those faults came."""
    ran_after_over: int = 0
    """Its commands that ran on its key once it was over and wrote no lease:
    the release (or compensation) the store sent, as the server saw it."""
    misaligned: bool = False
    """Its caller received another command's reply while waiting for its acquire."""
    uncounted_since: int | None = None
    """Holding with no lease the store counts, since then (and why: ``uncounted_cause``)."""
    uncounted_cause: str = ""
    judged: Judged | None = None
    """What its key looked like when its acquire ran (the last time it did)."""
    untrusted: Untrusted | None = None
    """Its answer was read off a generation its store no longer trusted (a
    reply, or the connection found recovering)."""
    limit: int = 0
    """The ``max_in_flight`` its replica ran with (the scenario's, or an
    operator's reconfigured one): what a sound store there admits up to."""
    reconfigured: bool = False
    """Its replica ran settings an operator's ``reconfigure`` changed."""


@dataclass(slots=True)
class KeyBook:
    """One key: the store's record (its lease hash) and the callers' truth."""

    key: Key
    leases: dict[str, Lease] = field(default_factory=dict)
    """The lease hash as the store holds it now, by lease id."""
    writers: dict[str, int] = field(default_factory=dict)
    """Who wrote each lease id ever seen on the key: a restore that brings an
    old lease back brings back its owner too."""
    holding: set[int] = field(default_factory=set)
    """The requests holding a permit now."""
    holder_changes: list[tuple[int, int]] = field(default_factory=list)
    """``(time, +1 | -1)``: a caller began or stopped holding."""
    holder_limits: list[tuple[int, int, int]] = field(default_factory=list)
    """``(time, +1 | -1, limit)``: the same, with the ``max_in_flight`` the
    caller's replica ran with (read only once an operator changed it)."""
    uncounted: list[tuple[int, int, str]] = field(default_factory=list)
    """``(start, end, cause)``: closed spells of a caller holding with no
    lease the store counted."""
    history: list[Lease] = field(default_factory=list)
    """Every lease ever written on the key, in order."""
