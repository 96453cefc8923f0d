"""The session-counter oracle's two judgments, made when the store decided.

* **A commit past the limit.** A commit that takes its budget's truth past
  the limit adds its excess (at most its own amount). The excess splits
  exactly: what the store's record already forbade (the record before the
  charge, plus the amount, past the limit) is ``store_logic``; the rest came
  through the record lagging the truth, and is shared over why it lagged
  (the negative parts of the counter's gap).
* **A false refusal.** A refusal an exactly-once limiter would not have made:
  the call had already been charged by an attempt hidden from its caller
  (an exactly-once store answers a re-send with the first answer), or every
  counter had room in the truth plus what was on its way. Its cause is why
  the refused counter's record stood above that (the positive parts of its
  gap); ``store_logic`` when the store's own record had room.

Pure functions of what the books held: the oracle (``oracle``) keeps the books.
"""

from __future__ import annotations

from collections import Counter

from simulator.families.av_state.books import NEUTRAL, KeyView, Ledger
from simulator.plugin.attribution import STORE_LOGIC, apportion, dominant

Parts = dict[str, tuple[int, int]]
"""A call's counters: key to (amount, limit)."""


def view(ledger: Ledger, record: int | None = None) -> KeyView:
    """A counter as a refusal is judged: its record (``record``, else what the
    books hold now), what an exactly-once limiter counted, and why the record
    stood above that."""
    neutral = sum(ledger.gap.get(part, 0) for part in NEUTRAL)
    blamable = {cause: gap for cause, gap in ledger.gap.items()
                if gap > 0 and cause not in NEUTRAL}
    return KeyView((ledger.value or 0) if record is None else record,
                   ledger.epoch.truth + neutral, blamable)


def deficits(ledger: Ledger) -> dict[str, int]:
    """Why the counter's record lags its truth: the negative parts of its gap."""
    return {cause: -gap for cause, gap in ledger.gap.items() if gap < 0 and cause not in NEUTRAL}


def commit_excess(truth: int, limit: int, amount: int, record_before: int | None,
                  lag: dict[str, int]) -> Counter:
    """The excess over ``limit`` a commit of ``amount`` added, taking the
    truth to ``truth``, by cause: the store's record was ``record_before``
    when it charged (``None``: it never charged), and lagged the truth for
    the ``lag`` weights. A commit the store's own record forbade (record
    before + amount past the limit) a sound store refuses whole: all of its
    excess is the store's, however far the record lagged besides."""
    excess = min(amount, truth - limit)
    if excess <= 0:
        return Counter()
    forbade = record_before is not None and record_before + amount > limit
    own = excess if forbade else 0
    parts = Counter(apportion(excess - own, lag))
    if own:
        parts[STORE_LOGIC] += own
    return parts


def refusal_cause(parts: Parts, views: dict[str, KeyView], hidden_charges: list[str],
                  faults: set[str], refused_index: int | None) -> str | None:
    """Why a refusal of a call over ``parts`` was false, ``None`` if it was
    not: ``hidden_charges`` are the causes of the call's own charges still in
    the record that its caller never heard of; ``views`` each counter as the
    store decided on it; ``faults`` what the lab did to the attempt."""
    if hidden_charges:
        return hidden_charges[0]
    if any(views[key].ideal + amount > limit for key, (amount, limit) in parts.items()):
        return None
    if "misaligned_reply" in faults:
        return "misaligned_reply"  # the refusal was another command's reply
    keys = list(parts)
    if refused_index is not None and 0 <= refused_index < len(keys):
        refused = keys[refused_index]
    else:
        over = [key for key, (amount, limit) in parts.items()
                if views[key].record + amount > limit]
        refused = over[0] if over else keys[0]
    amount, limit = parts[refused]
    if views[refused].record + amount <= limit:
        return STORE_LOGIC  # its own record had room
    return dominant(views[refused].blamable)
