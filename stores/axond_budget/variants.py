"""Historical variants of the Redis budget store: the bugs the fixed one fixed.

Each variant is ``RedisBudget`` with one thing changed, and states only that
thing; everything else (keys, layouts, boot fences, the reserve decision) is
the fixed store's. The lab runs a variant and the fixed store on the same
scenario and seed to show what the fix is worth (``data/scenarios/variant-*``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any

from stores.axond_budget.contract import BudgetKey, Reservation, SharedSettings, require_amount
from stores.axond_budget.migration import (
    Claim,
    MigrationReport,
    applied_claims_key,
    apply_claim,
    attribute_v1_key,
    collect,
    migrate_redis,
    sequence_key,
)
from stores.axond_budget.redis_budget import (
    SCRIPTS,
    UNREACHABLE,
    RedisBudget,
    escape_identifier,
    glob_escape,
    namespace_scope,
    v1_patterns,
    v1_scope,
)
from stores.ports import RedisPort
from stores.scripts import Patch, ScriptSet

logger = logging.getLogger(__name__)


class SplitSettlement(RedisBudget):
    """Settlement as two steps, release then charge: ``HDEL`` the hold, then
    ``INCRBY`` the spend (in the v2 layout each scope's hold and counter, one
    command each), instead of one script.

    The bug: a settlement can release without charging. When the release's
    reply is lost (a timeout, a dropped connection) the hold may or may not be
    gone, and this store gives up without sending the charge; a replica that
    dies between the two steps does the same. Either way the estimate stops
    counting and the spend is never recorded: recorded spend drifts below the
    truth, and the cap is overshot by spend the store never saw (the lab
    files it under ``settlement_lost``). The fix is ``settle_v1.lua`` /
    ``settle_v2.lua``: both steps in one script, so a lost reply costs nothing.
    """

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        keys = self._keys(key)
        # Both layouts list each scope's spend counter, then its holds hash.
        spent_keys, holds_keys = keys[0::2], keys[1::2]
        try:
            for holds in holds_keys:
                await self.data.hdel(holds, reservation.id)
        except UNREACHABLE as error:
            logger.error("budget release failed (%s); the spend is not charged", error)
            return
        if actual_microdollars <= 0:
            return
        try:
            for spent in spent_keys:
                await self.data.incrby(spent, actual_microdollars)
        except UNREACHABLE as error:
            logger.error("budget charge failed (%s); the spend is lost", error)


class NoReclaim(RedisBudget):
    """The reserve scripts without reclaiming expired holds: they sum every
    hold in the hash (``live_holds.lua`` patched to add each amount, its
    deadline unread), and delete none.

    The bug: a hold whose request never settles (its replica crashed, its
    settlement was lost) keeps counting against the cap past its deadline,
    until the holds hash itself expires, twice the reservation TTL after the
    *last* admission on that key. On a busy key every admission pushes that
    back, so a crashed replica wedges the budget: requests are denied as
    exceeded while the truth has room, and the wedge lifts only after the key
    goes idle. The fix is the reclaim loop in ``live_holds.lua``: expired holds
    are dropped before every decision, so a dead replica's estimate stops
    counting at its deadline.
    """

    scripts = RedisBudget.scripts.patching(live_holds=Patch(
        # The seam: the reclaim loop's body. Each hold's amount is added
        # whatever its deadline, and no HDEL drops an expired one.
        "    local amount = tonumber(string.sub(hold, 1, colon - 1))\n"
        "    local deadline_ms = tonumber(string.sub(hold, colon + 1))\n"
        "    if deadline_ms <= now_ms then\n"
        "      redis.call('HDEL', holds_key, entries[index])\n"
        "    else\n"
        "      live = live + amount\n"
        "    end\n",
        "    live = live + tonumber(string.sub(hold, 1, colon - 1))\n"))


class StartTimeReservationIds(RedisBudget):
    """Reservation ids made of the process's clock when it first reserved, in
    microseconds, and a counter from 1.

    The bug: the id is unique within one process only, though it names a
    field of a holds hash every replica writes to. Two replicas whose first
    reservations fall in the same tick carry the same epoch and then count
    in step, so their n-th reservations share one id: on one key the second
    ``HSET`` overwrites the first replica's live hold (one hold now stands
    for two requests) and the first settlement deletes it for both. The
    store counts less than the requests in flight hold, and admits past the
    cap with no fault at all. The fix draws ids unique fleet-wide
    (``RedisBudget.new_reservation_id``: ``Runtime.new_id``).

    The port's clock reads whole milliseconds, so in the lab the tick is a
    millisecond, where the historical one was a microsecond: the same
    collision, a thousand times likelier.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # One epoch and one counter per store: per gateway process.
        self._id_epoch_us: int | None = None
        self._id_counter = itertools.count(1)

    def new_reservation_id(self) -> str:
        if self._id_epoch_us is None:
            self._id_epoch_us = self.runtime.now_ms() * 1_000
        return f"{self._id_epoch_us:x}-{next(self._id_counter):x}"


async def migrate_recomputing_namespace_totals(
        data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
        scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    """The migration that finished by recomputing each namespace's total from
    the sum of its subjects' counters: read them all, then ``SET`` the total.

    The bug: the total is a sum read at one time and written at another. Run
    with the fleet stopped it is harmless, but the documented recovery from a
    stray v1 writer is to run the migration again while v2 replicas serve, and
    a settlement that charges a subject and its namespace between the reads
    and the write is erased from the namespace total (the subject keeps it):
    the namespace cap then lets through spend it already counted once. The fix
    adds each claim to both counters in one script and never recomputes.
    """
    touched = {attribute_v1_key(settings.key_prefix, key, ":spent", namespaces).namespace
               for key in await collect(data, v1_patterns(settings.key_prefix)[0])}
    report = await migrate_redis(data, settings, namespaces, scripts=scripts)
    for namespace in sorted(touched):
        scope = namespace_scope(settings.key_prefix, namespace)
        total = 0
        for subject_spent in await collect(data, f"{glob_escape(scope)}:subject:*:spent"):
            total += int(await data.get(subject_spent) or 0)
        await data.set(f"{scope}:namespace:spent", total)
    return report


def split_v1_tag(key_prefix: str, redis_key: str, suffix: str,
                 namespaces: list[str] | tuple[str, ...]) -> BudgetKey:
    """The old reading of a v1 key: its ``{namespace|subject}`` tag split at
    the first ``|``, whatever the configured namespaces are."""
    tag = redis_key[len(f"{key_prefix}:{{"):len(redis_key) - len(f"}}{suffix}")]
    namespace, _, subject = tag.partition("|")
    return BudgetKey(namespace, subject)


async def migrate_attributing_by_guesswork(
        data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
        scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    """The migration that read each v1 key's owner off its tag (``split_v1_tag``).

    The bug: the v1 tag is not escaped, so a ``|`` may sit in the namespace
    id as well as between the two halves, and ``{team|west|sub}`` reads as
    namespace ``team`` or ``team|west``. Splitting at the first ``|`` guesses
    the former: the spend of subject ``sub`` of namespace ``team|west`` is
    carried to a subject ``west|sub`` of a namespace ``team`` (which may not
    even be configured), and then the v1 key, the only evidence, is deleted.
    The tenant that owns it starts v2 from zero, and its caps let through
    spend it had already made. The fix (``migration.attribute_v1_key``)
    matches the tag against the configured namespace ids and refuses anything
    but exactly one clean match, before writing anything.
    """
    return await migrate_redis(data, settings, list(namespaces), scripts=scripts,
                               attribute=split_v1_tag)


async def drop_sequences_first(data: RedisPort, key_prefix: str, namespaces: list[str],
                               subjects: list[BudgetKey]) -> None:
    """The old cleanup: the carried subjects' claim sequences, then the
    namespaces' records of applied claims."""
    for key in subjects:
        await data.delete(sequence_key(key_prefix, key))
    for namespace in namespaces:
        await data.delete(applied_claims_key(key_prefix, namespace))


async def migrate_dropping_sequences_first(
        data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
        scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    """The migration that dropped its bookkeeping in the other order
    (``drop_sequences_first``).

    The bug: a claim's token is its subject and its sequence number, and the
    record of applied tokens is what makes re-applying a claim a no-op. A
    migration that dies after deleting the sequences but before the records
    leaves old tokens recorded beside sequences that start again from 1. A
    stray v1 writer's later spend is then claimed, on the re-run the boot
    fence prescribes, under a token already recorded, and dropped as a
    replay: spend gone from both layouts, and the caps let it be spent again.
    The fix (``migration.drop_bookkeeping``) drops the records first: an
    interruption leaves either nothing or only sequences, and a sequence
    that survives only keeps new tokens new.
    """
    return await migrate_redis(data, settings, list(namespaces), scripts=scripts,
                               cleanup=drop_sequences_first)


async def carry_without_a_parked_claim(data: RedisPort, key_prefix: str, key: BudgetKey,
                                       scripts: ScriptSet = SCRIPTS) -> int:
    """The carry that took a v1 counter (``GET`` then ``DEL``) without parking
    what it took anywhere, then added it to v2.

    The bug: between taking the spend off the v1 counter and adding it to v2
    the spend exists only in the migrating process. A migration that dies
    there (a crash, a lost connection) loses it for good: a re-run finds an
    empty v1 counter and no claim to finish. The fix parks each claim in a
    slot beside the counter, in the same script that takes it.
    """
    spent_key = f"{v1_scope(key_prefix, key)}:spent"
    carried = 0
    while (taken := await data.get(spent_key)) is not None:
        await data.delete(spent_key)
        sequence = await data.incrby(sequence_key(key_prefix, key), 1)
        carried += await apply_claim(data, key_prefix, key, Claim(int(sequence), int(taken)),
                                     scripts)
    return carried


async def migrate_without_parked_claims(
        data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
        scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    """The migration with ``carry_without_a_parked_claim`` in place of the fixed carry."""
    return await migrate_redis(data, settings, namespaces, carry=carry_without_a_parked_claim,
                               scripts=scripts)


async def leave_the_keyspace_unmarked(data: RedisPort, key_prefix: str) -> None:
    """The old run's first move: nothing stamped before it."""


async def migrate_without_a_migrating_marker(
        data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
        scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    """The migration that stamped nothing before its first move, only ``v2``
    after its last (``leave_the_keyspace_unmarked``).

    The bug: a carried subject leaves no v1 key behind (its claim is parked
    in a slot the v1 layout never reads, then applied and dropped), so a run
    that dies part-way leaves what looks like a plain, unmigrated v1 keyspace
    in which the subjects already carried read zero. A gateway without the
    namespace cap boots on it (nothing says a migration is under way) and
    hands each of them a fresh budget until the re-run. The fix
    (``migration.mark_migrating``) stamps ``v2-migrating`` before the first
    move, and neither layout boots past it until the run finishes.
    """
    return await migrate_redis(data, settings, list(namespaces), scripts=scripts,
                               mark=leave_the_keyspace_unmarked)


class UntaggedKeys(RedisBudget):
    """The v1 layout with its keys named without the ``{namespace|subject}``
    hash tag: ``prefix:namespace|subject:spent`` and ``...:reservations``.

    The bug shows on a cluster only: the two keys of a budget hash to two
    slots, so every reserve and settle script spans slots and every node
    answers ``CROSSSLOT`` (seed 000: a budget's keys are kept in one slot by
    the tag "so the scripts work on a cluster"; its test
    ``a_budgets_keys_share_one_hash_slot`` pins it). On one server nothing
    differs from the fixed store.
    """

    @staticmethod
    def ledger_keys(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
        scope = f"{settings.key_prefix}:{key.namespace}|{key.subject}"
        return {f"{scope}:spent": "spent", f"{scope}:reservations": "holds"}


class SubjectTaggedV2(RedisBudget):
    """The v2 layout with each subject's keys under the subject's own
    ``{namespace|subject}`` tag and the namespace's under ``{namespace}``.

    The bug shows on a cluster only: a v2 script charges the subject and its
    namespace together, so its four keys span two slots and every node
    answers ``CROSSSLOT``. The fixed layout puts all four under the one
    ``{namespace}`` tag "so one script can span both scopes on a cluster"
    (seed 000, ADR 0010, at the price of a hot namespace shard); its test
    ``every_v2_key_in_a_namespace_shares_the_namespace_hash_tag`` pins it.
    """

    @staticmethod
    def ledger_keys(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
        namespace = escape_identifier(key.namespace)
        subject = (f"{settings.key_prefix}:v2:subject:"
                   f"{{{namespace}|{escape_identifier(key.subject)}}}")
        scope = namespace_scope(settings.key_prefix, key.namespace)
        return {f"{subject}:spent": "spent", f"{subject}:reservations": "holds",
                f"{scope}:namespace:spent": "namespace_spent",
                f"{scope}:namespace:reservations": "namespace_holds"}
