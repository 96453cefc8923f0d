"""The session-counter family's causes: whom the verdict may blame for each kind of damage.

Every cause but ``store_logic`` names something the lab itself did or
decided (DESIGN "Who is to blame"): a message it lost, timed out,
misaligned or duplicated (``simulator.net.links.MESSAGE_FAULTS``), a crash,
a counter's TTL running out in virtual time, an eviction, a restore under a
persistence model, and two decisions of the workload: clearing a session's
counters while one of its calls still runs (``cleanup_after``), and sessions
sharing one prefix (``prefix_from = "subject"``). Running the in-memory twin
(per-replica, never-expiring counters) is a decision of the lab's too. What
nothing the lab did explains is the store's own.
"""

from __future__ import annotations

from simulator.net.links import CALLER_MAY_NOT_KNOW
from simulator.plugin.attribution import STORE_LOGIC

DUPLICATES = frozenset({"call_retried", "duplicate_execution"})
"""Message faults after which one command may have run twice: the driver re-sent it."""

HIDDEN = CALLER_MAY_NOT_KNOW
"""Message faults after which a caller may not learn what its call did
(``simulator.net.links``)."""

VANISHED = {"key_expired": "counter_expired", "evicted": "evicted",
            "data_loss": "server_data_loss", "source_lost": "crash"}
"""How a counter vanished (or changed) without a command, as the cause it
files damage under: its TTL ran out in virtual time, the server evicted it,
a restore brought back older data, the replica holding it crashed."""

CLEANUP_RACE = "cleanup_race"
"""A session's counters were cleared while one of its calls still ran (the
workload clears them at the session's end, racing its last call)."""

SHARED_PREFIX = "shared_prefix"
"""Another session of the same prefix cleared the counters, or charged them
after this one's budget was closed (sessions recycling a prefix)."""

PER_REPLICA = "per_replica_ledgers"
"""The in-memory twin keeps a session's counters in one replica: a session
of the same prefix on another replica starts from nothing."""

IN_MEMORY_TWIN = "in_memory_twin"
"""The in-memory twin's counters never expire: its stated divergence."""

OVERSHOOT_CAUSES = ("counter_expired", "evicted", "server_data_loss", CLEANUP_RACE,
                    SHARED_PREFIX, "misaligned_reply", STORE_LOGIC)
"""Why the record held less than the callers' true spend, so that the store
committed past the limit: the counter vanished (expired while its session
lived, evicted, lost in a restore, cleared by a cleanup racing a call or by
another session of the prefix); the caller took another command's reply for
a commit. What the store committed past its own record is ``store_logic``,
and so is a lag the store made itself: a refund credited again on a
re-send (the contract: a refund is one-shot), a counter expired while its
session still called it (the contract: every call refreshes the TTL)."""

MINTED_CAUSES = (CLEANUP_RACE, SHARED_PREFIX, "counter_expired",
                 "evicted", "server_data_loss", "misaligned_reply", STORE_LOGIC)
"""Why a refund credited what its call had not debited on that counter: the
debit it gives back had been cleared
(by the session's own cleanup racing it, another session's, its TTL, an
eviction, a restore) and the counter re-created since; its call was never
charged (a misaligned reply). Anything else is the store's own credit, a
refund the driver re-sent crediting twice included: the seed's replay
marker makes every refund one-shot (``contract``)."""

DOUBLE_DEBIT_CAUSES = ("duplicate_execution", "reply_lost", STORE_LOGIC)
"""Why one call's spend was charged more than once: the driver re-sent a
command that had run (``duplicate_execution``), or the caller retried after
the lab hid an attempt that had run (a lost reply, a timeout, a reset...:
``reply_lost``). A store that charged and still answered a failure, with no
fault of the lab's, is ``store_logic``."""

FALSE_REFUSAL_CAUSES = ("duplicate_execution", "reply_lost", "misaligned_reply", "refund_lost",
                        "cleanup_lost", CLEANUP_RACE, SHARED_PREFIX, "crash",
                        "server_data_loss", STORE_LOGIC)
"""Why the store refused a call an exactly-once limiter would have committed:
charges of calls hidden from their callers (double debits), another
command's reply, refunds the lab lost, a cleanup the lab lost (a recycled
prefix inherits the counters), charges that landed after a cleanup, a crash
that left a session's counters behind, a restore of older, higher counts;
or the store's own decision."""

RESURRECTION_CAUSES = (CLEANUP_RACE, SHARED_PREFIX, "server_data_loss", STORE_LOGIC)
"""Why a counter came back after a cleanup removed it: a call of the cleared
session (or of another one of the prefix) charged it after the cleanup; a
restore brought it back. A refund never may re-create a counter: when one
does, it is the store's."""

RESET_CAUSES = ("counter_expired", "evicted", "server_data_loss", SHARED_PREFIX, PER_REPLICA,
                STORE_LOGIC)
"""Why a live session's counter vanished: its TTL ran out in virtual time,
the server evicted it, a restore lost it, another session of the prefix
cleared it, the in-memory twin kept it in another replica; a command of no
cleanup deleting it is the store's."""

UNCHARGED_CAUSES = ("evicted", "server_data_loss", "crash", "misaligned_reply", STORE_LOGIC)
"""Why a call its caller was told committed (or added) has no charge in the
record: the counter holding it vanished since (evicted, lost in a restore
or with the replica holding it; an expiry or a cleanup closes the budget,
which is then no longer judged), or the caller took another command's reply for a
commit. A store that answered a commit it never charged is ``store_logic``."""

TTL_CAUSES = (IN_MEMORY_TWIN, STORE_LOGIC)
"""Why a counter has no expiry: the in-memory twin's counters never have
one; a Redis store that leaves a counter without its TTL does so itself."""

PARTIAL_CAUSES = (STORE_LOGIC,)
"""One script cannot be split by anything the lab does: a batch charged or
refunded on some of its counters and not the others is the store's."""
