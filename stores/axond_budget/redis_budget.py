"""Shared budget state in Redis: one cap enforced by the whole fleet.

Reserve and settle are each one Lua script, so the read-compare-write happens
atomically on the server: two replicas racing for the last of a budget cannot
both be admitted. Every hold carries its own deadline and the reserve script
reclaims expired holds before deciding, so a replica that dies mid-request
leaks its hold for at most the reservation TTL, with no sweeper.

Two key layouts; the settings pick one when the store is built:

* **v1** (subject cap only): per ``(namespace, subject)`` a spend counter and a
  hash of holds, both tagged ``{namespace|subject}`` so they share a cluster
  slot.
* **v2** (``namespace_cap_microdollars`` set): four keys, the subject's spend
  and holds and the namespace's spend and holds, all tagged ``{namespace}``
  (identifiers escaped) so one script spans both scopes on a cluster. One
  reservation is one hold, under one id, in both hashes.

The layouts share no keys, so going from v1 to v2 is a migration
(``migration.migrate_v1_to_v2``), and ``connect`` refuses a keyspace the
configured layout cannot serve whole: the layout marker says which layout the
keyspace is in, and a v2 store also looks for leftover v1 keys and for claims
an interrupted migration parked.

Rules kept here:

* Awaits only its ports (``RedisPort``, ``Runtime``); scripts receive the
  replica's clock as an argument and never read the server's.
* A failed or ambiguous reserve falls back on ``on_unavailable``. The script
  may have run before the reply was lost; that hold then outlives the request
  by its TTL (the documented lost-reply posture).
* A failed settle is not retried: the hold expires on its own deadline.
* Keyspace scans use ``SCAN``, never ``KEYS``, and run at boot only.

Caps are fixed by the settings, as in axond 0.3.8's contract: 0.3.39's caps
published per namespace with generations (and their refusals when no cap
governs a namespace) are not ported; a scenario fixes its caps.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar, NamedTuple

from redis.exceptions import RedisError

from stores.axond_budget.contract import (
    Admission,
    BudgetError,
    BudgetKey,
    ExceededScope,
    Reservation,
    SharedSettings,
    require_amount,
)
from stores.ports import RedisPort, Runtime
from stores.scripts import ScriptSet

BACKEND = "redis"
LAYOUT_V2 = "v2"
LAYOUT_MIGRATING = "v2-migrating"
MIGRATION = "`migrate_v1_to_v2` (stores/axond_budget/migration.py)"
"""What an operator runs to carry v1 state into v2, as boot refusals name it."""

# Bookkeeping keys of a migration, beside each v1 subject's keys and in its
# hash slot: the claim parked between taking v1 spend and adding it to v2, and
# the counter that numbers those claims. Neither matches a v1 pattern.
CLAIM_SUFFIX = ":migration_pending"
SEQUENCE_SUFFIX = ":migration_seq"

SCAN_BATCH = 500

# What a call to Redis can fail with, whoever raised it: redis-py's own errors,
# a socket error, or a caller-side timeout.
UNREACHABLE = (RedisError, OSError, TimeoutError)

logger = logging.getLogger(__name__)


SCRIPTS = ScriptSet.shipped(__package__)
"""The Lua files shipped beside this module, by script name: what a store
runs unless its kind replaces some (``stores.scripts``)."""


# -- key layout -------------------------------------------------------------


def layout_key(key_prefix: str) -> str:
    return f"{key_prefix}:layout"


def escape_identifier(part: str) -> str:
    """``part`` with ``%``, ``{`` and ``}`` percent-escaped: a brace would move
    the hash tag, and escaping ``%`` too keeps distinct identifiers distinct."""
    return part.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def v1_scope(key_prefix: str, key: BudgetKey) -> str:
    """What every v1 key of ``key`` starts with; the tag is not escaped (v1 never was)."""
    return f"{key_prefix}:{{{key.namespace}|{key.subject}}}"


def v1_keys(key_prefix: str, key: BudgetKey) -> list[str]:
    """The spend counter and the holds hash of one subject, in one hash slot."""
    scope = v1_scope(key_prefix, key)
    return [f"{scope}:spent", f"{scope}:reservations"]


class V2Keys(NamedTuple):
    """The four keys a v2 script spans, in the order the scripts take them."""

    subject_spent: str
    subject_holds: str
    namespace_spent: str
    namespace_holds: str


def namespace_scope(key_prefix: str, namespace: str) -> str:
    """What every v2 key of ``namespace`` starts with, up to its ``{namespace}`` tag."""
    return f"{key_prefix}:v2:{{{escape_identifier(namespace)}}}"


def v2_keys(key_prefix: str, key: BudgetKey) -> V2Keys:
    scope = namespace_scope(key_prefix, key.namespace)
    subject = f"{scope}:subject:{escape_identifier(key.subject)}"
    return V2Keys(f"{subject}:spent", f"{subject}:reservations",
                  f"{scope}:namespace:spent", f"{scope}:namespace:reservations")


def glob_escape(text: str) -> str:
    """``text`` matched literally by a ``SCAN MATCH`` pattern."""
    return "".join(f"\\{char}" if char in "\\*?[]" else char for char in text)


def v1_patterns(key_prefix: str) -> tuple[str, str]:
    """``SCAN`` patterns of v1 spend counters and v1 holds hashes. A v2 key
    cannot match them: after the prefix it has ``v2:``, not ``{``."""
    base = glob_escape(key_prefix)
    return f"{base}:{{*}}:spent", f"{base}:{{*}}:reservations"


def claim_pattern(key_prefix: str) -> str:
    """``SCAN`` pattern of the claims an interrupted migration left parked."""
    return f"{glob_escape(key_prefix)}:{{*}}{CLAIM_SUFFIX}"


async def matching_keys(data: RedisPort, pattern: str) -> AsyncIterator[str]:
    """Every key matching ``pattern``, page by page."""
    cursor = 0
    while True:
        cursor, keys = await data.scan(cursor, match=pattern, count=SCAN_BATCH)
        for key in keys:
            yield key
        if cursor == 0:
            return


# -- what the lab's oracle reads -------------------------------------------


def parse_hold(hold: str) -> tuple[int, int]:
    """``"amount:deadline_ms"``, as the scripts write a hold, as two integers."""
    amount, _, deadline_ms = hold.partition(":")
    return int(float(amount)), int(float(deadline_ms))


def ledger_keys_v1(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
    """Which Redis keys hold ``key``'s ledger, and what each holds."""
    spent_key, holds_key = v1_keys(settings.key_prefix, key)
    return {spent_key: "spent", holds_key: "holds"}


def ledger_keys_v2(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
    """``ledger_keys_v1`` for the v2 layout: the subject's keys and its namespace's."""
    keys = v2_keys(settings.key_prefix, key)
    return {keys.subject_spent: "spent", keys.subject_holds: "holds",
            keys.namespace_spent: "namespace_spent", keys.namespace_holds: "namespace_holds"}


def ledger_keys(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
    """The ledger keys of the layout ``settings`` select, as ``RedisBudget`` does."""
    if settings.enforces_namespace_cap:
        return ledger_keys_v2(settings, key)
    return ledger_keys_v1(settings, key)


SPENT_ROLES = frozenset({"spent", "namespace_spent"})
HOLD_ROLES = frozenset({"holds", "namespace_holds"})


def decode_ledger_value(role: str, value: Any) -> Any:
    """A ledger key's raw content (``None`` when absent) as the oracle reads it:
    a spend role as an integer, a holds role as ``{id: (amount, deadline_ms)}``."""
    if role in SPENT_ROLES:
        return int(value or 0)
    if role not in HOLD_ROLES:
        raise ValueError(f"unknown ledger role {role!r}")
    if isinstance(value, list):
        value = dict(zip(value[::2], value[1::2], strict=True))
    return {rid: parse_hold(hold) for rid, hold in (value or {}).items()}


# -- the store ---------------------------------------------------------------


class RedisBudget:
    """The Redis budget store, in the layout its settings select."""

    name = "redis"
    scripts: ClassVar[ScriptSet] = SCRIPTS
    """The scripts this class runs unless given others: a subclass patches
    one piece (``SCRIPTS.patching(live_holds=Patch(...))``) or replaces it
    (``SCRIPTS.replacing(live_holds=...)``) without copying the rest."""

    def __init__(self, data: RedisPort, runtime: Runtime, settings: SharedSettings,
                 scripts: ScriptSet | None = None) -> None:
        self.data = data
        self.runtime = runtime
        self.settings = settings
        self.layout = "v2" if settings.enforces_namespace_cap else "v1"
        # Its kind's scripts when the lab boots it; the class's own otherwise.
        sources = type(self).scripts if scripts is None else scripts
        self._reserve = data.register_script(sources.source(f"reserve_{self.layout}"))
        self._settle = data.register_script(sources.source(f"settle_{self.layout}"))
        # The caps the reserve script takes, in its ARGV order.
        self._caps = [settings.subject_cap_microdollars]
        if settings.namespace_cap_microdollars is not None:
            self._caps.append(settings.namespace_cap_microdollars)

    @classmethod
    async def connect(
        cls, data: RedisPort, runtime: Runtime, settings: SharedSettings,
        scripts: ScriptSet | None = None,
    ) -> RedisBudget:
        """Prove the server answers and holds a keyspace this layout can serve
        whole, so a wrong address or a half-migrated keyspace fails at boot, not
        per request."""
        store = cls(data, runtime, settings, scripts)
        prefix = settings.key_prefix
        try:
            await data.ping()
            marker = await data.get(layout_key(prefix))
            if store.layout == "v2":
                await require_v2_layout(data, prefix, marker)
            else:
                require_v1_layout(prefix, marker)
        except UNREACHABLE as error:
            raise BudgetError(BACKEND, f"the server did not answer at boot: {error}") from error
        return store

    def _keys(self, key: BudgetKey) -> list[str]:
        """The keys a script spans, in the order the scripts take them: the
        ledger's keys (``ledger_keys``, a seam a variant's layout overrides)."""
        return list(self.ledger_keys(self.settings, key))

    @staticmethod
    def ledger_keys(settings: SharedSettings, key: BudgetKey) -> dict[str, str]:
        """The Redis keys of ``key``'s ledger and what each holds (the lab's
        oracle reads the same ones)."""
        return ledger_keys(settings, key)

    def new_reservation_id(self) -> str:
        """A reservation id unique fleet-wide: the holds hash field another
        replica's reserve must never overwrite, nor its settle delete (a seam,
        so a historical variant states only the id scheme it used)."""
        return self.runtime.new_id()

    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        require_amount("the estimate", estimated_microdollars)
        reservation = Reservation(self.new_reservation_id(), estimated_microdollars)
        try:
            admitted = await self._reserve(
                keys=self._keys(key),
                args=[
                    self.runtime.now_ms(),
                    self.settings.reservation_ttl_ms,
                    *self._caps,
                    estimated_microdollars,
                    reservation.id,
                ],
            )
        except UNREACHABLE as error:
            logger.warning("budget reserve failed (%s); applying on_unavailable", error)
            return self.settings.on_unavailable.admission()
        if admitted == 1:
            return Admission.allowed(reservation)
        if admitted == 2:
            logger.info("namespace %r has spent its cap; denying", key.namespace)
            return Admission.exceeded(ExceededScope.NAMESPACE)
        return Admission.exceeded(ExceededScope.SUBJECT)

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        try:
            await self._settle(keys=self._keys(key), args=[reservation.id, actual_microdollars])
        except UNREACHABLE as error:
            logger.error(
                "budget settlement lost (%s); the hold expires on its own deadline", error
            )

    async def release(self, key: BudgetKey, reservation: Reservation) -> None:
        await self.settle(key, reservation, 0)


# -- boot fences -------------------------------------------------------------


def require_v1_layout(key_prefix: str, marker: str | None) -> None:
    """Refuse a keyspace a migration has touched. An unmarked keyspace cannot
    hold a parked claim (the marker is stamped before the first move), so the
    v1 boot needs no scan."""
    if marker == LAYOUT_V2:
        raise BudgetError(
            BACKEND,
            f"`{layout_key(key_prefix)}` says this keyspace was migrated to the v2 layout, "
            "so `namespace_cap_microdollars` must stay set: without it the store reads v1 "
            "keys, which the migration emptied into v2, and every ledger would restart at zero.",
        )
    if marker == LAYOUT_MIGRATING:
        raise unfinished_migration(key_prefix)


async def require_v2_layout(data: RedisPort, key_prefix: str, marker: str | None) -> None:
    """Refuse a keyspace the v2 layout would serve only part of: not migrated,
    migrated part-way, with spend parked in a claim, or with v1 keys written
    since (a v1 replica still running)."""
    if marker == LAYOUT_MIGRATING:
        raise unfinished_migration(key_prefix)
    if marker != LAYOUT_V2:
        raise BudgetError(
            BACKEND,
            f"`namespace_cap_microdollars` needs the v2 key layout, and `{layout_key(key_prefix)}` "
            f"does not say the keyspace is in it. Stop every replica and run {MIGRATION}: it "
            "carries the spend already recorded into v2 instead of starting it again at zero.",
        )
    claims, example = await tally(data, claim_pattern(key_prefix))
    if claims:
        raise BudgetError(
            BACKEND,
            f"{claims} migration claim(s) under `{key_prefix}` were taken off v1 and never added "
            f"to v2 (e.g. `{example}`): a migration died between its two steps, so that spend "
            f"is in neither layout and every cap would undercount it. Re-run {MIGRATION}; "
            "it finishes each claim exactly once.",
        )
    legacy = 0
    for pattern in v1_patterns(key_prefix):
        legacy += (await tally(data, pattern))[0]
    if legacy:
        raise BudgetError(
            BACKEND,
            f"found {legacy} v1 budget key(s) under `{key_prefix}`, a keyspace marked migrated "
            "to v2: a replica without the namespace cap is still writing the old layout, and "
            f"each layout would enforce only its share of the traffic. Stop it, then re-run "
            f"{MIGRATION} to carry what it wrote.",
        )


def unfinished_migration(key_prefix: str) -> BudgetError:
    return BudgetError(
        BACKEND,
        f"`{layout_key(key_prefix)}` is `{LAYOUT_MIGRATING}`: a migration to v2 did not finish, "
        "so some subjects' spend is in the v2 layout and the rest still in v1, and neither "
        f"configuration would see a whole ledger. Re-run {MIGRATION}; it resumes where it "
        "stopped and carries each subject once.",
    )


async def tally(data: RedisPort, pattern: str) -> tuple[int, str | None]:
    """How many keys match ``pattern``, and one to name in an error."""
    count, example = 0, None
    async for key in matching_keys(data, pattern):
        count += 1
        example = example or key
    return count, example
