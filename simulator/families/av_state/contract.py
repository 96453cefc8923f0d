"""The session-counter family's fault contract: what a *sound* av_state
store may suffer from each thing the lab does (DESIGN section 12), from the
seed (``004_3d0b2b7832cd8f83.txt``, av_state's ``redis_store.rs``).

Each clause names the cause the oracle files the allowed damage under; the
oracle (``oracle``) files what a clause does not allow under ``store_logic``,
exposed by the fault that made it show (``exposing``). The rules it reads
off these clauses:

* a spend or a tally is not idempotent, on purpose: a re-send double-debits
  (``duplicate_execution``), a retry after a hidden reply double-debits
  (``reply_lost``); never a partial batch, never minted budget;
* a refund is one-shot (its replay marker): a re-sent refund credits
  nothing, so minted budget from a re-send is the store's; a lost refund
  request leaves the call over-charged (``refund_lost``), a lost reply
  nothing at all;
* every command a session sends on a counter leaves it the 24 h TTL,
  refused ones included: a counter expires only after a day unused
  (``counter_expired``); one that expires while its session still calls it
  is the store's;
* no path leaves a counter, or a refund marker, without its TTL;
* no refund re-creates a cleared counter; nothing the lab does splits a script.
"""

from __future__ import annotations

from simulator.plugin.contracts import Clause, Contract

SEED = "004_3d0b2b7832cd8f83.txt"


def lines(first: int, last: int | None = None) -> str:
    """A citation of the seed's lines ``first`` to ``last``."""
    return f"{SEED}:{first}" if last is None else f"{SEED}:{first}-{last}"


COUNTER_TTL = lines(16, 24)
MARKER_TTL = lines(26, 29)
REFUSAL_REFRESH = lines(40, 48)
ADD_TTL = lines(107, 111)
REFUND_GATE_AND_MARKER = lines(135, 152)
REFUND_MANY_ATOMIC = lines(173, 185)
EVAL_UNCERTAINTY = lines(212, 224)
REMOVE_BEST_EFFORT = lines(513, 518)
REFUND_BEST_EFFORT = lines(550, 575)
SESSION_RECYCLING = lines(698, 707)
CLEANUP_BEST_EFFORT = lines(792, 797)
IN_MEMORY_DIVERGENCE = lines(19, 22)

NEVER_SPEND = ("minted budget, a partial batch, a charge its caller was told "
               "was refused, a counter left without its TTL")

CONTRACT = Contract(family="av_state", clauses=(
    Clause("lost a try_spend or add request (request_lost, connect_failed, call_refused)",
           "reply_lost",
           "nothing: the script never ran; the caller sees a failure and may retry",
           NEVER_SPEND, (EVAL_UNCERTAINTY,)),
    Clause("lost or withheld a try_spend or add reply (reply_lost, call_timed_out, "
           "connection_stalled, connection_reset, waiter_dropped, reply_to_dead_replica)",
           "reply_lost",
           "the charge counted though its caller does not know; a retry with the same "
           "intent charges it again (a double debit), and the refusals that causes",
           NEVER_SPEND + ", a charge of another amount than asked",
           (EVAL_UNCERTAINTY, REFUND_GATE_AND_MARKER)),
    Clause("re-sent a try_spend or add that had run (call_retried, duplicate_execution)",
           "duplicate_execution",
           "the call charged twice (spends carry no marker: their replay fails "
           "conservative), and the refusals that causes",
           NEVER_SPEND, (REFUND_GATE_AND_MARKER, EVAL_UNCERTAINTY)),
    Clause("handed a caller another command's reply (misaligned_reply)",
           "misaligned_reply",
           "a call told committed that was never charged (the overshoot and the "
           "refund crediting nothing they bring), or refused wrongly",
           "minted budget beyond what the misread call's refund gives back",
           (EVAL_UNCERTAINTY,)),
    Clause("lost a refund request (request_lost, call_timed_out before it ran, connect_failed)",
           "refund_lost",
           "the call stays over-charged until the 24 h TTL or another refund: the "
           "false refusals that causes",
           "minted budget, a re-created counter", (REFUND_BEST_EFFORT,)),
    Clause("lost a refund reply, or re-sent a refund (reply_lost, call_retried, "
           "duplicate_execution)",
           "store_logic",
           "nothing beyond the caller not knowing: the replay marker makes the "
           "refund one-shot",
           "budget credited twice (minted)", (REFUND_GATE_AND_MARKER, MARKER_TTL)),
    Clause("ran a refund after its session's cleanup (a cleanup racing a call, "
           "cleanup_after)",
           "cleanup_race",
           "a budget closed while a call still ran: its late charge, the overshoot "
           "of the closed budget and a resurrected counter (with its TTL) from a spend",
           "a refund re-creating the cleared counter, a counter left without TTL",
           (REFUND_GATE_AND_MARKER, REFUND_BEST_EFFORT)),
    Clause("lost a cleanup's SCAN or DEL (request_lost, reply_lost on remove_prefix)",
           "cleanup_lost",
           "the session's counters left behind until their TTL: a recycled prefix "
           "inherits them (false refusals)",
           "a counter left without its TTL", (CLEANUP_BEST_EFFORT, REMOVE_BEST_EFFORT,
                                              SESSION_RECYCLING)),
    Clause("recycled a session prefix (prefix_from = subject)",
           "shared_prefix",
           "another session's cleanup clears the counters, or its charges land on "
           "them: resets, overshoot, false refusals, minted credit of a cleared charge",
           NEVER_SPEND, (SESSION_RECYCLING,)),
    Clause("crashed a replica (crash)",
           "crash",
           "what it had in flight hidden for good; its sessions' counters left "
           "behind until their TTL",
           NEVER_SPEND, (COUNTER_TTL,)),
    Clause("paused a replica or partitioned it from the server (pause, partition)",
           "reply_lost",
           "its calls time out: as a lost reply (or request)",
           NEVER_SPEND, (EVAL_UNCERTAINTY,)),
    Clause("restarted the server or failed it over, under a persistence model "
           "(server_restart, failover)",
           "server_data_loss",
           "counters lost or rolled back to what was persisted: resets, overshoot, "
           "false refusals of older, higher counts",
           "a counter left without its TTL", (COUNTER_TTL,)),
    Clause("evicted a counter (maxmemory)",
           "evicted",
           "the counter gone: its session's budget reset, the overshoot it allows",
           "a counter left without its TTL", (COUNTER_TTL,)),
    Clause("let a counter's TTL run out in virtual time (key_expired)",
           "counter_expired",
           "a counter its sessions left unused for 24 h expires: the budget of a "
           "session idle that long resets",
           "a counter expiring while its session still calls it, refused calls "
           "included", (COUNTER_TTL, REFUSAL_REFRESH, ADD_TTL)),
    Clause("let a refund marker's TTL run out (key_expired)",
           "store_logic",
           "nothing: the marker outlives the driver's retry window",
           "a marker written without its 5-minute expiry", (MARKER_TTL,)),
    Clause("ran the in-memory twin (av_state.in_memory)",
           "in_memory_twin",
           "counters that never expire",
           "anything else a Redis store may not suffer", (IN_MEMORY_DIVERGENCE,)),
    Clause("ran the in-memory twin on a fleet (one process's counters per replica)",
           "per_replica_ledgers",
           "a session of the prefix on another replica starts from nothing: its "
           "counters read as reset", "anything else a Redis store may not suffer",
           (IN_MEMORY_DIVERGENCE, SESSION_RECYCLING)),
    Clause("nothing at all (no fault, no race)",
           "store_logic",
           "nothing", "any damage", (lines(8, 9), REFUND_MANY_ATOMIC)),
))
"""Every clause, in the order ``docs/contracts/av_state.md`` lists them."""
