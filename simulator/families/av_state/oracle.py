"""The session-counter oracle: what callers were told against the store's counters.

Two streams of facts, as for every family (``docs/metrics.md``):

* **the truth**, from the gateways (``lifecycle``) and the lab: a session
  opened; each call's spend was sent (and re-sent), and its caller was told
  it committed, was refused or failed; a refund was sent; the cleanup began
  and ended; a crash dropped the session; and every fault the lab did to its
  messages (``message_fault``).
* **the store's record**: after every command, the post-state of the keys
  it declared (``observer``), tagged with the session the command was sent
  for; expiry, eviction and restores likewise, tagged with no session. The
  in-memory twin's counters are read after each call instead.

Rules kept here:

* A counter's budget runs from its first use until a session using it
  closes it (the cleanup begins, or the session crashes); its truth is what
  callers were told committed minus what they refunded. **Budget overshoot**
  is a budget's truth past its limit at the end, blamed on the causes of the
  commits that passed it: the part the store's own record already forbade
  is ``store_logic``, the rest goes to why the record was below the truth.
* The record minus the truth is kept per cause as it forms (``books``): a
  charge whose caller heard nothing, a second charge of one call, a credit
  beyond a refund, a counter that vanished or came back each file their
  difference under the cause the lab gives them, never under a guess from
  how the record changed. With no fault and no race the workload decides,
  whatever differs is the store's.
* A refund lowers the truth as the store lowers the record: down to zero
  and no further (a whole refund sends the "all" amount). When the store's
  clamp empties a counter, the record and the truth meet at zero: what the
  record held beyond the truth (a double debit) is closed by the refund, not
  minted, and what it held short of it is made up, not left to the store.
* A call's tally (``add``, after its spend committed) is a one-part intent
  of its own, judged like a spend against the store's bound.
* A command belongs to the operation of its session that was open when it
  ran (a spend attempt, a tally, a refund, the cleanup); when the cleanup and a call
  overlap, its declared keys tell which (a refund writes a replay marker; a
  cleanup deletes). A command that runs after its caller gave up belongs to
  the attempt that sent it, or to the session's latest call (a reply later
  than the session's next call is beyond any network the lab models).
* The fault contract (``contract``) decides what a fault excuses: a re-sent
  refund crediting again, a counter expiring less than its TTL after a
  session's command last named it (``Ledger.used_us``; a refused spend
  names it too), a cleanup deleting outside its own prefix, a refund marker
  written with no TTL are ``store_logic`` whatever the lab did. Every part
  filed under ``store_logic`` is kept with what exposed it and where the
  store's record and the truth first parted (``exposing``, ``Exposures``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simulator.families.av_state import verdict
from simulator.families.av_state.books import (
    ACKED,
    IN_FLIGHT,
    LEFTOVER,
    NEUTRAL,
    REFUND_PENDING,
    SERVER,
    UNCHANGED,
    Attempt,
    Charge,
    Epoch,
    Intent,
    KeyChange,
    Ledger,
    RefundIntent,
    SessionBook,
    Totals,
)
from simulator.families.av_state.causes import (
    CLEANUP_RACE,
    DOUBLE_DEBIT_CAUSES,
    DUPLICATES,
    HIDDEN,
    IN_MEMORY_TWIN,
    PER_REPLICA,
    SHARED_PREFIX,
    VANISHED,
)
from simulator.families.av_state.exposing import NOWHERE, Context, FaultLog
from simulator.families.av_state.judgments import commit_excess, deficits, refusal_cause, view
from simulator.net.pipeline import EXPIRY_HORIZON_US
from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import Exposures
from simulator.scenario.model import ScenarioError
from simulator.scenario.sessions import WHOLE
from simulator.world.requests import REQUESTS_PER_REPLICA

MARKER_INFIX = ":r:"
"""What separates a counter's key from a refund id in a replay marker's key."""


class CounterOracle:
    """The oracle of a session-counter store (see the module docstring)."""

    def __init__(self, counter_ttl_us: int, per_replica: bool = False,
                 tally_limit: int = 2**53 - 1, marker_ttl_us: int | None = None) -> None:
        self.counter_ttl_us = counter_ttl_us
        self.marker_ttl_us = marker_ttl_us
        """The TTL a Redis store gives every refund marker (``None``: unchecked)."""
        self.tally_limit = tally_limit
        """The bound the store's ``add`` checks a tally against (``JCS_SAFE_MAX``)."""
        """The TTL a Redis store gives every counter: past it, a counter the
        store still holds untouched is one Redis would have expired."""
        self.per_replica = per_replica
        """The store keeps counters in each replica (the in-memory twin)."""
        self.sessions: dict[int, SessionBook] = {}
        self.prefixes_opened: set[tuple[Any, str]] = set()
        self.recycled: set[int] = set()
        """Sessions opened on a prefix (of a source) an earlier session had
        used: what exposes a store whose cleanup left that session's counters."""
        self.ledgers: dict[tuple[Any, str], Ledger] = {}
        self.by_key: dict[str, dict[Any, Ledger]] = {}
        self.sources: dict[Any, dict[str, Ledger]] = {}
        self.epochs: list[Epoch] = []
        self.others: dict[Any, dict[str, Any]] = {}
        """Keys under the store's prefix that are not counters (refund
        markers), as the record holds them, per source."""
        self.counts: Counter = Counter()
        self.kept_past_ttl_us = 0
        self.totals = Totals()
        self.faults = FaultLog()
        self.exposures = Exposures()
        """The store-logic damage by the fault that exposed it (``exposing``)."""
        self.context: Context = NOWHERE
        """What the oracle is judging now: where store-logic damage is filed from."""
        self.overshoot_exposures: dict[int, tuple[str | None, str]] = {}
        """Per budget (``id`` of its epoch), what exposed the store's first
        commit past its limit: the verdict shares its overshoot out at the end."""
        self.gap_exposures: dict[tuple[Any, str], tuple[str | None, str]] = {}
        """Per counter, what exposed the store's latest own move of its record
        away from the truth: the exposure of the overshoot it lets through."""
        self.markers_without_ttl: set[str] = set()
        """Refund markers the store wrote with no expiry."""

    # -- what the core tells every oracle ------------------------------------

    def replica_clocks(self, clocks: list) -> None:
        """Counters carry no deadlines written by a replica's clock."""

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        """The lab did ``what`` to a message of session ``number``: filed
        under every operation of it still open (the latest when none is)."""
        self.faults.hit(number, what, call)
        session = self.sessions.get(number)
        if session is None:
            return
        open_ops = self._open_faults(session)
        for faults in open_ops or ([session.last_faults] if session.last_faults is not None
                                   else []):
            faults.add(what)

    def aborted(self, number: int, now_us: int) -> None:
        """Session ``number``'s replica crashed: what it had in flight is
        hidden from it for good, and the budgets it alone used are closed,
        leaving their counters behind."""
        session = self.sessions.get(number)
        if session is None or session.over:
            return
        self.counts["sessions_aborted_by_crash"] += 1
        session.over = True
        self.context = Context(number, frozenset(), "", via="crash", at_us=now_us)
        intent = session.current
        if intent is not None:
            attempt = intent.attempts[-1]
            if not attempt.answer:
                attempt.answer = "aborted"
                self._hide_charges(intent, attempt, "crash")
            if intent.refund is not None and intent.refund.open:
                intent.refund.open = False
                self._unsettle_refund(intent, "crash")
        tally = session.tally
        if tally is not None and not tally.attempts[-1].answer:
            tally.attempts[-1].answer = "aborted"
            self._hide_charges(tally, tally.attempts[-1], "crash")
        for key in session.counters:
            ledger = self._ledger(session.source, key)
            if session.live:
                ledger.sessions.discard(number)
                if not ledger.sessions:
                    self._close(ledger, number, "crash")
            else:
                self._leftover(ledger, "crash")
        self._end_life(session)

    def settings_in_force(self, replica: int, changes: dict[str, Any], now_us: int) -> None:
        """Never told: the av_state settings declare no setting an operator may
        reload yet (``simulator.scenario.reconfigure``)."""

    def source_lost(self, source: Any, now_us: int) -> None:
        """A replica's twin vanished with its counters."""
        for ledger in list(self.of_source(source).values()):
            if ledger.value is not None:
                self._vanished(ledger, None, VANISHED["source_lost"], now_us)
        self.others.pop(source, None)

    def of_source(self, source: Any) -> dict[str, Ledger]:
        """Every counter of ``source`` the books know, by key."""
        return self.sources.get(source, {})

    # -- facts from the lifecycle --------------------------------------------

    def opened(self, number: int, prefix: str, plan: Any, source: Any, where: tuple[str, str],
               now_us: int) -> None:
        """Session ``number`` opened on ``source`` with ``plan``: its counters
        are ``prefix`` plus each counter its calls spend on."""
        names = list(dict.fromkeys(name for call in plan.calls for name in call.counters))
        session = SessionBook(number, prefix, source, where,
                              tuple(prefix + name for name in names), now_us, plan)
        self.sessions[number] = session
        if (source, prefix) in self.prefixes_opened:
            self.recycled.add(number)
        self.prefixes_opened.add((source, prefix))
        self.totals.live_sessions += 1
        self.counts["sessions_opened"] += 1
        self.counts["calls_planned"] += len(plan.calls)
        for key in session.counters:
            ledger = self._ledger(source, key)
            ledger.sessions.add(number)
            ledger.where = where
            if self.per_replica and any(
                    other is not ledger and other.value is not None
                    for other in self.by_key.get(key, {}).values()):
                # Redis would have shared that counter with this session; the
                # twin keeps it in another replica, which this session never sees.
                self._count("counter_resets", PER_REPLICA)

    def spend_sent(self, number: int, index: int, attempt: int, now_us: int) -> None:
        """Call ``index`` of session ``number`` sent its spend (``attempt`` 0
        first, then each retry with the same intent)."""
        session = self.sessions[number]
        intent = session.calls.get(index)
        if intent is None:
            intent = self._intent(session, index)
            self.counts["calls_started"] += 1
        session.current = intent
        sent = Attempt(attempt)
        intent.attempts.append(sent)
        session.last_faults = sent.faults
        self.counts["spend_attempts"] += 1
        self.counts["spend_attempts_retried"] += attempt > 0

    def spend_answered(self, number: int, index: int, answer: str, refused_index: int | None,
                       now_us: int, remaining: int | None = None) -> None:
        """The caller of call ``index`` was told ``answer`` (``committed``,
        ``refused`` naming ``refused_index``, ``failed``, ``rejected``);
        ``remaining``: a commit's post-commit minimum remaining, as told."""
        intent = self.sessions[number].calls[index]
        self.counts[f"spend_attempts_{answer}"] += 1
        self.context = self._call_context(intent, intent.attempts[-1].faults, "try_spend",
                                          now_us, f"told {answer}",
                                          via="recycled_prefix" if number in self.recycled
                                          else "")
        if answer == "committed" and remaining is not None:
            self._judge_remaining(intent.attempts[-1], remaining)
        self._answered(intent, answer, refused_index)

    def _judge_remaining(self, attempt: Attempt, told: int) -> None:
        """A commit's caller was told ``told`` budget left where the store's
        own record, as its script left it, had ``attempt.remaining``. Judged
        only for an attempt no fault touched: a misaligned or duplicated
        reply may be another execution's answer. Nothing the lab does
        rewrites a reply's figures: the store's."""
        if attempt.faults or attempt.remaining is None or told == attempt.remaining:
            return
        self.counts["remaining_misreported"] += 1
        self._expose("remaining_misreported", 1)

    def tally_sent(self, number: int, index: int, now_us: int) -> None:
        """Call ``index`` of session ``number`` committed and adds to its tally."""
        session = self.sessions[number]
        part = session.plan.calls[index].tally
        tally = session.tally = self._new_intent(
            session, index, [(part.counter, part.amount, self.tally_limit)])
        sent = Attempt(0)
        tally.attempts.append(sent)
        session.last_faults = sent.faults
        self.counts["tallies_sent"] += 1

    def tally_answered(self, number: int, index: int, answer: str, now_us: int) -> None:
        """The tally's ``add`` returned ``added``, ``refused`` (past the store's
        bound) or ``failed``: judged as a spend told committed, refused or failed."""
        tally = self.sessions[number].tally
        assert tally is not None and tally.index == index
        self.counts[f"tallies_{answer}"] += 1
        self.context = self._call_context(tally, tally.attempts[-1].faults, "add", now_us,
                                          f"told {answer}", via="tally")
        self._answered(tally, "committed" if answer == "added" else answer,
                       0 if answer == "refused" else None)

    def _answered(self, intent: Intent, answer: str, refused_index: int | None) -> None:
        """The caller of ``intent`` was told ``answer`` for its latest attempt."""
        attempt = intent.attempts[-1]
        attempt.answer = intent.told = answer
        if answer == "committed":
            self._told_committed(intent, attempt)
            return
        if answer == "refused" and not attempt.faults & HIDDEN:
            cause = STORE_LOGIC  # it answered a refusal, yet charged
        else:
            cause = self._hidden_cause(attempt)
        self._hide_charges(intent, attempt, cause)
        if answer == "refused":
            self._judge_refusal(intent, attempt, refused_index)
        elif answer == "failed" and not attempt.faults:
            # The caller takes a failure as a refusal (it fails closed); with
            # nothing done to the call, a sound store never fails one.
            self._count("false_refusals", STORE_LOGIC)

    def refund_sent(self, number: int, index: int, now_us: int) -> None:
        """Call ``index`` gives back its unused amounts: the truth drops now."""
        session = self.sessions[number]
        intent = session.current = session.calls[index]  # its tally may have come between
        plan = session.plan
        parts: dict[str, int] = {}
        for part in plan.calls[index].refunds:
            key = session.prefix + part.counter
            parts[key] = parts.get(key, 0) + part.amount
        refund = intent.refund = RefundIntent(parts, {})
        session.last_faults = refund.faults
        self.counts["refunds_sent"] += 1
        self.counts["refunds_whole"] += any(part.amount == WHOLE
                                            for part in plan.calls[index].refunds)
        for key, amount in parts.items():
            ledger = self._ledger(session.source, key)
            epoch = intent.epochs.get(key) or ledger.epoch
            # Down to zero and no further, as the store clamps the record.
            dropped = refund.pending[key] = min(amount, max(0, epoch.truth))
            if dropped < amount:
                refund.truth_clamped.add(key)
            self._add_truth(epoch, -dropped)
            if epoch is ledger.epoch:
                ledger.settle_gap(REFUND_PENDING, dropped)
                ledger.pending_refunds.append(refund)

    def refund_returned(self, number: int, index: int, now_us: int) -> None:
        """The refund call returned (it never fails its caller): what it did
        not credit stays in the record, filed under why."""
        intent = self.sessions[number].calls[index]
        refund = intent.refund
        if refund is None or not refund.open:
            return
        refund.open = False
        self.context = self._call_context(intent, refund.faults, "refund_many", now_us,
                                          "returned")
        if refund.faults & HIDDEN:
            cause = "refund_lost"
        else:
            cause = STORE_LOGIC  # it ran, with no fault, and credited less than asked
        self._unsettle_refund(intent, cause)

    def cleanup_began(self, number: int, now_us: int) -> None:
        """The session's end: its budgets close, and its counters are being cleared."""
        session = self.sessions[number]
        self._end_life(session)
        session.cleanup = "running"
        session.last_faults = session.cleanup_faults
        self.counts["cleanups_begun"] += 1
        for key in session.counters:
            ledger = self._ledger(session.source, key)
            ledger.sessions.discard(number)
            self._close(ledger, number, LEFTOVER)

    def cleanup_ended(self, number: int, now_us: int) -> None:
        """``remove_prefix`` returned (it never fails its caller): what it left
        of the closed budgets stays behind, filed under why."""
        session = self.sessions[number]
        session.cleanup = "done"
        self.counts["cleanups_ended"] += 1
        self.context = Context(number, frozenset(session.cleanup_faults), "remove_prefix",
                               at_us=now_us, words=f"remove_prefix for session {number}")
        cause = "cleanup_lost" if session.cleanup_faults & HIDDEN else STORE_LOGIC
        for key in session.counters:
            self._leftover(self._ledger(session.source, key), cause)

    def _end_life(self, session: SessionBook) -> None:
        if session.live:
            session.live = False
            self.totals.live_sessions -= 1

    def closed(self, number: int, now_us: int) -> None:
        """The session is over: every call made, its counters cleared."""
        session = self.sessions[number]
        if not session.over:
            session.over = True
            self.counts["sessions_closed"] += 1

    # -- the store's record ----------------------------------------------------

    def observe(self, source: Any, now_us: int, tag: int, how: str,
                changes: list[KeyChange], op: str = "") -> None:
        """Keys of ``source`` changed (or a command only read them). ``how``
        is ``command`` (of session ``tag``, doing ``op`` if its caller says:
        ``spend``, ``refund``, ``cleanup``), ``key_expired``, ``evicted`` or
        ``data_loss``."""
        counters: dict[str, KeyChange] = {}
        markers: dict[str, Any] = {}
        others = self.others.setdefault(source, {})
        for change in changes:
            if (source, change.key) in self.ledgers:
                counters[change.key] = change
            else:
                if change.after is not UNCHANGED:
                    markers[change.key] = others.get(change.key)
                    if change.after is None:
                        others.pop(change.key, None)
                    else:
                        others[change.key] = change.after
        self._markers_written(changes, markers, fresh=how == "command")
        if how != "command":
            self.context = Context(None, frozenset(), "", via=VANISHED[how], at_us=now_us)
            for key, change in counters.items():
                after = self._value(self.ledgers[source, key], change)
                self._vanished(self.ledgers[source, key], after, VANISHED[how], now_us,
                               change.no_ttl)
            return
        session = self.sessions.get(tag)
        if session is None:
            self._stray(source, counters, now_us)
            return
        op = op or self._operation(session, counters, changes)
        self.context = self._command_context(session, op, counters, now_us)
        for key, change in counters.items():
            # A spend or a tally uses every counter it names, refused or not
            # (both scripts refresh the TTL before refusing); a refund or a
            # cleanup only the ones it wrote (a replay the marker blocked
            # touches none).
            if op in ("spend", "tally") or change.written:
                self.ledgers[source, key].used_us = now_us
        if op in ("spend", "tally", "refund"):
            self._judge_ttls(counters, every=op != "refund")
        if op == "cleanup":
            self._cleared(session, counters, now_us)
        elif op == "refund":
            self._credited(session, counters, markers, now_us)
        elif op == "tally":
            self._charged(session, counters, now_us, session.tally)
        else:
            self._charged(session, counters, now_us, session.current)

    def _judge_ttls(self, counters: dict[str, KeyChange], every: bool = True) -> None:
        """Every counter script gives a counter it touches the whole TTL (the
        seed's shared TTL): a spend or a tally, committed or refused, every
        counter it names that exists (it sets it on a charge and refreshes it
        before a refusal); a refund (``every`` false) every counter it wrote,
        clamped or not. A counter left with any other expiry is the store's
        (``ttls_wrong``; one left with none is ``counters_without_ttl``)."""
        for change in counters.values():
            if every or (change.written and change.after not in (None, UNCHANGED)):
                self._judge_ttl(change, self.counter_ttl_us)

    def _judge_ttl(self, change: KeyChange, ttl_us: int) -> None:
        """``change`` left its key ``ttl_us`` to live, or it is the store's.
        The deadline is read once the server's pipeline ran: a later command
        in it (a re-send, another call of the session) may have renewed it,
        up to the span of one pipeline later."""
        if (change.expires_in_us is not None
                and not ttl_us <= change.expires_in_us <= ttl_us + EXPIRY_HORIZON_US):
            self.counts["ttls_wrong"] += 1
            self._expose("ttls_wrong", 1)

    def _operation(self, session: SessionBook, counters: dict[str, KeyChange],
                   changes: list[KeyChange]) -> str:
        """Which operation of the session a server command was: the one open
        when it ran; when the cleanup overlaps a call, or none is open (a
        command that ran after its caller gave up), what it did to the keys
        it declared says: a refund writes its replay marker (or, with none,
        lowers counters), a cleanup's delete leaves every key it named gone,
        anything else is a spend."""
        tally = session.tally
        deleting = bool(changes) and all(change.after is None and change.written
                                         for change in changes)
        if tally is not None and not deleting and all(change.key in tally.parts
                                                      for change in changes):
            return "tally"  # only an add names the tally alone
        intent = session.current
        call_op = ""
        if intent is not None and intent.attempts and not intent.attempts[-1].answer:
            call_op = "spend"
        elif intent is not None and intent.refund is not None and intent.refund.open:
            call_op = "refund"
        if session.cleanup == "running" and (deleting or not call_op):
            if deleting:
                return "cleanup"
        elif call_op:
            return call_op
        elif deleting:
            return "cleanup"
        # No operation open explains it: it ran after its caller gave up.
        if any(MARKER_INFIX in change.key and change.after not in (None, UNCHANGED)
               for change in changes):
            return "refund"
        held = self.sources.get(session.source, {})
        if any(change.after is not UNCHANGED and change.after is not None
               and (held[key].value or 0) > change.after for key, change in counters.items()):
            return "refund"
        return "spend"

    def _value(self, ledger: Ledger, change: KeyChange) -> int | None:
        return ledger.value if change.after is UNCHANGED else change.after

    def _write(self, ledger: Ledger, change: KeyChange, now_us: int) -> tuple[int | None,
                                                                                int | None]:
        """Apply a command's post-state to a ledger: ``(before, after)``."""
        before = ledger.value
        after = self._value(ledger, change)
        no_ttl = ledger.no_ttl
        if change.written and after is not None:
            # The twin's counters never expire; a Redis store's must not be
            # left without a TTL on any path.
            no_ttl = self.per_replica or change.no_ttl
            if no_ttl:
                self._without_ttl(ledger, IN_MEMORY_TWIN if self.per_replica else STORE_LOGIC)
        self._hold(ledger, after, no_ttl)
        if change.written or self.per_replica:
            self._touched(ledger, before, now_us)
        return before, after

    def _hold(self, ledger: Ledger, value: int | None, no_ttl: bool) -> None:
        """The store now holds ``value`` under the counter (``None``: nothing)."""
        totals = self.totals
        was_present = ledger.value is not None
        totals.record += (value or 0) - (ledger.value or 0)
        totals.without_ttl -= was_present and ledger.no_ttl
        ledger.value, ledger.no_ttl = value, no_ttl
        totals.present += (value is not None) - was_present
        totals.without_ttl += value is not None and no_ttl

    def _without_ttl(self, ledger: Ledger, cause: str) -> None:
        """A counter is seen with no expiry: counted once per key."""
        if not ledger.ever_no_ttl:
            ledger.ever_no_ttl = True
            self._count("counters_without_ttl", cause)

    def _add_truth(self, epoch: Epoch, amount: int) -> None:
        """A budget's truth moves by ``amount`` (a commit told, a refund sent)."""
        over = self._over(epoch)
        epoch.truth += amount
        self.totals.overshoot += self._over(epoch) - over
        if epoch.closed_by is None:
            self.totals.truth += amount

    @staticmethod
    def _over(epoch: Epoch) -> int:
        return 0 if epoch.limit is None else max(0, epoch.truth - epoch.limit)

    def _touched(self, ledger: Ledger, before: int | None, now_us: int) -> None:
        """A command touched the counter: one held untouched past the TTL is
        one a Redis store would have expired (the twin keeps them all)."""
        if before is not None:
            idle = now_us - ledger.touched_us
            if idle >= self.counter_ttl_us:
                self.counts["counters_kept_past_ttl"] += 1
                self.kept_past_ttl_us += idle - self.counter_ttl_us
        ledger.touched_us = now_us

    # -- spends ----------------------------------------------------------------

    def _charged(self, session: SessionBook, counters: dict[str, KeyChange],
                 now_us: int, intent: Intent | None) -> None:
        """A spend of the session's current call (or its tally, ``intent``)
        ran: each counter it charged is filed as on its way to the caller, or
        as why the caller will never hear of it (a second charge of one call
        is a double debit)."""
        if intent is None:
            self._stray(session.source, counters, now_us)
            return
        attempt = intent.attempts[-1]
        before_all: dict[str, int] = {}
        left: dict[str, int] = {}
        charged, uncharged = [], []
        doubled: list[tuple[str, int]] = []
        for key, change in counters.items():
            ledger = self.ledgers[session.source, key]
            before, after = self._write(ledger, change, now_us)
            delta = (after or 0) - (before or 0)
            before_all[key] = before or 0
            amount, limit = intent.parts.get(key, (None, 0))
            if amount is not None and after is not None:
                left[key] = max(0, limit - after)
            if amount is None:
                self._store_gap(ledger, delta)  # a key its call does not spend on
                continue
            old = intent.epochs[key] is not ledger.epoch
            if before is None and after is not None and ledger.cleared:
                ledger.cleared = False
                if old:
                    self._resurrected(change, self._closed_cause(intent, intent.epochs[key]))
            if amount == 0:
                self._store_gap(ledger, delta)
                continue
            if not (change.written and after is not None and delta == amount):
                (uncharged if delta == 0 else charged).append(key)
                self._store_gap(ledger, delta)  # charged a wrong amount, if anything
                continue
            charged.append(key)
            cause = self._charge(intent, attempt, ledger, old)
            if cause is not None:
                doubled.append((cause, amount))
        if charged and uncharged:
            self._count("partial_batches", STORE_LOGIC)
            self.counts["partial_spends"] += 1
        if doubled:
            self._count("double_debits", doubled[0][0])
            self.counts["double_debit_units"] += sum(amount for _, amount in doubled)
        if charged:
            attempt.record_before = before_all
            attempt.remaining = min(left.values()) if left.keys() == intent.parts.keys() else None
        else:
            attempt.refusal = {key: view(self._ledger(session.source, key), before_all.get(key))
                               for key in intent.parts}

    def _charge(self, intent: Intent, attempt: Attempt, ledger: Ledger,
                old: bool) -> str | None:
        """File one charge of ``intent`` on ``ledger``; the cause of the double
        debit it makes, if it is not the call's first charge there."""
        amount = intent.parts[ledger.key][0]
        charges = intent.charges.setdefault(ledger.key, [])
        prior = [charge for charge in charges if charge.incarnation == ledger.incarnation]
        if old:
            status = self._closed_cause(intent, intent.epochs[ledger.key])
        elif any(charge.attempt == attempt.number for charge in prior):
            status = "duplicate_execution" if attempt.faults & DUPLICATES else STORE_LOGIC
        elif attempt.answer:
            status = self._hidden_cause(attempt)  # its caller already stopped waiting
        else:
            status = IN_FLIGHT
        ledger.settle_gap(status, amount)
        charges.append(Charge(attempt.number, ledger.incarnation, status))
        if not prior:
            return None
        if any(charge.attempt == attempt.number for charge in prior):
            return status
        earlier = prior[-1].status
        return earlier if earlier not in (IN_FLIGHT, ACKED) else STORE_LOGIC

    def _hide_charges(self, intent: Intent, attempt: Attempt, cause: str) -> None:
        """The attempt's charges still on their way will never reach its caller."""
        session = self.sessions[intent.session]
        for key, charges in intent.charges.items():
            ledger = self._ledger(session.source, key)
            for charge in charges:
                if charge.attempt == attempt.number and charge.status == IN_FLIGHT:
                    charge.status = cause
                    if (charge.incarnation == ledger.incarnation
                            and intent.epochs[key] is ledger.epoch):
                        ledger.move_gap(IN_FLIGHT, cause, intent.parts[key][0])

    def _hidden_cause(self, attempt: Attempt) -> str:
        return "reply_lost" if attempt.faults & HIDDEN else STORE_LOGIC

    def _told_committed(self, intent: Intent, attempt: Attempt) -> None:
        """The caller was told its call committed: the truth grows by every
        part; a part the store never charged leaves the record short."""
        session = self.sessions[intent.session]
        for key, (amount, limit) in intent.parts.items():
            ledger = self._ledger(session.source, key)
            epoch = intent.epochs[key]
            self._add_truth(epoch, amount)
            if epoch is ledger.epoch and amount:
                charge = next((charge for charge in reversed(intent.charges.get(key, []))
                               if charge.status == IN_FLIGHT
                               and charge.incarnation == ledger.incarnation), None)
                if charge is not None:
                    charge.status = ACKED
                    ledger.settle_gap(IN_FLIGHT, -amount)
                else:
                    cause = self._uncharged_cause(intent, attempt, ledger)
                    self._count("commits_uncharged", cause)
                    ledger.settle_gap(cause, -amount)
                    if cause == STORE_LOGIC:
                        self._store_moved(ledger)  # told committed, never charged
            self._judge_commit(intent, attempt, ledger, epoch, amount, limit)

    def _uncharged_cause(self, intent: Intent, attempt: Attempt, ledger: Ledger) -> str:
        """Why a call its caller was told committed has no charge in the record."""
        if "misaligned_reply" in attempt.faults:
            return "misaligned_reply"
        wiped = [charge.incarnation for charge in intent.charges.get(ledger.key, [])
                 if charge.incarnation != ledger.incarnation]
        if wiped:
            return self._ended_cause(intent, ledger, wiped[-1])
        return STORE_LOGIC

    def _judge_commit(self, intent: Intent, attempt: Attempt, ledger: Ledger, epoch: Epoch,
                      amount: int, limit: int) -> None:
        """A commit that took its budget past the limit (``judgments``)."""
        if epoch.truth <= limit or not amount:
            return
        seen = None if attempt.record_before is None else attempt.record_before.get(ledger.key)
        # A closed budget's record is no longer this counter's: it lagged
        # because a cleanup cleared it.
        lag = (deficits(ledger) if epoch is ledger.epoch
               else {self._closed_cause(intent, epoch): 1})
        excess = commit_excess(epoch.truth, limit, amount, seen, lag)
        epoch.wrongful.update(excess)
        if excess.get(STORE_LOGIC) and id(epoch) not in self.overshoot_exposures:
            # The store's share: its record lagged by its own doing (what
            # exposed that), or it charged past its own record (this call).
            lagged = lag.get(STORE_LOGIC) and (ledger.source, ledger.key) in self.gap_exposures
            self.overshoot_exposures[id(epoch)] = (
                self.gap_exposures[ledger.source, ledger.key] if lagged
                else self.faults.exposing(self.context))
            self._parted()

    def _judge_refusal(self, intent: Intent, attempt: Attempt, index: int | None) -> None:
        """A refusal an exactly-once limiter would not have made (``judgments``)."""
        source = self.sessions[intent.session].source
        hidden = [charge.status for key, charges in intent.charges.items() for charge in charges
                  if charge.status not in (IN_FLIGHT, ACKED)
                  and charge.incarnation == self._ledger(source, key).incarnation]
        views = attempt.refusal or {key: view(self._ledger(source, key)) for key in intent.parts}
        cause = refusal_cause(intent.parts, views, hidden, attempt.faults, index)
        if cause is not None:
            self._count("false_refusals", cause)
            if cause in DOUBLE_DEBIT_CAUSES and cause != STORE_LOGIC:
                self.counts["false_refusals_from_double_debits"] += 1

    # -- refunds ---------------------------------------------------------------

    def _credited(self, session: SessionBook, counters: dict[str, KeyChange],
                  markers: dict[str, Any], now_us: int) -> None:
        """A refund of the session's current call ran: each credit is its
        refund's (up to what it gives back of a charge still in the record),
        or minted budget, filed under why."""
        intent = session.current
        refund = None if intent is None else intent.refund
        if intent is None or refund is None:
            self._stray(session.source, counters, now_us)
            return
        refund.executions += 1
        if any(before is not None for key, before in markers.items() if MARKER_INFIX in key):
            self.counts["refund_replays_blocked"] += 1
        written, skipped = 0, 0
        for key, change in counters.items():
            ledger = self.ledgers[session.source, key]
            before, after = self._write(ledger, change, now_us)
            asked = refund.parts.get(key, 0)
            if before is None:
                if after is not None:
                    # A refund never may create a counter (the EXISTS gate).
                    ledger.cleared = False
                    self._resurrected(change, STORE_LOGIC)
                    self._store_gap(ledger, after)
                continue
            if asked:
                if change.written:
                    written += 1
                else:
                    skipped += 1
            credit = before - (after or 0)
            # The store's clamp: the refund asked for at least what was there.
            emptied = change.written and after == 0 and asked >= before
            if credit < 0:
                self._store_gap(ledger, -credit)  # a refund that charged
            elif credit or emptied:
                self._credit(intent, refund, ledger, credit, emptied)
        if written and skipped:
            self._count("partial_batches", STORE_LOGIC)
            self.counts["partial_refunds"] += 1

    def _credit(self, intent: Intent, refund: RefundIntent, ledger: Ledger, credit: int,
                emptied: bool) -> None:
        key = ledger.key
        epoch = intent.epochs.get(key)
        charges = intent.charges.get(key, [])
        in_record = any(charge.incarnation == ledger.incarnation for charge in charges)
        legit = min(credit, refund.pending.get(key, 0)) if in_record else 0
        if legit:
            refund.pending[key] -= legit
            if epoch is ledger.epoch:
                ledger.settle_gap(REFUND_PENDING, -legit)
            else:
                # A closed budget's refund: it takes back what its call left
                # behind (or charged after the cleanup).
                from_leftover = min(legit, max(0, ledger.gap.get(LEFTOVER, 0)))
                ledger.settle_gap(LEFTOVER, -from_leftover)
                ledger.settle_gap(self._closed_cause(intent, epoch), from_leftover - legit)
        minted = credit - legit
        if ((emptied or key in refund.truth_clamped) and in_record and epoch is ledger.epoch
                and refund.executions == 1):
            minted = self._close_gap(ledger, refund, minted, emptied)
        if not minted:
            return
        if in_record and refund.executions > 1:
            # The contract: a re-sent refund is one-shot (its replay marker),
            # whatever the driver did. Crediting it again is the store's.
            cause = STORE_LOGIC
        elif emptied and in_record and epoch is not ledger.epoch:
            # Its budget was closed while it was on its way (a cleanup that
            # raced it, another session's of the prefix): giving back
            # everything empties what the next budget holds too.
            cause = self._closed_cause(intent, epoch)
        elif charges and not in_record:
            cause = self._ended_cause(intent, ledger, charges[-1].incarnation)
        elif not charges and intent.attempts and "misaligned_reply" in intent.attempts[-1].faults:
            cause = "misaligned_reply"
        else:
            cause = STORE_LOGIC
        ledger.settle_gap(cause, -minted)
        self._count("budget_minted_units", cause, minted)
        self.counts["refunds_minting"] += 1

    def _close_gap(self, ledger: Ledger, refund: RefundIntent, excess: int,
                   emptied: bool) -> int:
        """A clamp met this refund: the truth's (it could not go below zero)
        or the record's (the counter is ``emptied``). The credit beyond what
        the refund gave back of the truth takes back what the record held
        beyond the truth (a double debit, a refund lost: closed, not minted),
        then what other refunds on their way had already taken off the truth
        (a whole refund of another session of the prefix): it credited it
        for them.
        When the counter is empty, the record and the truth meet at zero (or
        the record is as far below the truth as the truth is above zero):
        what the record still held beyond meets what it held short (the
        refund's uncredited rest first) and both close. What excess is left
        is minted."""
        key = ledger.key
        parts = sorted((cause, amount) for cause, amount in ledger.gap.items()
                       if cause not in NEUTRAL)
        above = [[cause, amount] for cause, amount in parts if amount > 0]
        below = [[cause, -amount] for cause, amount in parts if amount < 0]
        for part in above:
            taken = min(part[1], excess)
            ledger.settle_gap(part[0], -taken)
            part[1] -= taken
            excess -= taken
        for other in ledger.pending_refunds:
            taken = min(other.pending.get(key, 0), excess) if other is not refund else 0
            if taken:
                other.pending[key] -= taken
                ledger.settle_gap(REFUND_PENDING, -taken)
                excess -= taken
        if not emptied:
            return excess
        # What still stands above the truth: the refund's uncredited rest,
        # then the record's parts above it.
        standing = [[REFUND_PENDING, refund.pending.get(key, 0)], *above]
        for cause, short in below:
            for part in standing:
                taken = min(part[1], short)
                if taken:
                    ledger.move_gap(part[0], cause, taken)
                    part[1] -= taken
                    short -= taken
        refund.pending[key] = standing[0][1]
        return excess

    def _unsettle_refund(self, intent: Intent, cause: str) -> None:
        """What a finished refund did not credit stays in the record, as ``cause``'s."""
        refund = intent.refund
        assert refund is not None
        session = self.sessions[intent.session]
        for key, pending in refund.pending.items():
            ledger = self._ledger(session.source, key)
            if pending and refund in ledger.pending_refunds:
                ledger.move_gap(REFUND_PENDING, cause, pending)
            if refund in ledger.pending_refunds:
                ledger.pending_refunds.remove(refund)
            refund.pending[key] = 0

    # -- cleanup, budgets and vanishing counters ---------------------------------

    def _close(self, ledger: Ledger, number: int, leftover_cause: str) -> None:
        """Close the ledger's budget (session ``number`` ended it): a new one
        begins with nothing true, and all the record holds is left over."""
        self.totals.truth -= ledger.epoch.truth
        ledger.epoch.closed_by = number
        ledger.epoch = self._epoch(ledger.key, None)  # its calls bring its limit
        # Refunds of the closed budget still on their way keep what they may
        # credit (``_credit``), but no longer count in the new budget's gap.
        ledger.pending_refunds = []
        ledger.reset_gap(leftover_cause)

    def _leftover(self, ledger: Ledger, cause: str) -> None:
        """The cleanup is over: what it left of a closed budget is ``cause``'s."""
        left = ledger.gap.get(LEFTOVER, 0)
        if left:
            ledger.move_gap(LEFTOVER, cause, left)

    def _cleared(self, session: SessionBook, counters: dict[str, KeyChange],
                 now_us: int) -> None:
        """The cleanup deleted counters of its prefix."""
        for key, change in counters.items():
            ledger = self.ledgers[session.source, key]
            if ledger.value is None or change.after is not None:
                self._write(ledger, change, now_us)
                continue
            live = ledger.sessions - {session.number}
            if live:
                # Another session still spends on it: of the prefix (a
                # recycled one), or the cleanup deleted past its own prefix.
                own = key.startswith(session.prefix)
                self._count("counter_resets", SHARED_PREFIX if own else STORE_LOGIC)
            self._end_incarnation(ledger, "cleanup")
            self._hold(ledger, None, False)
            ledger.cleared = True
            self._reset_gap(ledger, SHARED_PREFIX if key.startswith(session.prefix)
                            else STORE_LOGIC)

    def _vanished(self, ledger: Ledger, after: int | None, cause: str, now_us: int,
                  no_ttl: bool = False) -> None:
        """A counter vanished or changed with no command of a session, for
        ``cause``: its TTL ran out, the server evicted it, a restore rewrote
        it, its replica crashed (or a command the store sent on its own)."""
        before = ledger.value
        if after == before:
            return
        if cause == VANISHED["key_expired"] and self._in_use(ledger, now_us):
            # The contract: a counter its session still calls (refused calls
            # included) never expires; the TTL reclaims abandoned ones only.
            cause = STORE_LOGIC
        if before is not None and (after is None or after < before) and ledger.sessions:
            self._count("counter_resets", cause)
        if before is None and ledger.cleared:
            self._resurrected(KeyChange(ledger.key, after, no_ttl=no_ttl), cause)
        self._end_incarnation(ledger, cause)
        no_ttl = after is not None and (no_ttl or self.per_replica)
        self._hold(ledger, after, no_ttl)
        if after is not None:
            ledger.cleared = False
            if no_ttl and not self.per_replica:
                self._without_ttl(ledger, STORE_LOGIC)
        self._reset_gap(ledger, cause)

    def _in_use(self, ledger: Ledger, now_us: int) -> bool:
        """A command of a live session named the counter less than the TTL
        ago: every such command (a refused spend too) must leave it the TTL."""
        return bool(ledger.sessions) and now_us - ledger.used_us < self.counter_ttl_us

    def _end_incarnation(self, ledger: Ledger, how: str) -> None:
        """The key's current content is gone: charges and refunds on it end with it."""
        ledger.ended[ledger.incarnation] = (how, ledger.epoch)
        ledger.incarnation += 1
        for refund in ledger.pending_refunds:
            refund.pending[ledger.key] = 0
        ledger.pending_refunds = []

    def _ended_cause(self, intent: Intent, ledger: Ledger, incarnation: int) -> str:
        """Why the incarnation of ``ledger`` holding ``intent``'s charge ended."""
        how, epoch_then = ledger.ended.get(incarnation, (STORE_LOGIC, ledger.epoch))
        if how != "cleanup":
            return how
        return self._closed_cause(intent, intent.epochs.get(ledger.key, epoch_then))

    def _closed_cause(self, intent: Intent, epoch: Epoch) -> str:
        """Whose cleanup a call ran into: its own session's, or another's of the prefix."""
        if epoch.closed_by is None or epoch.closed_by == intent.session:
            return CLEANUP_RACE
        return SHARED_PREFIX

    def _resurrected(self, change: KeyChange, cause: str) -> None:
        self._count("counters_resurrected", cause)
        if change.no_ttl and not self.per_replica:
            self.counts["counters_resurrected_without_ttl"] += 1

    def _stray(self, source: Any, counters: dict[str, KeyChange], now_us: int) -> None:
        """A command no open operation of a known session explains: whatever it
        did to a counter is the store's."""
        for key, change in counters.items():
            ledger = self.ledgers[source, key]
            if ledger.value is not None and change.after is None:
                self._vanished(ledger, None, STORE_LOGIC, now_us)
            else:
                before, after = self._write(ledger, change, now_us)
                self._store_gap(ledger, (after or 0) - (before or 0))

    # -- helpers -----------------------------------------------------------------

    def _open_faults(self, session: SessionBook) -> list[set[str]]:
        found = []
        intent = session.current
        if intent is not None:
            if intent.attempts and not intent.attempts[-1].answer:
                found.append(intent.attempts[-1].faults)
            if intent.refund is not None and intent.refund.open:
                found.append(intent.refund.faults)
        tally = session.tally
        if tally is not None and not tally.attempts[-1].answer:
            found.append(tally.attempts[-1].faults)
        if session.cleanup == "running":
            found.append(session.cleanup_faults)
        return found

    def _ledger(self, source: Any, key: str) -> Ledger:
        ledger = self.ledgers.get((source, key))
        if ledger is None:
            ledger = self.ledgers[source, key] = Ledger(key, source, self._epoch(key, None))
            self.by_key.setdefault(key, {})[source] = ledger
            self.sources.setdefault(source, {})[key] = ledger
        return ledger

    def _epoch(self, key: str, limit: int | None) -> Epoch:
        epoch = Epoch(key, limit)
        self.epochs.append(epoch)
        return epoch

    def _intent(self, session: SessionBook, index: int) -> Intent:
        spends = session.plan.calls[index].spends
        intent = self._new_intent(session, index,
                                  [(part.counter, part.amount, part.limit) for part in spends])
        session.calls[index] = intent
        return intent

    def _new_intent(self, session: SessionBook, index: int,
                    spends: list[tuple[str, int, int]]) -> Intent:
        """Call ``index``'s intent to add each (counter, amount) under its limit."""
        parts: dict[str, tuple[int, int]] = {}
        epochs: dict[str, Epoch] = {}
        for counter, amount, limit in spends:
            key = session.prefix + counter
            parts[key] = (amount, limit)
            ledger = self._ledger(session.source, key)
            epochs[key] = ledger.epoch
            epoch = ledger.epoch
            if epoch.limit is None or limit > epoch.limit:
                over = self._over(epoch)
                epoch.limit = limit
                self.totals.overshoot += self._over(epoch) - over
        return Intent(session.number, index, parts, epochs)

    def _count(self, metric: str, cause: str, amount: int = 1) -> None:
        self.counts[metric] += amount
        self.counts[f"{metric}_by_{cause}"] += amount
        if cause == STORE_LOGIC:
            self._expose(metric, amount)

    def _expose(self, metric: str, amount: float) -> None:
        """``amount`` of ``metric`` is the store's: filed with the fault that
        exposed it, and where the store's record and the truth parted."""
        fault, call = self.faults.exposing(self.context)
        self.exposures.add(metric, amount, fault, call)
        self._parted()

    def _parted(self) -> None:
        context = self.context
        if context.words:
            self.exposures.parted(context.at_us, -1 if context.session is None
                                  else context.session, context.said())

    def _store_gap(self, ledger: Ledger, amount: int) -> None:
        """The store moved its record ``amount`` away from the truth on its own."""
        ledger.settle_gap(STORE_LOGIC, amount)
        if amount:
            self._store_moved(ledger)

    def _store_moved(self, ledger: Ledger) -> None:
        """The store's record of ``ledger`` left the truth by the store's doing."""
        self.gap_exposures[ledger.source, ledger.key] = self.faults.exposing(self.context)
        self._parted()

    def _reset_gap(self, ledger: Ledger, cause: str) -> None:
        ledger.reset_gap(cause)
        if cause == STORE_LOGIC:
            self._store_moved(ledger)

    # -- what is being judged (``exposing``) ---------------------------------------

    def _call_context(self, intent: Intent, faults: set[str], path: str, now_us: int,
                      did: str, via: str = "") -> Context:
        """Judging what ``intent``'s caller was told (or its refund returning)."""
        session = self.sessions[intent.session]
        # The words are put together only if damage is filed under this
        # context (rarely); what they quote that changes is read now.
        held = [self._ledger(session.source, key).value for key in intent.parts]

        def words() -> str:
            asked = {self._short(session, key): amount
                     for key, (amount, _) in intent.parts.items()}
            holds = {self._short(session, key): value
                     for key, value in zip(intent.parts, held, strict=True)}
            return (f"{path} on replica {self._replica(intent.session)} for session "
                    f"{intent.session} call {intent.index} "
                    f"({session.where[1] or session.prefix}): "
                    f"asked {asked}, {did}; the store holds {holds}")

        return Context(intent.session, frozenset(faults), path, via, now_us, words)

    def _command_context(self, session: SessionBook, op: str,
                         counters: dict[str, KeyChange], now_us: int) -> Context:
        """Judging a command of ``session`` that ran ``op`` on the server."""
        intent = session.tally if op == "tally" else session.current
        path = {"cleanup": "remove_prefix", "refund": "refund_many", "tally": "add"}.get(
            op, "try_spend")
        via = ""
        faults: frozenset[str] = frozenset().union(*self._open_faults(session))
        # As in ``_call_context``: the words only when asked, the values now.
        recorded = [(key, self.ledgers[session.source, key].value,
                     self._value(self.ledgers[session.source, key], change))
                    for key, change in counters.items()]
        asked: dict[str, Any] = {}  # what the call asked of each counter: its part
        if op == "tally":
            via = "tally"
            if intent is not None:
                asked = intent.parts
        elif op == "refund" and intent is not None and intent.refund is not None:
            asked = intent.refund.parts
            faults |= intent.refund.faults
            via = ("refund_after_cleanup" if session.cleanup
                   else "whole_refund" if any(amount >= WHOLE for amount in
                                               intent.refund.parts.values()) else "")
        elif op == "cleanup":
            faults |= session.cleanup_faults
        elif intent is not None:
            asked = intent.parts
            if intent.attempts:
                faults |= intent.attempts[-1].faults
            if any(after == before for _, before, after in recorded):
                via = "refusal"  # a counter it left as it was: the check refused

        def words() -> str:
            # A spend's or a tally's part is (amount, limit); a refund's, an
            # amount (all, past ``WHOLE``).
            shown = {self._short(session, key): part[0] if isinstance(part, tuple)
                     else "all" if part >= WHOLE else part
                     for key, part in asked.items()}
            call = "" if intent is None else f" call {intent.index}"
            went = [f"{key} {before} -> {after}" for key, (before, after) in
                    {self._short(session, key): (before, after)
                     for key, before, after in recorded}.items()]
            if len(went) > 4:
                went = [*went[:4], f"and {len(went) - 4} more"]
            return (f"{path} on replica {self._replica(session.number)} for session "
                    f"{session.number}{call} ({session.where[1] or session.prefix}): "
                    f"asked {shown}, the store went " + ", ".join(went))

        return Context(session.number, faults, path, via, now_us, words)

    @staticmethod
    def _replica(number: int) -> int:
        """The replica that opened session ``number`` (request numbers are
        ``replica * REQUESTS_PER_REPLICA + n``)."""
        return number // REQUESTS_PER_REPLICA

    @staticmethod
    def _short(session: SessionBook, key: str) -> str:
        return key.removeprefix(session.prefix)

    def _markers_written(self, changes: list[KeyChange], markers: dict[str, Any],
                         fresh: bool = True) -> None:
        """A refund marker written with no expiry outlives every retry window
        for good (the seed gives it 5 minutes): the store's, whatever the lab
        did. A command (``fresh``) writing a new marker gives it exactly those
        5 minutes; a restore brings markers back with the deadlines they had."""
        for change in changes:
            written = (change.key in markers and MARKER_INFIX in change.key and change.written
                       and change.after not in (None, UNCHANGED))
            if (fresh and written and markers[change.key] is None
                    and self.marker_ttl_us is not None):
                self._judge_ttl(change, self.marker_ttl_us)  # a new marker: its 5 minutes
            if (written and change.no_ttl
                    and change.key not in self.markers_without_ttl):
                self.markers_without_ttl.add(change.key)
                self.counts["refund_markers_without_ttl"] += 1
                self._expose("refund_markers_without_ttl", 1)

    # -- results -------------------------------------------------------------------

    def sample(self, now_us: int, per_key: bool) -> list[dict[str, Any]]:
        """The counters now, from the oracle's own books (``verdict``)."""
        return verdict.sample(self, now_us, per_key)

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        """Every metric of the family, from what happened (``verdict``)."""
        return verdict.summary(self, end_us)


def counter_oracle(scenario: Any, kind: Any, settings: Any) -> CounterOracle:
    """The oracle of ``scenario`` run on ``kind`` with ``settings``; a
    scenario with no sessions is refused, naming the field."""
    if scenario.workload.sessions is None:
        raise ScenarioError(f"workload.sessions: the store {kind.name!r} keeps session "
                            "counters; give the scenario a [workload.sessions] table")
    return CounterOracle(counter_ttl_us=kind.contract.COUNTER_TTL_SECONDS * 1_000_000,
                         per_replica=kind.per_replica, tally_limit=kind.contract.JCS_SAFE_MAX,
                         marker_ttl_us=kind.contract.REFUND_MARKER_TTL_SECONDS * 1_000_000)


__all__ = ["SERVER", "CounterOracle", "counter_oracle"]
