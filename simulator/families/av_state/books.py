"""What the session-counter oracle knows: each counter in the store's record,
each budget period, each session, call and refund from its caller's side.

These are the oracle's books, nothing more: plain records the oracle
(``oracle``) updates from the facts it hears and the verdict reads.

A counter's *ledger* is one key in one source of record (the server, or one
replica's in-memory twin). Its *gap* is the record minus the truth of its
current budget period, kept as a signed sum per cause: every event that
moves the record or the truth apart files its difference under the cause
that made it, so the gap's parts always add up to ``record - truth`` and the
verdict reads why the store's record strays from the truth off them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# UNCHANGED: a key's post-state when the command only read it, what the
# books last had (the key mirror's own sentinel, so a report passes it on).
from simulator.plugin.key_mirror import UNCHANGED as UNCHANGED

SERVER = "server"
"""The source of record of a store kept on the server (the twin's are replicas)."""

IN_FLIGHT = "in_flight"
"""Gap part: charges whose caller has not heard back yet."""

REFUND_PENDING = "refund_pending"
"""Gap part: refunds sent whose credit has not landed yet."""

LEFTOVER = "leftover"
"""Gap part: what a closed budget left in the record while its cleanup runs."""

NEUTRAL = frozenset({IN_FLIGHT, REFUND_PENDING, LEFTOVER})
"""Gap parts that are no damage: an exactly-once limiter, too, would count
them until the answer, the refund or the cleanup lands."""

ACKED = "acknowledged"
"""A charge its caller was told committed."""

@dataclass(slots=True)
class Totals:
    """Running sums over every counter, kept as the books change: a sample
    of the aggregate costs nothing per counter (a run samples every second
    of days of virtual time)."""

    record: int = 0
    """What the store's counters hold, summed."""
    truth: int = 0
    """The truth of every budget still open, summed."""
    overshoot: int = 0
    """Every budget's truth past its limit, summed."""
    present: int = 0
    """Counters the store holds."""
    without_ttl: int = 0
    """Counters the store holds with no expiry."""
    live_sessions: int = 0


@dataclass(frozen=True, slots=True)
class KeyChange:
    """One key's post-state after a command (or an expiry, eviction, restore)."""

    key: str
    after: Any
    """Its value now (an ``int`` for a counter), ``None`` when absent, or
    ``UNCHANGED`` when the command only read it."""
    written: bool = True
    """The command wrote it (a charge, a refresh of its TTL, a delete)."""
    no_ttl: bool = False
    """It exists with no expiry (read from the server's virtual deadlines)."""
    expires_in_us: int | None = None
    """How long it has left to live after the command, when it exists with an
    expiry on a server (the virtual deadlines); ``None`` otherwise."""


@dataclass(slots=True, eq=False)
class Epoch:
    """One budget period of a counter: from its creation until a session
    using it closes it (its cleanup began, or it crashed), or the run ends.
    Its truth is what callers were told committed minus what they refunded."""

    key: str
    limit: int | None = None
    truth: int = 0
    wrongful: Counter = field(default_factory=Counter)
    """Excess over the limit of each commit that passed it, by cause."""
    closed_by: int | None = None
    """The session whose cleanup (or crash) closed it."""


@dataclass(slots=True, eq=False)
class Ledger:
    """One counter key in one source of record, as the store holds it."""

    key: str
    source: Any
    epoch: Epoch
    value: int | None = None
    gap: Counter = field(default_factory=Counter)
    """``value - epoch.truth``, by cause (see the module docstring)."""
    incarnation: int = 0
    """How many times the key vanished: a charge belongs to one incarnation."""
    ended: dict[int, tuple[str, Epoch]] = field(default_factory=dict)
    """How each past incarnation ended (how, cause-wise) and the budget then current."""
    sessions: set[int] = field(default_factory=set)
    """The live sessions using it (opened, neither cleaning up nor crashed)."""
    pending_refunds: list[RefundIntent] = field(default_factory=list)
    """Refunds sent on it whose credit may still land."""
    cleared: bool = False
    """Removed by a cleanup and not re-created since."""
    no_ttl: bool = False
    ever_no_ttl: bool = False
    touched_us: int = 0
    """When a command last wrote (or, in a twin, touched) it."""
    used_us: int = 0
    """When a command of a session last named it, read or written (the truth
    of when it was last in use: a refused spend uses it as much as a charge)."""
    where: tuple[str, str] = ("", "")
    """The namespace and subject of the last session that used it (for samples)."""

    def settle_gap(self, cause: str, amount: int) -> None:
        """File ``amount`` of the gap under ``cause`` (dropping parts at zero)."""
        if amount:
            self.gap[cause] += amount
            if not self.gap[cause]:
                del self.gap[cause]

    def move_gap(self, source: str, target: str, amount: int) -> None:
        """Refile ``amount`` of the gap from part ``source`` to ``target``."""
        self.settle_gap(source, -amount)
        self.settle_gap(target, amount)

    def reset_gap(self, cause: str) -> None:
        """The record changed wholesale (it vanished, a restore rewrote it):
        its whole difference from the truth is now ``cause``'s."""
        self.gap.clear()
        self.settle_gap(cause, (self.value or 0) - self.epoch.truth)


@dataclass(slots=True, eq=False)
class Charge:
    """One execution of a call's spend that charged one counter."""

    attempt: int
    incarnation: int
    status: str
    """``IN_FLIGHT``, ``ACKED``, or the cause its caller never heard of it."""


@dataclass(slots=True, eq=False)
class KeyView:
    """One counter as the store decided on it: what a refusal is judged by."""

    record: int
    ideal: int
    """What an exactly-once limiter would have counted: the truth plus the
    neutral parts of the gap (charges and refunds on their way)."""
    blamable: dict[str, int]
    """The positive, non-neutral parts of the gap: why the record was above it."""


@dataclass(slots=True, eq=False)
class Attempt:
    """One send of a call's spend (the first, or a retry with the same intent)."""

    number: int
    faults: set[str] = field(default_factory=set)
    answer: str = ""
    """``committed``, ``refused``, ``failed``, ``rejected``, ``aborted``; empty while open."""
    record_before: dict[str, int] | None = None
    """The record of each counter before its last charging execution."""
    refusal: dict[str, KeyView] | None = None
    """Each counter as its last execution that charged nothing saw it."""
    remaining: int | None = None
    """What its last charging execution left of the tightest budget: the
    post-commit minimum remaining a sound store answers with."""


@dataclass(slots=True, eq=False)
class RefundIntent:
    """A call's refund of its unused amounts (one ``refund_many``)."""

    parts: dict[str, int]
    pending: dict[str, int]
    """What of each part has not been credited yet."""
    truth_clamped: set[str] = field(default_factory=set)
    """The counters whose truth it lowered by less than asked: down to zero."""
    faults: set[str] = field(default_factory=set)
    executions: int = 0
    open: bool = True


@dataclass(slots=True, eq=False)
class Intent:
    """One tool call: its spend over several counters, with every attempt."""

    session: int
    index: int
    parts: dict[str, tuple[int, int]]
    """Counter key to (amount, limit)."""
    epochs: dict[str, Epoch]
    """The budget period each counter was in when the call was first sent."""
    attempts: list[Attempt] = field(default_factory=list)
    charges: dict[str, list[Charge]] = field(default_factory=dict)
    told: str = ""
    """What its caller was last told: the last attempt's answer."""
    refund: RefundIntent | None = None


@dataclass(slots=True, eq=False)
class SessionBook:
    """One session as its caller lived it, and what the lab did to its messages."""

    number: int
    prefix: str
    source: Any
    where: tuple[str, str]
    counters: tuple[str, ...]
    opened_us: int
    plan: Any
    """What the session will try to do (``simulator.scenario.sessions.SessionPlan``)."""
    calls: dict[int, Intent] = field(default_factory=dict)
    current: Intent | None = None
    tally: Intent | None = None
    """Its latest ``add`` to its tally counter, as a one-part intent (a call's
    spend is ``current``; the two are kept apart so the calls' answers count
    only spends)."""
    live: bool = True
    """Opened, its cleanup not begun, not crashed."""
    over: bool = False
    cleanup: str = ""
    """``running`` or ``done`` once its cleanup began."""
    cleanup_faults: set[str] = field(default_factory=set)
    last_faults: set[str] | None = None
    """The faults of its most recent operation: where a late fault is filed."""
