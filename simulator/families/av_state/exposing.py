"""What exposed the store's own damage: the fault (and the call it hit) that
made a store bug show, for the verdict's "store_logic, exposed by ..."
(``simulator.plugin.contracts``, DESIGN section 12).

The oracle hears of every message fault with the command it hit
(``message_fault(number, what, call)``); ``FaultLog`` keeps them per session,
in order. When the oracle files damage under ``store_logic``, the exposure
is the latest fault the lab did to the operation that did it (its attempt,
refund, tally or cleanup); else the latest the lab did to that session (a
lost request that delayed its calls into a race); else what the lab did to
the counter without a command (its TTL ran out, an eviction, a restore);
else the path of the workload's that reached the bug (a tally kept with
``add``, a whole refund, a refund after the session's cleanup, a session
opened again on a prefix an earlier one used): a path a fault-free run
takes rarely. Only damage none of these touched reads
``no fault``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Context:
    """What the oracle is judging when it files damage: which session, doing
    which operation on which call, at what virtual time, and in words."""

    session: int | None
    faults: frozenset[str]
    """The faults of the lab's on the operation being judged."""
    path: str
    """The operation: ``try_spend``, ``add``, ``refund``, ``remove_prefix``;
    or a lab action without a command (``key_expired``)."""
    via: str = ""
    """The workload's path that reached it, when no fault did (``tally``,
    ``whole_refund``, ``refund_after_cleanup``, ``recycled_prefix``)."""
    at_us: int = 0
    words: str | Callable[[], str] = ""
    """The call in words, for where the store's damage began; or what says
    them when asked (``said``): a context is made for every command, and
    its words are read only when damage is filed under it."""

    def said(self) -> str:
        """``words`` as text."""
        return self.words if isinstance(self.words, str) else self.words()


NOWHERE = Context(None, frozenset(), "")

CONSEQUENCES = frozenset({"call_timed_out", "late_reply", "slow_reply"})
"""Faults that follow from another (a lost message times out its call; a
slowed reply arrives late): the one they follow from is what exposed a bug."""


class FaultLog:
    """Every message fault of the lab's, per session, in the order it happened."""

    def __init__(self) -> None:
        self._hits: dict[int, list[tuple[str, str]]] = {}

    def hit(self, number: int, what: str, call: str) -> None:
        self._hits.setdefault(number, []).append((what, call))

    def latest(self, number: int | None, among: Iterable[str] = (),
               exclude: Iterable[str] = ()) -> tuple[str, str] | None:
        """The latest fault of session ``number`` (of ``among`` when given,
        none of ``exclude``)."""
        wanted, unwanted = frozenset(among), frozenset(exclude)
        for what, call in reversed(self._hits.get(number, []) if number is not None else []):
            if (not wanted or what in wanted) and what not in unwanted:
                return what, call
        return None

    def exposing(self, context: Context) -> tuple[str | None, str]:
        """The fault (and call) that exposed damage filed in ``context``."""
        found = None
        primary = context.faults - CONSEQUENCES
        if primary:
            found = self.latest(context.session, primary)
        if found is None and context.faults:
            found = self.latest(context.session, context.faults)
        found = found or self.latest(context.session, exclude=CONSEQUENCES)
        found = found or self.latest(context.session)
        if found is not None:
            return found
        if context.via:
            return context.via, context.path
        return None, context.path
