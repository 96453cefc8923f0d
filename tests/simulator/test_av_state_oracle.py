"""The session-counter oracle measures what happened and blames what the lab did.

Each test tells the oracle a tiny story by hand -- sessions opening, calls
sent and answered, what the network did to their messages, and each
command's post-state of the keys it declared -- and checks the metric it
moves and whom the verdict blames. One story per cause: every cause of every
metric is reached, and with no fault (and no race the workload decides) all
damage is the store's. Whole runs (``test_av_state_family.py``) check the
same from the outside. After every story the books' own invariant holds:
each counter's gap, summed over its causes, is its record minus its truth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from simulator.families.av_state import causes
from simulator.families.av_state.books import SERVER, UNCHANGED, KeyChange
from simulator.families.av_state.oracle import CounterOracle
from simulator.scenario.sessions import WHOLE, Part, PlannedCall, SessionPlan

TTL_US = 86_400_000_000
MARKER_TTL_US = 300_000_000
PREFIX = "lab:budget:{s1}:"


def call(tokens: int = 100, limit: int = 1_000, refund: int = 0,
         calls: int | None = None, calls_limit: int = 10) -> PlannedCall:
    """A call spending ``tokens`` (and ``calls`` of a second counter when
    given) and giving ``refund`` tokens back after its work."""
    spends = [Part("tokens", tokens, limit)]
    if calls is not None:
        spends.append(Part("calls", calls, calls_limit))
    refunds = (Part("tokens", refund, 0),) if refund else ()
    return PlannedCall(0, tuple(spends), 0, refunds)


class Story:
    """Facts told to one oracle, virtual time moving on a millisecond per fact."""

    def __init__(self, per_replica: bool = False) -> None:
        self.oracle = CounterOracle(TTL_US, per_replica, marker_ttl_us=MARKER_TTL_US)
        self.now = 0
        self.prefixes: dict[int, str] = {}
        self.sources: dict[int, Any] = {}
        self.markers = 0

    def tick(self, us: int = 1_000) -> int:
        self.now += us
        return self.now

    def key(self, number: int, counter: str) -> str:
        return self.prefixes[number] + counter

    # -- the lifecycle ---------------------------------------------------------

    def open(self, number: int, *calls: PlannedCall, prefix: str = PREFIX,
             source: Any = SERVER) -> Story:
        self.prefixes[number] = prefix
        self.sources[number] = source
        plan = SessionPlan(prefix, 3_600_000_000, calls, 1, 1_000_000, 3_600_000_000)
        self.oracle.opened(number, prefix, plan, source, ("ns", f"s{number}"), self.tick())
        return self

    def send(self, number: int, index: int = 0, attempt: int = 0) -> Story:
        self.oracle.spend_sent(number, index, attempt, self.tick())
        return self

    def answer(self, number: int, index: int = 0, answer: str = "committed",
               refused: int | None = None, remaining: int | None = None) -> Story:
        self.oracle.spend_answered(number, index, answer, refused, self.tick(), remaining)
        return self

    def fault(self, number: int, *what: str) -> Story:
        for name in what:
            self.oracle.message_fault(number, name)
        return self

    def refund_sent(self, number: int, index: int = 0) -> Story:
        self.oracle.refund_sent(number, index, self.tick())
        return self

    def refund_returned(self, number: int, index: int = 0) -> Story:
        self.oracle.refund_returned(number, index, self.tick())
        return self

    def tally_sent(self, number: int, index: int = 0) -> Story:
        self.oracle.tally_sent(number, index, self.tick())
        return self

    def tally_answered(self, number: int, index: int = 0, answer: str = "added") -> Story:
        self.oracle.tally_answered(number, index, answer, self.tick())
        return self

    def cleanup_began(self, number: int) -> Story:
        self.oracle.cleanup_began(number, self.tick())
        return self

    def cleanup_ended(self, number: int) -> Story:
        self.oracle.cleanup_ended(number, self.tick())
        return self

    def aborted(self, number: int) -> Story:
        self.oracle.aborted(number, self.tick())
        return self

    # -- the store's record ------------------------------------------------------

    def run(self, number: int, values: dict[str, Any], marker: str | None = None,
            no_ttl: bool = False, read: tuple[str, ...] = (), tag: int | None = None,
            op: str = "") -> Story:
        """A command of session ``number`` ran, leaving counters at ``values``
        (``None``: gone), having only read ``read``, and writing refund
        marker ``marker`` (``"fresh"``: a new one)."""
        changes = [KeyChange(self.key(number, counter), value, no_ttl=no_ttl and value is not None)
                   for counter, value in values.items()]
        changes += [KeyChange(self.key(number, counter), UNCHANGED, written=False)
                    for counter in read]
        if marker is not None:
            if marker == "fresh":
                self.markers += 1
                marker = f"{self.key(number, 'tokens')}:r:{self.markers}"
            changes.append(KeyChange(marker, 1))
        self.oracle.observe(self.sources[number], self.tick(), number if tag is None else tag,
                            "command", changes, op)
        return self

    def drop(self, number: int, how: str, values: dict[str, Any]) -> Story:
        """Counters of session ``number``'s prefix vanished, or a restore
        rewrote them, with no command (``how``: key_expired, evicted, data_loss)."""
        changes = [KeyChange(self.key(number, counter), value) for counter, value in values.items()]
        self.oracle.observe(self.sources[number], self.tick(), -1, how, changes)
        return self

    # -- whole steps ---------------------------------------------------------------

    def charge(self, number: int, index: int, values: dict[str, Any],
               attempt: int = 0) -> Story:
        """Call ``index`` sent, run leaving ``values``, told it committed."""
        return self.send(number, index, attempt).run(number, values).answer(number, index)

    def refund(self, number: int, index: int, values: dict[str, Any]) -> Story:
        """Call ``index``'s refund sent, run leaving ``values``, returned."""
        return (self.refund_sent(number, index).run(number, values, marker="fresh")
                .refund_returned(number, index))

    def cleanup(self, number: int, *counters: str) -> Story:
        """The cleanup began, deleted ``counters`` (default: tokens) and ended."""
        self.cleanup_began(number)
        self.run(number, dict.fromkeys(counters or ("tokens",)))
        return self.cleanup_ended(number)

    def summary(self, end_us: int | None = None) -> dict[str, Any]:
        self.check_gaps()
        return self.oracle.summary(self.now if end_us is None else end_us, None)

    def check_gaps(self) -> None:
        """The books' invariants: each counter's gap adds up to record minus
        truth, and the running totals a sample reads are the books' sums."""
        oracle = self.oracle
        for ledger in oracle.ledgers.values():
            assert sum(ledger.gap.values()) == (ledger.value or 0) - ledger.epoch.truth, (
                ledger.key, dict(ledger.gap), ledger.value, ledger.epoch.truth)
        present = [ledger for ledger in oracle.ledgers.values() if ledger.value is not None]
        totals = oracle.totals
        assert totals.record == sum(ledger.value for ledger in present)
        assert totals.present == len(present)
        assert totals.without_ttl == sum(ledger.no_ttl for ledger in present)
        assert totals.truth == sum(ledger.epoch.truth for ledger in oracle.ledgers.values())
        assert totals.overshoot == sum(max(0, epoch.truth - epoch.limit) for epoch in oracle.epochs
                                       if epoch.limit is not None)
        assert totals.live_sessions == sum(session.live for session in oracle.sessions.values())


DAMAGE = ("budget_overshoot_units", "budget_minted_units", "double_debits", "false_refusals",
          "counters_resurrected", "counters_without_ttl", "partial_batches", "counter_resets",
          "counters_kept_past_ttl")


# -- no fault, no damage ---------------------------------------------------------


def test_a_fault_free_session_spends_refunds_and_clears_with_no_damage():
    story = Story().open(1, call(100, 1_000, refund=40), call(100, 1_000))
    story.charge(1, 0, {"tokens": 100}).refund(1, 0, {"tokens": 60})
    story.charge(1, 1, {"tokens": 160}).cleanup(1).oracle.closed(1, story.tick())
    summary = story.summary()
    assert all(summary[metric] == 0 for metric in DAMAGE), {m: summary[m] for m in DAMAGE}
    assert (summary["sessions_closed"], summary["calls_committed"], summary["refunds_sent"],
            summary["spend_attempts"]) == (1, 2, 1, 2)


def test_a_refusal_at_the_limit_is_no_false_refusal():
    story = Story().open(1, call(600, 1_000), call(600, 1_000))
    story.charge(1, 0, {"tokens": 600})
    story.send(1, 1).run(1, {"tokens": 600}).answer(1, 1, "refused", 0)
    summary = story.summary()
    assert summary["false_refusals"] == 0 and summary["calls_refused"] == 1


def replay_blocked() -> Story:
    """A refund re-sent by the driver: its second run finds its marker."""
    story = Story().open(1, call(100, 1_000, refund=50))
    story.charge(1, 0, {"tokens": 100}).refund_sent(1)
    marker = f"{PREFIX}tokens:r:7"
    story.run(1, {"tokens": 50}, marker=marker).fault(1, "reply_lost", "call_retried")
    story.run(1, {"tokens": 50}, marker=marker).fault(1, "duplicate_execution")
    return story.refund_returned(1)


def test_the_replay_marker_blocking_a_driver_resend_is_counted_and_mints_nothing():
    summary = replay_blocked().summary()
    assert summary["refund_replays_blocked"] == 1
    assert summary["budget_minted_units"] == 0


# -- one story per cause -----------------------------------------------------------


def _double_debit_after_a_lost_reply(limit: int = 1_000) -> Story:
    """Attempt 0 ran, its reply was lost; the caller's retry ran again."""
    story = Story().open(1, call(100, limit))
    story.send(1).run(1, {"tokens": 100}).fault(1, "reply_lost", "call_timed_out")
    return story.answer(1, 0, "failed").send(1, 0, 1)


def double_debits_by_reply_lost() -> Story:
    return _double_debit_after_a_lost_reply().run(1, {"tokens": 200}).answer(1)


def double_debits_by_duplicate_execution() -> Story:
    story = Story().open(1, call(100))
    story.send(1).run(1, {"tokens": 100}).fault(1, "reply_lost", "call_retried")
    return story.run(1, {"tokens": 200}).fault(1, "duplicate_execution").answer(1)


def double_debits_by_store_logic() -> Story:
    # The store charged, then answered a failure of its own; the retry charged again.
    story = Story().open(1, call(100))
    story.send(1).run(1, {"tokens": 100}).answer(1, 0, "failed")
    return story.send(1, 0, 1).run(1, {"tokens": 200}).answer(1)


def false_refusals_by_reply_lost() -> Story:
    # Its own hidden charge fills the budget: an exactly-once store would commit.
    return _double_debit_after_a_lost_reply(limit=150).run(1, {"tokens": 100}).answer(
        1, 0, "refused", 0)


def false_refusals_by_duplicate_execution() -> Story:
    story = Story().open(1, call(100, 250), call(100, 250))
    story.send(1).run(1, {"tokens": 100}).fault(1, "call_retried")
    story.run(1, {"tokens": 200}).fault(1, "duplicate_execution").answer(1)
    return story.send(1, 1).run(1, {"tokens": 200}).answer(1, 1, "refused", 0)


def false_refusals_by_misaligned_reply() -> Story:
    story = Story().open(1, call(100, 1_000))
    return story.send(1).fault(1, "misaligned_reply").answer(1, 0, "refused", 0)


def false_refusals_by_refund_lost() -> Story:
    story = Story().open(1, call(100, 150, refund=100), call(100, 150))
    story.charge(1, 0, {"tokens": 100}).refund_sent(1).fault(1, "request_lost", "call_timed_out")
    story.refund_returned(1)
    return story.send(1, 1).run(1, {"tokens": 100}).answer(1, 1, "refused", 0)


def false_refusals_by_cleanup_lost() -> Story:
    # The cleanup's delete was lost: a session recycling the prefix inherits.
    story = Story().open(1, call(100, 150)).charge(1, 0, {"tokens": 100})
    story.cleanup_began(1).fault(1, "request_lost", "call_timed_out").cleanup_ended(1)
    story.open(2, call(100, 150))
    return story.send(2).run(2, {"tokens": 100}).answer(2, 0, "refused", 0)


def false_refusals_by_cleanup_race() -> Story:
    # A call of session 1 charged after its cleanup deleted the counter;
    # session 2, recycling the prefix, finds it.
    story = Story().open(1, call(100, 150)).send(1).cleanup_began(1)
    story.run(1, {"tokens": None}).cleanup_ended(1)
    story.run(1, {"tokens": 100}).answer(1)
    story.open(2, call(100, 150))
    return story.send(2).run(2, {"tokens": 100}).answer(2, 0, "refused", 0)


def false_refusals_by_shared_prefix() -> Story:
    # Session 2's call, sent before session 1 (same prefix) closed the
    # budget, charges after it; session 3 recycling the prefix finds it.
    story = Story().open(1, call(100, 150)).open(2, call(100, 150)).send(2).cleanup_began(1)
    story.run(2, {"tokens": 100}).answer(2)
    story.open(3, call(100, 150))
    return story.send(3).run(3, {"tokens": 100}).answer(3, 0, "refused", 0)


def false_refusals_by_crash() -> Story:
    story = Story().open(1, call(100, 150)).charge(1, 0, {"tokens": 100}).aborted(1)
    story.open(2, call(100, 150))
    return story.send(2).run(2, {"tokens": 100}).answer(2, 0, "refused", 0)


def false_refusals_by_server_data_loss() -> Story:
    story = Story().open(1, call(100, 150, refund=100), call(100, 150))
    story.charge(1, 0, {"tokens": 100}).refund(1, 0, {"tokens": 0})
    story.drop(1, "data_loss", {"tokens": 100})  # a restore of an older, higher count
    return story.send(1, 1).run(1, {"tokens": 100}).answer(1, 1, "refused", 0)


def false_refusals_by_store_logic() -> Story:
    story = Story().open(1, call(100, 1_000))
    return story.send(1).run(1, {}, read=("tokens",)).answer(1, 0, "refused", 0)


def budget_overshoot_units_by_counter_expired() -> Story:
    # A session idle for the whole TTL: its counter expires, as the seed allows.
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    story.tick(TTL_US)
    story.drop(1, "key_expired", {"tokens": None})
    return story.charge(1, 1, {"tokens": 80})


def budget_overshoot_units_by_evicted() -> Story:
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    story.drop(1, "evicted", {"tokens": None})
    return story.charge(1, 1, {"tokens": 80})


def budget_overshoot_units_by_server_data_loss() -> Story:
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    story.drop(1, "data_loss", {"tokens": None})
    return story.charge(1, 1, {"tokens": 80})


def budget_overshoot_units_by_cleanup_race() -> Story:
    # Refused at the limit, cleared by the cleanup, the retry commits.
    story = Story().open(1, call(60, 100), call(60, 100)).charge(1, 0, {"tokens": 60})
    story.send(1, 1).run(1, {"tokens": 60}).answer(1, 1, "refused", 0)
    story.cleanup(1)
    return story.charge(1, 1, {"tokens": 60}, attempt=1)


def budget_overshoot_units_by_shared_prefix() -> Story:
    # Session 1's cleanup clears the counter session 2 (same prefix) spends on.
    story = Story().open(1, call(50, 100)).open(2, call(50, 100), call(50, 100), call(50, 100))
    story.cleanup_began(1)
    story.charge(2, 0, {"tokens": 50})
    story.run(1, {"tokens": None}).cleanup_ended(1)
    return story.charge(2, 1, {"tokens": 50}).charge(2, 2, {"tokens": 100})


def budget_overshoot_units_by_misaligned_reply() -> Story:
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    return story.send(1, 1).fault(1, "misaligned_reply").answer(1, 1)


def budget_overshoot_units_by_store_logic() -> Story:
    # The store charged past its own record's limit.
    story = Story().open(1, call(80, 100), call(80, 100)).charge(1, 0, {"tokens": 80})
    return story.charge(1, 1, {"tokens": 160})


def budget_minted_units_by_store_logic() -> Story:
    # Credited twice with no re-send: the store's own.
    story = Story().open(1, call(100, 1_000, refund=50)).charge(1, 0, {"tokens": 100})
    return story.refund_sent(1).run(1, {"tokens": 50}).run(1, {"tokens": 0}).refund_returned(1)


def _minted_after(how: str, closer: int = 1, refunder: int = 1) -> Story:
    """Session ``refunder``'s charge vanishes (``how``) before its refund
    lands on the counter session 3 (same prefix) re-created."""
    story = Story().open(1, call(100, 1_000, refund=50)).open(2, call(100, 1_000, refund=50))
    story.charge(refunder, 0, {"tokens": 100}).refund_sent(refunder)
    if how == "cleanup":
        story.cleanup_began(closer).run(closer, {"tokens": None}).cleanup_ended(closer)
    else:
        if how == "key_expired":
            story.tick(TTL_US)  # idle for the whole TTL: it may expire
        story.drop(1, how, {"tokens": None})
    story.open(3, call(30, 1_000)).charge(3, 0, {"tokens": 30})
    return story.run(refunder, {"tokens": 0}, marker="fresh").refund_returned(refunder)


def budget_minted_units_by_cleanup_race() -> Story:
    return _minted_after("cleanup")


def budget_minted_units_by_shared_prefix() -> Story:
    return _minted_after("cleanup", closer=2)


def budget_minted_units_by_counter_expired() -> Story:
    return _minted_after("key_expired")


def budget_minted_units_by_evicted() -> Story:
    return _minted_after("evicted")


def budget_minted_units_by_server_data_loss() -> Story:
    return _minted_after("data_loss")


def budget_minted_units_by_misaligned_reply() -> Story:
    story = Story().open(1, call(100, 1_000, refund=50)).open(2, call(100, 1_000))
    story.charge(2, 0, {"tokens": 100})
    story.send(1).fault(1, "misaligned_reply").answer(1).refund_sent(1)
    return story.run(1, {"tokens": 50}, marker="fresh").refund_returned(1)


def counters_resurrected_by_store_logic() -> Story:
    # A refund not gated on EXISTS re-creates the cleared counter, with no TTL.
    story = Story().open(1, call(100, 1_000, refund=50)).charge(1, 0, {"tokens": 100})
    story.cleanup_began(1).run(1, {"tokens": None}).refund_sent(1)
    return story.run(1, {"tokens": 0}, marker="fresh", no_ttl=True).refund_returned(1)


def counters_resurrected_by_cleanup_race() -> Story:
    # The session's last call runs after its cleanup deleted the counter.
    story = Story().open(1, call(100, 1_000), call(100, 1_000)).charge(1, 0, {"tokens": 100})
    story.send(1, 1).cleanup_began(1).run(1, {"tokens": None}).cleanup_ended(1)
    return story.run(1, {"tokens": 100}).answer(1, 1)


def counters_resurrected_by_shared_prefix() -> Story:
    # Session 2's call runs after session 1 (same prefix) cleared the counter.
    story = Story().open(1, call(100, 1_000)).open(2, call(100, 1_000))
    story.charge(1, 0, {"tokens": 100}).send(2)
    story.cleanup_began(1).run(1, {"tokens": None}).cleanup_ended(1)
    return story.run(2, {"tokens": 100}).answer(2)


def counters_resurrected_by_server_data_loss() -> Story:
    story = Story().open(1, call(100, 1_000)).charge(1, 0, {"tokens": 100}).cleanup(1)
    return story.drop(1, "data_loss", {"tokens": 100})


def counters_without_ttl_by_store_logic() -> Story:
    return Story().open(1, call(100)).send(1).run(1, {"tokens": 100}, no_ttl=True).answer(1)


def counters_without_ttl_by_in_memory_twin() -> Story:
    story = Story(per_replica=True).open(1, call(100), source=(0, 0))
    return story.send(1).run(1, {"tokens": 100}, op="spend").answer(1)


def partial_batches_by_store_logic() -> Story:
    # One call over two counters charged on one only; a refund over both
    # credited on one only (a DECRBY that failed mid-script).
    story = Story().open(1, call(100, 1_000, calls=1), call(100, 1_000, calls=1))
    story.send(1).run(1, {"tokens": 100}, read=("calls",)).answer(1)
    story.charge(1, 1, {"tokens": 200, "calls": 1})
    return story


def counter_resets_by_counter_expired() -> Story:
    return budget_overshoot_units_by_counter_expired()


def counter_resets_by_evicted() -> Story:
    return budget_overshoot_units_by_evicted()


def counter_resets_by_server_data_loss() -> Story:
    return budget_overshoot_units_by_server_data_loss()


def counter_resets_by_shared_prefix() -> Story:
    return budget_overshoot_units_by_shared_prefix()


def counter_resets_by_per_replica_ledgers() -> Story:
    story = Story(per_replica=True).open(1, call(100), source=(0, 0))
    story.send(1).run(1, {"tokens": 100}, op="spend").answer(1)
    return story.open(2, call(100), source=(1, 0))


def counter_resets_by_store_logic() -> Story:
    story = Story().open(1, call(100)).charge(1, 0, {"tokens": 100})
    return story.run(1, {"tokens": None}, tag=99)  # a command of no session deleted it


STORIES: dict[str, Callable[[], Story]] = {
    name: story for name, story in globals().items()
    if callable(story) and "_by_" in name and not name.startswith("_")}
"""Each story, by the metric and cause it must move."""

CAUSES = {
    "budget_overshoot_units": causes.OVERSHOOT_CAUSES,
    "budget_minted_units": causes.MINTED_CAUSES,
    "double_debits": causes.DOUBLE_DEBIT_CAUSES,
    "false_refusals": causes.FALSE_REFUSAL_CAUSES,
    "counters_resurrected": causes.RESURRECTION_CAUSES,
    "counters_without_ttl": causes.TTL_CAUSES,
    "partial_batches": causes.PARTIAL_CAUSES,
    "counter_resets": causes.RESET_CAUSES,
}


def test_every_cause_of_every_metric_has_a_story():
    wanted = {f"{metric}_by_{cause}" for metric, names in CAUSES.items() for cause in names}
    assert wanted == set(STORIES)


@pytest.mark.parametrize("name", sorted(STORIES))
def test_each_story_moves_its_metric_under_its_cause_alone(name):
    summary = STORIES[name]().summary()
    metric = name.partition("_by_")[0]
    assert summary[name] > 0
    # The whole of the metric goes to that cause: no other one is blamed.
    assert summary[name] == summary[metric], {
        key: value for key, value in summary.items() if key.startswith(f"{metric}_by_") and value}


# -- exact amounts ------------------------------------------------------------------


def test_a_commit_its_own_record_forbade_is_the_store_s_whole_however_far_the_record_lagged():
    # A restore leaves the record 30 below the truth; the store then charges
    # 60 on a record of 50, past its own limit: a sound store refuses it.
    # (Mutation found it: a check that added where it subtracts was blamed
    # for only the part past its own record, the rest filed under the lag.)
    story = Story().open(1, call(80, 100), call(60, 100)).charge(1, 0, {"tokens": 80})
    story.drop(1, "data_loss", {"tokens": 50}).charge(1, 1, {"tokens": 110})
    summary = story.summary()
    assert summary["budget_overshoot_units"] == 40
    assert summary["budget_overshoot_units_by_store_logic"] == 40
    assert summary["budget_overshoot_units_by_server_data_loss"] == 0
    assert summary["budget_overshoot_max_ratio"] == 0.4
    assert summary["budgets_over_limit"] == 1


def test_a_commit_its_record_allowed_past_the_truth_s_limit_is_the_lag_s():
    # The restore leaves the record 30 below the truth; a charge of 40 fits
    # the record (50 + 40 <= 100) and takes the truth 20 past the limit.
    story = Story().open(1, call(80, 100), call(40, 100)).charge(1, 0, {"tokens": 80})
    story.drop(1, "data_loss", {"tokens": 50}).charge(1, 1, {"tokens": 90})
    summary = story.summary()
    assert summary["budget_overshoot_units"] == 20
    assert summary["budget_overshoot_units_by_server_data_loss"] == 20
    assert summary["budget_overshoot_units_by_store_logic"] == 0


def test_a_refund_lowers_the_truth_so_a_later_commit_is_no_overshoot():
    story = Story().open(1, call(80, 100, refund=50), call(60, 100)).charge(1, 0, {"tokens": 80})
    story.refund(1, 0, {"tokens": 30}).charge(1, 1, {"tokens": 90})
    assert story.summary()["budget_overshoot_units"] == 0


def test_a_double_debit_counts_the_units_charged_again():
    summary = double_debits_by_reply_lost().summary()
    assert (summary["double_debits"], summary["double_debit_units"]) == (1, 100)
    assert summary["calls_committed"] == 1 and summary["spend_attempts_failed"] == 1


def partial_refund() -> Story:
    """A refund over two existing counters credited on one only."""
    both = PlannedCall(0, (Part("tokens", 100, 1_000), Part("calls", 1, 10)), 0,
                       (Part("tokens", 50, 0), Part("calls", 1, 0)))
    story = Story().open(1, both).charge(1, 0, {"tokens": 100, "calls": 1}).refund_sent(1)
    return story.run(1, {"tokens": 50}, marker="fresh", read=("calls",)).refund_returned(1)


def test_a_refund_credited_on_one_existing_counter_and_not_the_other_is_a_partial_batch():
    story = partial_refund()
    summary = story.summary()
    assert (summary["partial_batches"], summary["partial_refunds"]) == (1, 1)
    # What it did not credit stays in the record: the store's, not the lab's.
    assert story.oracle.ledgers[SERVER, PREFIX + "calls"].gap == {"store_logic": 1}


def kept_past_ttl() -> Story:
    """A twin's counter touched again 25 hours after its last touch."""
    story = Story(per_replica=True).open(1, call(100), call(100), source=(0, 0))
    story.send(1).run(1, {"tokens": 100}, op="spend").answer(1)
    story.tick(TTL_US + 3_600_000_000)
    return story.send(1, 1).run(1, {"tokens": 200}, op="spend").answer(1, 1)


def test_the_twin_keeps_a_counter_untouched_past_the_ttl_a_redis_store_would_expire():
    story = kept_past_ttl()
    summary = story.summary(end_us=story.now + 1_000)
    assert summary["counters_kept_past_ttl"] == 1
    assert summary["counter_hours_kept_past_ttl"] == pytest.approx(1.0, abs=1e-3)
    assert summary["counters_without_ttl_by_in_memory_twin"] == 1


def test_a_crash_hides_the_charge_in_flight_and_leaves_the_counter_behind():
    story = Story().open(1, call(100, 150)).send(1).run(1, {"tokens": 100}).aborted(1)
    summary = story.summary()
    assert summary["sessions_aborted_by_crash"] == 1 and summary["sessions_live_at_end"] == 0
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {"crash": 100}


def test_a_fault_while_the_cleanup_races_a_call_is_filed_under_both():
    story = Story().open(1, call(100)).send(1).cleanup_began(1).fault(1, "reply_lost")
    session = story.oracle.sessions[1]
    assert "reply_lost" in session.cleanup_faults
    assert "reply_lost" in session.current.attempts[-1].faults


def test_a_refund_without_a_marker_is_told_apart_from_a_spend_by_the_open_operation():
    story = Story().open(1, call(100, 1_000, refund=40)).charge(1, 0, {"tokens": 100})
    story.refund_sent(1).run(1, {"tokens": 60}).refund_returned(1)
    summary = story.summary()
    assert summary["budget_minted_units"] == summary["double_debits"] == 0
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {}


def marker_without_ttl() -> Story:
    """A refund whose replay marker the store wrote with no expiry."""
    story = Story().open(1, call(100, refund=40)).charge(1, 0, {"tokens": 100}).refund_sent(1)
    marker = KeyChange(story.key(1, "tokens") + ":r:1", 1, no_ttl=True)
    story.oracle.observe(SERVER, story.tick(), 1, "command",
                         [KeyChange(story.key(1, "tokens"), 60), marker])
    return story.refund_returned(1)


def misreported_remaining() -> Story:
    """A commit of 100 of 1 000 tokens whose caller was told 1 000 are left."""
    story = Story().open(1, call(100, 1_000)).send(1).run(1, {"tokens": 100})
    return story.answer(1, remaining=1_000)


def test_a_commit_told_what_its_script_left_is_judged_right_and_any_other_figure_wrong():
    told_right = Story().open(1, call(100, 1_000, calls=1)).send(1)
    told_right.run(1, {"tokens": 100, "calls": 9}).answer(1, remaining=1)
    assert told_right.summary()["remaining_misreported"] == 0  # calls: 10 - 9
    summary = misreported_remaining().summary()
    assert summary["remaining_misreported"] == 1
    assert summary["remaining_misreported_exposed_by"] == "no fault"
    # A reply a fault touched may be another execution's: not judged.
    misaligned = Story().open(1, call(100, 1_000)).send(1).fault(1, "misaligned_reply")
    misaligned.run(1, {"tokens": 100}).answer(1, remaining=1_000)
    assert misaligned.summary()["remaining_misreported"] == 0


def ttl_left(expires_in_us: int, answer: str = "committed") -> Story:
    """A spend whose command left its counter ``expires_in_us`` to live."""
    story = Story().open(1, call(100, 1_000)).send(1)
    story.oracle.observe(SERVER, story.tick(), 1, "command",
                         [KeyChange(story.key(1, "tokens"), 100, expires_in_us=expires_in_us)])
    return story.answer(1, answer=answer)


def test_a_spend_leaves_its_counters_the_whole_ttl_and_any_other_expiry_is_the_store_s():
    assert ttl_left(TTL_US).summary()["ttls_wrong"] == 0
    for expiry in (TTL_US // 2, TTL_US - 1_000_000, TTL_US + 1_000_000):
        summary = ttl_left(expiry).summary()
        assert summary["ttls_wrong"] == 1, expiry
        assert summary["ttls_wrong_exposed_by"] == "no fault"
    # A refund gives every counter it writes the whole TTL too (the seed's
    # shared TTL), and its new replay marker the marker's 5 minutes.
    for counter_left, marker_left, wrong in ((TTL_US, MARKER_TTL_US, 0),
                                             (TTL_US // 2, MARKER_TTL_US, 1),
                                             (TTL_US, MARKER_TTL_US // 2, 1)):
        story = Story().open(1, call(100, 1_000, refund=40)).charge(1, 0, {"tokens": 100})
        story.refund_sent(1)
        story.oracle.observe(SERVER, story.tick(), 1, "command", [
            KeyChange(story.key(1, "tokens"), 60, expires_in_us=counter_left),
            KeyChange(story.key(1, "tokens") + ":r:1", 1, expires_in_us=marker_left)])
        assert story.refund_returned(1).summary()["ttls_wrong"] == wrong


def uncharged(how: str) -> Story:
    """A call charged, its counter then gone (``how``), and only then its
    caller told it committed: the record holds no charge of it."""
    story = Story().open(1, call(100, 1_000)).send(1).run(1, {"tokens": 100})
    return story.drop(1, how, {"tokens": None}).answer(1)


UNCHARGED = {"evicted": "evicted",
             "data_loss": "server_data_loss", "source_lost": "crash"}


@pytest.mark.parametrize("how", sorted(UNCHARGED))
def test_a_commit_whose_charge_vanished_before_its_caller_heard_is_filed_under_why(how):
    summary = uncharged(how).summary()
    assert summary["commits_uncharged"] == 1
    assert summary[f"commits_uncharged_by_{UNCHARGED[how]}"] == 1


def test_a_commit_the_store_never_charged_is_the_store_s():
    story = Story().open(1, call(100, 1_000)).send(1).run(1, {}, read=("tokens",))
    summary = story.answer(1).summary()
    assert summary["commits_uncharged_by_store_logic"] == 1


def test_every_metric_moves_in_some_story():
    failed = Story().open(1, call(100)).send(1).fault(1, "call_timed_out").answer(1, 0, "failed")
    rejected = Story().open(1, call(100)).send(1).answer(1, 0, "rejected")
    closed = Story().open(1, call(100)).charge(1, 0, {"tokens": 100}).cleanup(1)
    closed.oracle.closed(1, closed.tick())
    stories = [failed, rejected, closed, replay_blocked(), kept_past_ttl(), partial_refund(),
               tally_added(), tally_failed(), tally_refused(), whole_refund(),
               marker_without_ttl(), misreported_remaining(), ttl_left(TTL_US // 2),
               *(uncharged(how) for how in UNCHARGED),
               *(story() for story in STORIES.values())]
    moved = {name for story in stories for name, value in story.summary().items() if value}
    assert set(failed.summary()) - moved == set()


# -- tallies (add) and whole refunds ------------------------------------------------


def tallied(tokens: int = 100, refund: int = 0) -> PlannedCall:
    """A call spending ``tokens`` that adds 1 to its session's ``tool_calls``."""
    plain = call(tokens, refund=refund)
    return PlannedCall(0, plain.spends, 0, plain.refunds, Part("tool_calls", 1, 0))


def tally_added() -> Story:
    story = Story().open(1, tallied()).charge(1, 0, {"tokens": 100}).tally_sent(1)
    return story.run(1, {"tool_calls": 1}).tally_answered(1)


def tally_failed() -> Story:
    """The tally's add ran, but its reply was lost: the caller was told it failed."""
    story = Story().open(1, tallied()).charge(1, 0, {"tokens": 100}).tally_sent(1)
    return story.run(1, {"tool_calls": 1}).fault(1, "reply_lost").tally_answered(1, 0, "failed")


def tally_refused() -> Story:
    """The store refused an add far below its bound, charging nothing."""
    story = Story().open(1, tallied()).charge(1, 0, {"tokens": 100}).tally_sent(1)
    return story.run(1, {}, read=("tool_calls",)).tally_answered(1, 0, "refused")


def test_a_tally_counts_one_per_committed_call_with_no_damage_and_no_spend_counted():
    story = Story().open(1, tallied(refund=40), tallied())
    for index, (tokens, count) in enumerate([(100, 1), (160, 2)]):
        story.charge(1, index, {"tokens": tokens}).tally_sent(1, index)
        story.run(1, {"tool_calls": count}).tally_answered(1, index)
        if not index:
            # The refund after the tally is still its call's.
            story.refund(1, 0, {"tokens": 60})
    story.cleanup(1, "tokens", "tool_calls").oracle.closed(1, story.tick())
    summary = story.summary()
    assert all(summary[metric] == 0 for metric in DAMAGE), {m: summary[m] for m in DAMAGE}
    assert (summary["tallies_sent"], summary["tallies_added"], summary["spend_attempts"],
            summary["calls_committed"]) == (2, 2, 2, 2)
    assert summary["counters_total"] == 2


def test_a_tally_whose_reply_was_lost_is_in_the_record_under_the_lost_reply():
    story = tally_failed()
    summary = story.summary()
    assert summary["tallies_failed"] == 1 and summary["double_debits"] == 0
    assert story.oracle.ledgers[SERVER, PREFIX + "tool_calls"].gap == {"reply_lost": 1}
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {}


def test_a_tally_refused_below_the_stores_bound_is_the_stores_false_refusal():
    summary = tally_refused().summary()
    assert summary["tallies_refused"] == 1
    assert summary["false_refusals"] == summary["false_refusals_by_store_logic"] == 1


def test_a_tally_left_without_a_ttl_is_the_stores():
    story = Story().open(1, tallied()).charge(1, 0, {"tokens": 100}).tally_sent(1)
    summary = story.run(1, {"tool_calls": 1}, no_ttl=True).tally_answered(1).summary()
    assert summary["counters_without_ttl"] == summary["counters_without_ttl_by_store_logic"] == 1


def test_a_crash_during_the_tally_hides_its_count():
    story = Story().open(1, tallied()).charge(1, 0, {"tokens": 100}).tally_sent(1)
    story.run(1, {"tool_calls": 1}).aborted(1)
    assert story.oracle.ledgers[SERVER, PREFIX + "tool_calls"].gap == {"crash": 1}


def whole(tokens: int = 100) -> PlannedCall:
    """A call spending ``tokens`` and giving everything back (the "all" amount)."""
    return PlannedCall(0, (Part("tokens", tokens, 1_000),), 0, (Part("tokens", WHOLE, 0),))


def whole_refund() -> Story:
    story = Story().open(1, whole()).charge(1, 0, {"tokens": 100})
    return story.refund(1, 0, {"tokens": 0})


def test_a_whole_refund_clamps_the_truth_at_zero_as_the_store_clamps_the_record():
    story = whole_refund()
    summary = story.summary()
    ledger = story.oracle.ledgers[SERVER, PREFIX + "tokens"]
    assert (ledger.value, ledger.epoch.truth, dict(ledger.gap)) == (0, 0, {})
    assert summary["refunds_whole"] == 1 and summary["budget_minted_units"] == 0


def test_a_whole_refund_closes_a_double_debit_instead_of_minting_it():
    story = Story().open(1, whole())
    story.send(1).run(1, {"tokens": 100}).fault(1, "reply_lost").answer(1, 0, "failed")
    story.send(1, 0, 1).run(1, {"tokens": 200}).answer(1)
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {"reply_lost": 100}
    story.refund(1, 0, {"tokens": 0})
    summary = story.summary()
    assert summary["double_debits"] == 1 and summary["budget_minted_units"] == 0
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {}


def test_a_whole_refund_on_a_record_short_of_the_truth_leaves_nothing_to_the_store():
    # Call 0's counter expired under the live session; call 1 re-created it.
    story = Story().open(1, whole(100), whole(50)).charge(1, 0, {"tokens": 100})
    story.tick(TTL_US)  # idle for the whole TTL
    story.drop(1, "key_expired", {"tokens": None}).charge(1, 1, {"tokens": 50})
    story.refund(1, 1, {"tokens": 0})
    summary = story.summary()
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {}
    assert blamed(summary) == {}


def blamed(summary: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in summary.items()
            if name.endswith("_by_store_logic") and value}


def test_a_refund_crediting_what_another_sessions_whole_refund_took_off_the_truth_mints_nothing():
    # Two sessions of one prefix; session 2 gives everything back, but its
    # refund is lost on the way. Session 1's refund, sent meanwhile, finds
    # the truth already at zero: its credit is the share the whole refund
    # took off the truth, and what is left uncredited is the lost refund's.
    story = Story().open(1, call(100, refund=40)).open(2, whole(50))
    story.charge(1, 0, {"tokens": 100}).charge(2, 0, {"tokens": 150}).refund_sent(2)
    story.refund(1, 0, {"tokens": 110})
    story.fault(2, "request_lost").refund_returned(2)
    summary = story.summary()
    assert summary["budget_minted_units"] == 0
    assert story.oracle.ledgers[SERVER, PREFIX + "tokens"].gap == {"refund_lost": 110}
