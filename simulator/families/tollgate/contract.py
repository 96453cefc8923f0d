"""The tollgate family's fault contract: what a *sound* ledger and holder may
suffer from each thing the lab does (DESIGN section 12), from seed 003.

Each clause names the cause the oracle files the allowed damage under; damage
no clause allows is ``store_logic``, named with the fault that exposed it
(``store_logic, exposed by reply_lost on consolidate``). The invariants
``causes.STORE_ONLY`` lists are damage no clause allows at all: a sound
ledger keeps its equation, bills each event once, funds no spend past its
deposits, refuses a stale capability, honours its grace and never re-grants
less than the credit an exchange restores, whatever the network does.

Seed lines are ``003_fa119f058ec0ffc5.txt:<first>-<last>`` under
``../shared/seeds/``.
"""

from __future__ import annotations

from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import Clause, Contract

SEED = "003_fa119f058ec0ffc5.txt"


def _at(lines: str) -> str:
    return f"{SEED}:{lines}"


NEVER_ANYWHERE = ("a conservation violation, a double bill, an overspend, a stale capability "
                  "accepted, a release within the grace forfeited, a re-grant below the "
                  "credit restored or below a refused quote the restored balance funds")
"""What no clause ever allows: the damage ``STORE_ONLY`` lists."""

CLAUSES = (
    Clause(
        lab_did="lost an acquire reply, timed it out, or lost its caller (ran, unanswered)",
        cause="ambiguous_acquire",
        may_suffer="the granted lease sits with no holder until the TTL reclaim (plus the "
                   "grace) records its units as provisional settlement loss "
                   "(units_stranded); the spend that asked is refused",
        never="a second grant for the one answer the holder read, any spend or billing of "
              "the stranded lease; " + NEVER_ANYWHERE,
        seed=(_at("474-486"), _at("543-549"), _at("566-576")),
    ),
    Clause(
        lab_did="lost a consolidate reply, timed it out, or lost its caller (ran, unanswered)",
        cause="ambiguous_consolidate",
        may_suffer="the replacement lease sits with no holder until the TTL reclaim "
                   "(units_stranded); the old lease is taken out of service and its release "
                   "refused as not active; the spend that asked is refused",
        never="the old lease spent again (its usage refused unbilled), the old credit "
              "restored twice; " + NEVER_ANYWHERE,
        seed=(_at("500-515"), _at("540-549")),
    ),
    Clause(
        lab_did="lost a request, refused a connection or failed to open one (never ran)",
        cause=STORE_LOGIC,
        may_suffer="nothing beyond the refused spend: the transaction never ran, and the "
                   "holder treats it as ambiguous (a release or batch is tried again)",
        never="any damage on an invariant",
        seed=(_at("18-20"), _at("543-549"), _at("1339-1360")),
    ),
    Clause(
        lab_did="lost a release reply or timed a release out",
        cause=STORE_LOGIC,
        may_suffer="nothing: the holder tries the release again and is told the lease is "
                   "no longer active; after release_attempts failures in transit the lease "
                   "is left to the reclaim (settlement loss the truth records, not an "
                   "invariant's damage)",
        never="the unspent credited twice, a release within the grace refused; "
              + NEVER_ANYWHERE,
        seed=(_at("488-499"), _at("264-270")),
    ),
    Clause(
        lab_did="lost an ingest request or reply, or timed it out",
        cause="unbilled_at_end",
        may_suffer="the batch is re-sent unchanged until the ledger answers; only usage the "
                   "ledger never received by the end of the run is unbilled",
        never="an event billed twice, usage the ledger received left unbilled, a holder "
              "dropping a batch it could not deliver while later ones arrive",
        seed=(_at("1199-1209"), _at("1239-1254"), _at("1339-1360")),
    ),
    Clause(
        lab_did="re-sent a command (driver retry) or executed it twice",
        cause="ambiguous_acquire",
        may_suffer="a re-sent acquire grants twice and the grant the holder did not read is "
                   "stranded until reclaim; a re-sent release, consolidation or batch "
                   "changes nothing (not active; duplicates)",
        never="a lease consolidated or released twice, an event billed twice, a credit "
              "restored twice; " + NEVER_ANYWHERE,
        seed=(_at("488-499"), _at("540-542"), _at("1199-1202")),
    ),
    Clause(
        lab_did="stalled or reset a connection, dropped a waiter, slowed or misaligned a reply",
        cause="ambiguous_acquire",
        may_suffer="as a lost reply of the call it hit: a grant the holder never read is "
                   "stranded (ambiguous_acquire / ambiguous_consolidate), a release or batch "
                   "is tried again",
        never=NEVER_ANYWHERE,
        seed=(_at("543-549"), _at("1339-1360")),
    ),
    Clause(
        lab_did="crashed a holder",
        cause="holder_crashed",
        may_suffer="the usage it had not sent is never billed (billing_loss_units); its "
                   "leases and any grant in flight sit until the TTL reclaim "
                   "(units_stranded), their units provisional settlement loss",
        never="usage that reached the ledger left unbilled; " + NEVER_ANYWHERE,
        seed=(_at("376-383"), _at("566-576")),
    ),
    Clause(
        lab_did="paused a holder or partitioned it from the ledger",
        cause=STORE_LOGIC,
        may_suffer="its release and usage arrive late: within the grace they are accepted; "
                   "past it the release is refused as not active and its units are "
                   "settlement loss the truth records; late usage fits the loss and is billed",
        never="a release within the grace refused or forfeited, a stale holder told its "
              "release succeeded, late usage that fits the loss refused; " + NEVER_ANYWHERE,
        seed=(_at("264-270"), _at("488-499"), _at("566-576")),
    ),
    Clause(
        lab_did="restarted the ledger (down for a while)",
        cause="unbilled_at_end",
        may_suffer="calls refused while it is down (as lost requests); a ledger that is "
                   "still down when the run ends leaves the usage it never received unbilled",
        never="anything it committed lost; " + NEVER_ANYWHERE,
        seed=(_at("18-20"), _at("1339-1360")),
    ),
    Clause(
        lab_did="ended the run while live holders held usage not yet billed",
        cause="unbilled_at_end",
        may_suffer="usage no batch carried to the ledger before the end is unbilled",
        never="usage the ledger received (its ingest committed) left unbilled; usage a live "
              "holder never sent although the lab left it alone for two flush periods and "
              "a loop's calls (2 s) after the spend",
        seed=(_at("1239-1254"),),
    ),
    Clause(
        lab_did="let a lease run past its TTL and grace (the reclaim sweep)",
        cause=STORE_LOGIC,
        may_suffer="nothing beyond what the clause that stranded the lease allows: its "
                   "granted less billed usage becomes provisional settlement loss, later "
                   "usage converts it into billed usage",
        never="a lease reclaimed within its grace, units credited back, billed usage "
              "counted as loss",
        seed=(_at("264-270"), _at("376-383"), _at("566-584")),
    ),
    Clause(
        lab_did="ran the rollover pass on every holder (passes race each period boundary)",
        cause=STORE_LOGIC,
        may_suffer="nothing: the first pass across a boundary expires the closed period's "
                   "unspent allowance and deposits the next, a racing or re-run pass finds "
                   "the period crossed and skips the account; an allowance arrives up to "
                   "rollover_every after its boundary",
        never="an allowance deposited twice for one period, allowance of a period still "
              "open expired; " + NEVER_ANYWHERE,
        seed=(_at("204-216"), _at("1113-1136"), _at("1138-1162")),
    ),
    Clause(
        lab_did="ran an account near exhaustion with several holders (the shrink cap)",
        cause=STORE_LOGIC,
        may_suffer="grants capped at balance / shrink_divisor, refused spends",
        never="an exchange re-granting less than the credit it restored (GL-109), or "
              "less than a refused quote the restored balance can fund (GL-131)",
        seed=(_at("250-256"), _at("344-366"), _at("500-532")),
    ),
    Clause(
        lab_did="changed what holders ask for, lease_units or lease_ttl, as an operator, "
                "rolled out replica by replica (reconfigure)",
        cause=STORE_LOGIC,
        may_suffer="nothing beyond the graceful restarts it rolls out with: each lease is "
                   "judged by the grant and the expiry the ledger recorded for it, whatever "
                   "its holder asked",
        never=NEVER_ANYWHERE,
        seed=(_at("474-486"),),
    ),
)

CONTRACT = Contract("tollgate", CLAUSES)
"""The tollgate family's fault contract (``docs/contracts/tollgate.md``)."""

RAN_UNANSWERED = frozenset({"reply_lost", "call_timed_out", "reply_to_dead_replica",
                            "misaligned_reply", "waiter_dropped", "connection_stalled",
                            "connection_reset", "duplicate_execution", "call_retried",
                            "late_reply", "slow_reply"})
"""The message faults after which a call may have run without its caller
reading its answer, or run twice (a re-sent command): what the
``ambiguous_acquire`` / ``ambiguous_consolidate`` clauses allow a grant to be
stranded by. A lost request, a refused connection or one never opened never
ran, and strand nothing."""

RACED_BOUNDARY = "rollover_passes_raced"
"""What exposed an allowance deposited twice when the lab injected no fault:
two holders' rollover passes crossing the same period boundary (the
rollover clause)."""

PERIOD_EXPIRED = "allowance_expired"
"""What exposed a funding statement that does not balance when the lab
injected no fault: a rollover that expired unspent allowance, which the
statement must account for (the conservation clause)."""

NEAR_EXHAUSTION = "account_near_exhaustion"
"""What exposed a re-grant below the credit when the lab injected no fault:
the shrink cap the grant policy applies near exhaustion (the last clause)."""
