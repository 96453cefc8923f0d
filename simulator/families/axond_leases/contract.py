"""The lease family's fault contract: what a *sound* lease store may suffer
from each thing the lab does (DESIGN section 12), from the seed
(``002_348438d99c360737.txt``, axond 0.3.8's ``RedisRateLimiter``).

The oracle reads it as rules (``leaks.leak_cause``, ``oracle.LeaseOracle``):
damage inside a clause is filed under the clause's cause; damage beyond
every clause is ``store_logic``, *exposed by* the fault that made it show.
What the seed asks of a sound store, in short:

* whoever cannot own a lease gives it back: an acquire its caller abandoned
  (timed out, cancelled), whose outcome is ambiguous (an error, the invoke's
  deadline), that came on an untrusted generation or echoed another lease
  id, is *compensated* with a release;
* a release (and a compensation) that fails is retried with backoff on
  fresh connections, within the retry window and never past the lease TTL;
* a reply is this acquire's only if it echoes this acquire's lease id and
  came on a trusted generation: a misaligned reply is never a grant nor a
  refusal;
* an acquire invoke's liveness budget is longer than the caller's wait: only
  a connection that really failed (a reply lost, stalled, reset, misaligned,
  or later than that budget) is retired, and every reply read off a retired
  generation is unavailable, a refusal as much as a grant;
* lease ids are unique fleet-wide, so no replica overwrites another's lease;
* a dead replica's lease blocks a slot for at most its TTL (the script
  reclaims expired leases before counting).
"""

from __future__ import annotations

from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import Clause, Contract

SEED = "002_348438d99c360737.txt"


def lines(first: int, last: int | None = None) -> str:
    """A citation of the seed: ``<seed>:<first>-<last>``."""
    return f"{SEED}:{first}" if last is None else f"{SEED}:{first}-{last}"


COMPENSATION = lines(522, 558)
"""The owned invoke compensates what nobody will own (ambiguous, abandoned, mismatched)."""
CALLER_WAIT = lines(560, 601)
"""The caller's wait: a timed-out caller compensates a grant it will not hand out."""
ECHO_CHECK = lines(101, 124)
"""``result_has_mismatched_lease_id`` / ``mark_mismatched_result``."""
RELEASE_RETRIES = lines(142, 258)
"""``RedisRelease::spawn``: one shared attempt, then retries on fresh connections."""
RELEASE_REPLY = lines(46)
"""The release script returns ``1``: its reply echoes nothing."""
RECLAIM = lines(28, 36)
"""The acquire script drops expired leases before counting them."""
LIVENESS = (lines(65, 69), lines(517, 520), lines(1514, 1545))
"""The owned invoke's liveness budget, longer than the caller's wait: a
merely slow reply does not retire a healthy generation."""
UNTRUSTED_REPLY = (lines(620, 623), lines(1555, 1595))
"""A reply read off an untrusted generation is unavailable, a refusal as much as a grant."""

CONTRACT = Contract(
    family="axond_leases",
    clauses=(
        Clause("lost an acquire request (request_lost on acquire)", "abandoned_acquire",
               "nothing: the script never ran, no lease was written; the caller is "
               "unavailable (fail-closed denial or fail-open admission)",
               "a lease written for it", (COMPENSATION, CALLER_WAIT)),
        Clause("lost, slowed or timed out an acquire reply (reply_lost, slow_reply, "
               "call_timed_out, late_reply, waiter_dropped on acquire)", "abandoned_acquire",
               "its lease held until the compensating release lands (or, if every "
               "attempt of it fails, its TTL), and the denials those held slots cause",
               "a lease never compensated: no release sent for it, or one failed and "
               "never retried (store_logic, exposed by this fault on acquire)",
               (COMPENSATION, CALLER_WAIT, lines(305, 336))),
        Clause("stalled or reset the shared connection under an acquire "
               "(connection_stalled, connection_reset)", "abandoned_acquire",
               "as a lost reply: the invoke's liveness deadline retires the generation and "
               "the ambiguous outcome is compensated",
               "a lease never compensated; a reply read off the retired generation acted on",
               (lines(59, 93), COMPENSATION)),
        Clause("cancelled a caller while its acquire was in flight (caller_cancelled on "
               "acquire: its client's workload.patience ran out)", "abandoned_acquire",
               "its lease held until the compensating release lands: the invoke runs on in "
               "its own task, finds nobody listening and gives back what it wrote; the "
               "shared connection kept",
               "a lease never compensated (store_logic, exposed by caller_cancelled on "
               "acquire)", (lines(65, 69), lines(522, 526), lines(1689, 1727),
                            lines(1730, 1761))),
        Clause("delivered another command's reply to an acquire (misaligned_reply on acquire)",
               "abandoned_acquire",
               "its own lease held until compensated; the caller unavailable",
               "a caller admitted on another's grant or refused on another's refusal "
               "(misaligned_results_accepted, false denials and excess: store_logic)",
               (ECHO_CHECK, lines(568, 575), lines(614, 618))),
        Clause("failed a fresh connection (connect_failed, call_refused)", "release_lost",
               "that attempt lost; the next attempt retries",
               "a release given up after one failed connect", (lines(223, 241),)),
        Clause("lost a release request or reply, or timed it out (request_lost, reply_lost, "
               "call_timed_out, connection_stalled, connection_reset on release)",
               "release_lost",
               "the lease counted until a retry on a fresh connection lands (within the "
               "retry window, never past the TTL)",
               "a failed release never retried (store_logic, exposed by this fault on release)",
               (RELEASE_RETRIES,)),
        Clause("failed every attempt of a release (release attempts failing, a server down)",
               "release_gave_up",
               "the lease counted until its TTL once the retry window is spent",
               "a release that stopped before the window or the attempts ran out",
               (lines(208, 257), lines(284, 291))),
        Clause("delivered another release's reply to a release (misaligned_reply on release)",
               "release_lost",
               "the release taken for done: the lease counted until its TTL (the release "
               "script's reply is an integer and echoes nothing to check)",
               "an acquire's reply (a pair) taken for a release's success: that attempt "
               "failed, and must be retried",
               (RELEASE_REPLY, lines(186, 195), lines(251, 253), lines(261, 273))),
        Clause("re-sent a command (call_retried, duplicate_execution)", "duplicate_execution",
               "a driver retry of the acquire counting the request's own first lease "
               "(one false denial); the lease the second run wrote, compensated",
               "a lease of the request never given back", (COMPENSATION,)),
        Clause("crashed or paused a replica (crash, pause)", "crash",
               "the leases of its in-flight callers, and of the releases and compensations "
               "it had spawned, held until their TTL (reclaimed by the next acquire)",
               "a lease of a live caller removed; a lease past its TTL still counted",
               (RECLAIM,)),
        Clause("restarted the server without persistence, or failed over to a lagging "
               "replica (server_restart, failover)", "server_data_loss",
               "leases lost (callers holding uncounted) or released leases brought back",
               "a lease of a live caller removed by a command", (RECLAIM,)),
        Clause("evicted a lease hash (maxmemory)", "evicted",
               "the leases in it lost while their callers hold", "nothing else", (lines(42),)),
        Clause("ran a lease past its configured TTL (lease_ttl shorter than the work)",
               "lease_expired_while_held",
               "the lease reclaimed at or after its honest deadline (the writer's clock at "
               "arrival plus the TTL) while its caller runs",
               "a deadline written short of the TTL; a live lease reclaimed before it",
               (lines(24, 42), RECLAIM)),
        Clause("configured fail-open (on_unavailable = allow) and made the store unavailable",
               "fail_open",
               "callers admitted unenforced while the store cannot answer",
               "an admission with no lease written that the policy did not decide",
               (lines(447, 461),)),
        Clause("slowed a reply on the shared connection past the caller's wait, within the "
               "invoke's liveness budget (slow_reply on acquire)", "fail_open",
               "the slowed callers unavailable (fail-open: admitted unenforced); the "
               "connection kept, the replies behind consumed on it",
               "the generation retired before the seed's liveness budget (at least twice "
               "the caller's timeout) with nothing failed on it, and the callers whose "
               "replies it then distrusts admitted unenforced (excess: store_logic, exposed "
               "by the first fault on that generation)", LIVENESS),
        Clause("made the store retire a generation (a reply lost, stalled, reset, misaligned "
               "or slowed past the liveness budget) while acquires were in flight on it",
               "fail_open",
               "the replies still owed on it unavailable: fail-closed denials, or fail-open "
               "admissions",
               "a refusal read off the retired generation answered as exceeded (false "
               "denials: store_logic, exposed by the first fault on that generation)",
               UNTRUSTED_REPLY),
        Clause("configured fail-closed (on_unavailable = deny) and made the store unavailable",
               STORE_LOGIC,
               "nothing counted as damage: the fail-closed denials are the policy "
               "(``fail_closed_denials``), never false denials", "nothing",
               (lines(447, 461),)),
        Clause("ran callers of one key on several replicas (replicas_sharing_key)", STORE_LOGIC,
               "nothing: lease ids are unique fleet-wide",
               "a replica's acquire or release overwriting or removing another's live "
               "lease (excess: store_logic, exposed by replicas_sharing_key)",
               (lines(644, 671),)),
        Clause("refused a caller at the limit (exceeded) with no fault", STORE_LOGIC,
               "nothing: a refused acquire writes no lease",
               "a refused caller's lease left counted (store_logic from the refusal on: "
               "judged from whether its compensating release ran, not from a timeout)",
               (lines(37, 40), lines(628, 631))),
        Clause("changed max_in_flight as an operator, rolled out replica by replica "
               "(reconfigure)", "config_change",
               "callers holding past the lowest limit in force, admitted under the higher "
               "limit their own replica ran with (a limit lowered under callers already "
               "holding; old and new limits serving side by side)",
               "a caller admitted past the limit its own replica ran with, a refusal its own "
               "limit had room for (store_logic, exposed by config_change on reconfigure)",
               (lines(24, 41), lines(514, 535))),
        Clause("changed the lease TTL as an operator (reconfigure)", "lease_expired_while_held",
               "a held lease expired at the deadline its own replica's TTL gave it",
               "a lease written with a deadline short of its own replica's TTL",
               (lines(514, 535), lines(37, 41))),
    ),
)
