"""The budget family's fault contract: what a *sound* budget store may suffer
from each thing the lab does (DESIGN section 12), from its seeds.

``SEED`` is the Redis budget and its migration (``000_cfca2acab2180986.txt``),
``STORE`` the ``BudgetStore`` contract and the in-memory store
(``001_25c2cca22987a5cc.txt``). The scope oracle files damage inside a clause
under the clause's cause and everything beyond every clause as
``store_logic``, exposed by the fault (and the call) that made it show.
``docs/contracts/axond_budget.md`` renders this table.

The rule the oracle applies from these clauses, in one line each:

* a command the store never ran (its request lost, refused, a connection
  that failed) may cost what not running it costs: a settlement's spend
  unrecorded, its hold counted to its deadline, a fail-closed denial;
* a command the store *did* run must have kept its books, whatever became of
  its reply: a release without its charge is the store's;
* a hold counted past the deadline its store wrote is the store's, whatever
  stranded it;
* spend a migration took and no re-run put back is the store's, and so is
  spend it took off a namespace's subjects and carried anywhere but that
  namespace;
* a replica of the old layout that booted after a migration began moving
  spend is the store's (its marker refuses that boot), and so is the gap
  its old-layout spend opens for the new layout's replicas, exposed by what
  interrupted the migration; a stray the operator left running reads no
  claim in flight or parked by the operator's doing;
* a hold another replica's command overwrote or removed before its
  deadline is the store's, exposed by the lab running the key on several
  replicas (``replicas_sharing_key``);
* spend on a ledger the deciding replica could not read is the lab's only
  when the lab (or its operator) put it there: other replicas' ledgers of a
  per-replica store, a stray v1 writer beside a v2 fleet;
* each request is judged by the cap and the TTL its own replica ran with (an
  operator's ``reconfigure`` changes them replica by replica); overshoot past
  the lowest cap in force that admissions under a higher one let in is the
  operator's (``config_change``).
"""

from __future__ import annotations

from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import Clause, Contract

SEED = "000_cfca2acab2180986.txt"
STORE = "001_25c2cca22987a5cc.txt"

CONTRACT = Contract(family="axond_budget", clauses=(
    Clause(
        lab_did="lost, refused or failed to connect a reserve before it ran",
        cause="store_unavailable",
        may_suffer="that request denied (fail-closed), or admitted unheld (fail-open)",
        never="a hold written, spend recorded, another request denied",
        seed=(f"{STORE}:20-26", f"{STORE}:478-520")),
    Clause(
        lab_did="lost or timed out a reserve reply after the script ran",
        cause="message_lost",
        may_suffer="that hold counted until its deadline, and the denials it causes",
        never="spend unrecorded, an overshoot beyond that hold, a hold past its deadline",
        seed=(f"{SEED}:877-886",)),
    Clause(
        lab_did="admitted fail-open while the store was unreachable",
        cause="fail_open_admission",
        may_suffer="that request's spend unrecorded and the overshoot it lets through",
        never="spend of a request that was held",
        seed=(f"{STORE}:505-520",)),
    Clause(
        lab_did="lost a settle request (or refused it) before it ran",
        cause="settlement_lost",
        may_suffer="that request's spend unrecorded; its hold counted until its deadline",
        never="other requests' spend; a hold released without its charge",
        seed=(f"{STORE}:124-135", f"{SEED}:892-895")),
    Clause(
        lab_did="lost or timed out a settle reply after the script ran",
        cause=STORE_LOGIC,
        may_suffer="nothing: release and charge are one script",
        never="drift, a hold released without its charge",
        seed=(f"{SEED}:110-111", f"{STORE}:129-131")),
    Clause(
        lab_did="re-sent a settle (a driver retry that executed twice)",
        cause="duplicate_execution",
        may_suffer="that request charged twice: no caller retries a settlement",
        never="another request charged, a hold of another request released",
        seed=(f"{STORE}:124-131",)),
    Clause(
        lab_did="crashed a replica while it served requests",
        cause="replica_crash",
        may_suffer="its requests' holds counted until their deadlines, their spend "
                   "unrecorded, and the denials those holds cause",
        never="a hold counted past its deadline (the reserve reclaims it)",
        seed=(f"{SEED}:12-15", f"{SEED}:77-79")),
    Clause(
        lab_did="crashed a replica of a per-replica (in-memory) store",
        cause="crashed_replica_ledger",
        may_suffer="that replica's ledgers, holds and spend, forgotten",
        never="another replica's ledgers",
        seed=(f"{STORE}:164-166",)),
    Clause(
        lab_did="paused a replica, or delayed its calls",
        cause="hold_expired_while_running",
        may_suffer="a running request's hold expired at its deadline and reclaimed",
        never="a hold reclaimed before its deadline",
        seed=(f"{STORE}:132-135", f"{SEED}:77-79")),
    Clause(
        lab_did="restarted or failed over the server under its persistence model",
        cause="server_data_loss",
        may_suffer="what the persistence model does not keep: spend and holds lost, "
                   "older holds restored",
        never="anything a persisted write kept",
        seed=(f"{SEED}:232-233",)),
    Clause(
        lab_did="configured an idle TTL and a subject bound (in-memory store)",
        cause="eviction",
        may_suffer="the spend of an idle ledger holding nothing, forgotten when evicted",
        never="a ledger with a live hold evicted; spend lost without an eviction",
        seed=(f"{STORE}:305-320", f"{STORE}:400-420")),
    Clause(
        lab_did="ran a per-replica store on more than one replica",
        cause="per_replica_ledger",
        may_suffer="admissions past the fleet cap by spend on other replicas' ledgers",
        never="an overshoot on one replica's own ledger",
        seed=(f"{STORE}:20-24", f"{STORE}:164-166")),
    Clause(
        lab_did="judged a namespace cap the running layout does not keep (v1)",
        cause="scope_not_enforced",
        may_suffer="namespace spend unrecorded until a migration carries it",
        never="spend a finished migration should have carried, left uncarried",
        seed=(f"{SEED}:17-38",)),
    Clause(
        lab_did="left a v1 replica writing beside a v2 fleet (the operator's stray writer)",
        cause="stray_layout_writer",
        may_suffer="admissions past the cap by spend on the v1 ledger the v2 fleet "
                   "cannot read, until a re-run carries it",
        never="spend a re-run should have carried, lost",
        seed=(f"{SEED}:30-38", f"{SEED}:560-574", f"{STORE}:626-630")),
    Clause(
        lab_did="killed a migration between its claim and its apply",
        cause=STORE_LOGIC,
        may_suffer="nothing lasting: the claim is parked, resumable, applied at most once",
        never="spend lost, spend carried twice",
        seed=(f"{SEED}:183-216", f"{SEED}:567-570")),
    Clause(
        lab_did="changed a cap as an operator, rolled out replica by replica (reconfigure)",
        cause="config_change",
        may_suffer="overshoot past the lowest cap in force at the end by spend each replica "
                   "admitted under the cap it ran with: a cap lowered below what was already "
                   "spent, old and new caps serving side by side",
        never="an admission past the cap its own replica ran with, a denial its own cap had "
              "room for (store_logic, exposed by config_change on reconfigure)",
        seed=(f"{SEED}:842-866", f"{SEED}:81-83")),
    Clause(
        lab_did="changed the reservation TTL as an operator (reconfigure)",
        cause="hold_expired_while_running",
        may_suffer="a running request's hold expired at the deadline its own replica's TTL "
                   "gave it",
        never="a hold counted past, or dropped before, the deadline its writer's TTL gives it",
        seed=(f"{SEED}:859-860", f"{SEED}:105")),
    Clause(
        lab_did="restarted a replica of the old layout while a migration was part-way",
        cause=STORE_LOGIC,
        may_suffer="nothing: the mid-migration marker refuses its boot until a re-run "
                   "finishes, and the v2 marker after",
        never="a replica booted on a keyspace a migration has begun emptying",
        seed=(f"{SEED}:70-75", f"{SEED}:409-427", f"{SEED}:616-626")),
    Clause(
        lab_did="ran requests of one key on several replicas (replicas_sharing_key)",
        cause=STORE_LOGIC,
        may_suffer="nothing: a hold's id is unique fleet-wide, so one replica's reserve or "
                   "settle touches only its own request's hold",
        never="a live hold of another replica's request overwritten, removed, or written "
              "again for a second request",
        seed=(f"{SEED}:105-113", f"{STORE}:77-90")),
    Clause(
        lab_did="misaligned a multiplexed connection's replies",
        cause="misaligned_reply",
        may_suffer="a request admitted or denied on another call's answer",
        never="spend recorded wrong by a command that ran as sent",
        seed=(f"{SEED}:228-236",)),
))
"""The axond budget family's fault contract (see ``docs/contracts/axond_budget.md``)."""
