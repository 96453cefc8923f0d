"""Moving v1 budget ledgers into the v2 layout that a namespace cap requires.

``migrate_v1_to_v2`` moves every v1 subject's settled spend into its v2
subject counter *and* its namespace counter, drops v1 holds (the fleet is
stopped, so they belong to no request), and stamps the layout marker that
lets a v2 store boot. ``migrate_redis`` is the entry point a deployment runs:
it first refuses a configuration without the namespace cap, which could not
serve what the migration produces. ``stamp_fresh_keyspace`` is the lab's
bootstrap of an empty keyspace (the ``axond_budget.redis_v2`` kind boots
with it).

Rules kept here:

* Nothing is written before every v1 key is attributed to exactly one
  configured namespace: an unattributable key aborts with the keyspace
  untouched and unmarked.
* The marker says ``v2-migrating`` from before the first move until the last,
  so a run that dies part-way serves neither layout (see ``redis_budget``).
* Each subject is carried in two atomic steps, each its own script: *claim*
  (the v1 counter moves into a numbered, parked claim) and *apply* (the claim
  is added to both v2 counters at most once, recorded by its token). Dying
  after either loses and duplicates nothing: the next run finishes the parked
  claim, and a replayed apply is a no-op.
* Additive: v2 counters are only ever incremented, so a stray v1 write after a
  migration is recovered beside live v2 spend by running it again.
* Needs the data port only (no runtime): it reads no clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from stores.axond_budget.contract import BudgetError, BudgetKey, SharedSettings
from stores.axond_budget.redis_budget import (
    BACKEND,
    CLAIM_SUFFIX,
    LAYOUT_MIGRATING,
    LAYOUT_V2,
    SCAN_BATCH,
    SCRIPTS,
    SEQUENCE_SUFFIX,
    UNREACHABLE,
    claim_pattern,
    escape_identifier,
    glob_escape,
    layout_key,
    matching_keys,
    namespace_scope,
    v1_patterns,
    v1_scope,
    v2_keys,
)
from stores.ports import RedisPort
from stores.scripts import ScriptSet


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What one migration run did, for the operator who ran it."""

    subjects: int = 0
    """v1 subjects whose spend this run carried (or found already carried)."""
    reservation_hashes: int = 0
    """v1 holds hashes dropped: with the fleet stopped, they hold nothing live."""
    namespaces: int = 0
    """Namespaces whose v2 totals this run added to."""
    carried_microdollars: int = 0
    """Spend added to v2 by this run. Zero on a re-run with nothing new; more
    is spend a stray v1 writer recorded after an earlier run, now recovered."""


@dataclass(frozen=True, slots=True)
class Claim:
    """Spend taken off a v1 counter and parked until it is added to v2."""

    sequence: int
    amount_microdollars: int

    @classmethod
    def parse(cls, raw: str, where: str) -> Claim:
        """``"sequence:amount"``, as the claim script parks it."""
        sequence, _, amount = raw.partition(":")
        try:
            return cls(int(sequence), int(amount))
        except ValueError:
            raise BudgetError(
                BACKEND, f"the migration claim in `{where}` is malformed: {raw!r}; inspect it "
                "and carry it into the v2 counters by hand before re-running") from None

    def token(self, subject: str) -> str:
        """The record of having applied this claim: unique per subject and per
        claim, so re-applying is a no-op and a later claim is still added."""
        return f"{escape_identifier(subject)}#{self.sequence}"


Carry = Callable[[RedisPort, str, BudgetKey, ScriptSet], Awaitable[int]]
"""How one subject's v1 spend is carried into v2 (``carry_forward``), with the
scripts of the kind migrating; the micro-dollars added. A historical variant
swaps in its own."""

Attribute = Callable[[str, str, str, "list[str] | tuple[str, ...]"], BudgetKey]
"""How a v1 key (its prefix, the key, its suffix, the configured namespace
ids) is read as the ``(namespace, subject)`` it belongs to
(``attribute_v1_key``). A historical variant swaps in its own."""

MarkMigrating = Callable[[RedisPort, str], Awaitable[None]]
"""How a run tells the keyspace under a key prefix that it is about to move
the first key (``mark_migrating``). A historical variant swaps in its own."""

DropBookkeeping = Callable[[RedisPort, str, "list[str]", "list[BudgetKey]"], Awaitable[None]]
"""How a finished migration drops its bookkeeping (the touched namespaces'
records of applied claims, the carried subjects' claim sequences):
``drop_bookkeeping``. A historical variant swaps in its own."""


def require_namespace_cap(settings: SharedSettings) -> None:
    """Refuse to migrate for a configuration that could not serve the result."""
    if not settings.enforces_namespace_cap:
        raise BudgetError(
            BACKEND,
            f"migrating `{settings.key_prefix}` to the v2 layout needs "
            "`namespace_cap_microdollars` set: only a store with the namespace cap can serve "
            "v2, so every replica of this configuration would then refuse to boot. Set the cap, "
            "migrate, and start the fleet on that configuration.",
        )


async def migrate_redis(data: RedisPort, settings: SharedSettings,
                        namespaces: list[str] | tuple[str, ...],
                        carry: Carry | None = None,
                        scripts: ScriptSet = SCRIPTS,
                        attribute: Attribute | None = None,
                        cleanup: DropBookkeeping | None = None,
                        mark: MarkMigrating | None = None) -> MigrationReport:
    """The migration as a deployment runs it: for the configuration it migrates
    *to*, with that kind's ``scripts`` (``migration_claim``, ``migration_apply``)."""
    require_namespace_cap(settings)
    return await migrate_v1_to_v2(data, settings.key_prefix, namespaces, carry, scripts,
                                  attribute, cleanup, mark)


# -- the two steps of a carry, and their keys ------------------------------


def claim_key(key_prefix: str, key: BudgetKey) -> str:
    return f"{v1_scope(key_prefix, key)}{CLAIM_SUFFIX}"


def sequence_key(key_prefix: str, key: BudgetKey) -> str:
    return f"{v1_scope(key_prefix, key)}{SEQUENCE_SUFFIX}"


def applied_claims_key(key_prefix: str, namespace: str) -> str:
    return f"{namespace_scope(key_prefix, namespace)}:migration:applied"


async def claim_v1_spend(data: RedisPort, key_prefix: str, key: BudgetKey,
                         scripts: ScriptSet = SCRIPTS) -> Claim | None:
    """Step one: park ``key``'s v1 spend as a claim (or hand back the claim an
    earlier run parked); ``None`` when there is nothing to claim."""
    claim = data.register_script(scripts.source("migration_claim"))
    parked = claim_key(key_prefix, key)
    raw = await claim(keys=[f"{v1_scope(key_prefix, key)}:spent", parked,
                            sequence_key(key_prefix, key)])
    return None if raw is None else Claim.parse(raw, parked)


async def apply_claim(data: RedisPort, key_prefix: str, key: BudgetKey, claim: Claim,
                      scripts: ScriptSet = SCRIPTS) -> int:
    """Step two: add ``claim`` to the subject's and the namespace's v2 counters
    unless it was applied before; the micro-dollars added."""
    apply = data.register_script(scripts.source("migration_apply"))
    target = v2_keys(key_prefix, key)
    added = await apply(
        keys=[target.subject_spent, target.namespace_spent,
              applied_claims_key(key_prefix, key.namespace)],
        args=[claim.token(key.subject), max(claim.amount_microdollars, 0)],
    )
    return max(int(added), 0)


async def carry_forward(data: RedisPort, key_prefix: str, key: BudgetKey,
                        scripts: ScriptSet = SCRIPTS) -> int:
    """Claim and apply until ``key``'s v1 counter is empty; the micro-dollars added."""
    carried = 0
    while (claim := await claim_v1_spend(data, key_prefix, key, scripts)) is not None:
        carried += await apply_claim(data, key_prefix, key, claim, scripts)
        # Only now is the parked claim done with: deleted earlier, a death
        # before the apply would lose it.
        await data.delete(claim_key(key_prefix, key))
    return carried


# -- attribution -------------------------------------------------------------


def attribute_v1_key(key_prefix: str, redis_key: str, suffix: str,
                     namespaces: list[str] | tuple[str, ...]) -> BudgetKey:
    """The ``(namespace, subject)`` a v1 key (ending in ``suffix``) belongs to.

    The v1 tag ``{namespace|subject}`` is not escaped, so ``|`` may sit in
    either half and splitting it would guess. It is matched against the
    configured namespace ids instead, and anything but exactly one clean match
    is refused: no match (an unconfigured or removed namespace), several
    distinct matches, or one match whose remainder still holds a ``|`` (the
    tag then also reads as a longer namespace the config does not declare).
    """
    opening, closing = f"{key_prefix}:{{", f"}}{suffix}"
    if not (redis_key.startswith(opening) and redis_key.endswith(closing)
            and len(redis_key) >= len(opening) + len(closing)):
        raise unattributable(redis_key, "it does not have the `<prefix>:{namespace|subject}` shape")
    tag = redis_key[len(opening):len(redis_key) - len(closing)]
    # A set, so the same id configured twice is one candidate, not an ambiguity.
    candidates = {BudgetKey(namespace, tag[len(namespace) + 1:])
                  for namespace in namespaces if tag.startswith(f"{namespace}|")}
    if not candidates:
        raise unattributable(redis_key, "none of the configured namespace ids starts its tag")
    if len(candidates) > 1:
        found = ", ".join(sorted(f"`{c.namespace}`" for c in candidates))
        raise unattributable(redis_key, f"the configured namespaces {found} each prefix its "
                             "tag, so where the namespace ends is ambiguous")
    (key,) = candidates
    if "|" in key.subject:
        raise unattributable(
            redis_key, f"`{key.namespace}` is configured, but what it leaves of the tag "
            f"(`{key.subject}`) still contains a `|`, so the tag reads as a longer namespace too")
    return key


def unattributable(redis_key: str, reason: str) -> BudgetError:
    return BudgetError(
        BACKEND,
        f"cannot tell which namespace the v1 key `{redis_key}` belongs to: {reason}. The v1 tag "
        "is not escaped, so it is matched against the configured namespace ids, never split. "
        "Nothing was migrated or deleted. Configure its namespace and run the migration again; "
        "if no configuration can read the tag one way, move this key into v2 by hand (or "
        "delete it, resetting that ledger).",
    )


# -- the migration -----------------------------------------------------------


async def migrate_v1_to_v2(data: RedisPort, key_prefix: str,
                           namespaces: list[str] | tuple[str, ...],
                           carry: Carry | None = None,
                           scripts: ScriptSet = SCRIPTS,
                           attribute: Attribute | None = None,
                           cleanup: DropBookkeeping | None = None,
                           mark: MarkMigrating | None = None) -> MigrationReport:
    """Carry every v1 ledger under ``key_prefix`` into v2 and stamp the marker.

    Run with the fleet stopped. Idempotent, resumable after dying at any step,
    and additive; ``namespaces`` are the configured ids v1 keys are attributed
    to. On an empty keyspace it only stamps ``v2``.
    """
    try:
        return await _migrate(data, key_prefix, namespaces, carry or carry_forward, scripts,
                              attribute or attribute_v1_key, cleanup or drop_bookkeeping,
                              mark or mark_migrating)
    except UNREACHABLE as error:
        raise BudgetError(
            BACKEND, f"the server failed during the migration of `{key_prefix}`: {error}. "
            "Run it again: it resumes where it stopped and carries each claim once.") from error


async def _migrate(data: RedisPort, key_prefix: str, namespaces: list[str] | tuple[str, ...],
                   carry: Carry, scripts: ScriptSet, attribute: Attribute,
                   cleanup: DropBookkeeping, mark: MarkMigrating) -> MigrationReport:
    spent_pattern, holds_pattern = v1_patterns(key_prefix)
    spent_keys = await collect(data, spent_pattern)
    holds_keys = await collect(data, holds_pattern)
    # A claim whose v1 counter is already gone is found only by its own key.
    parked_claims = await collect(data, claim_pattern(key_prefix))

    # Attribute everything before the first write, so a refusal leaves the
    # keyspace exactly as it was. Dict keys: each subject once, in scan order.
    subjects: dict[BudgetKey, None] = {}
    for redis_key in spent_keys:
        subjects[attribute(key_prefix, redis_key, ":spent", namespaces)] = None
    for redis_key in parked_claims:
        subjects[attribute(key_prefix, redis_key, CLAIM_SUFFIX, namespaces)] = None
    for redis_key in holds_keys:
        attribute(key_prefix, redis_key, ":reservations", namespaces)

    # A carried subject leaves no v1 key behind, so without this stamp a run
    # that died on a later subject would look like plain v1 state with some
    # ledgers at zero.
    if subjects or holds_keys:
        await mark(data, key_prefix)

    carried = 0
    for key in subjects:
        carried += await carry(data, key_prefix, key, scripts)
    for redis_key in holds_keys:
        await data.delete(redis_key)
    touched = {key.namespace for key in subjects}

    await cleanup(data, key_prefix, sorted(touched), list(subjects))

    await data.set(layout_key(key_prefix), LAYOUT_V2)
    return MigrationReport(subjects=len(subjects), reservation_hashes=len(holds_keys),
                           namespaces=len(touched), carried_microdollars=carried)


async def mark_migrating(data: RedisPort, key_prefix: str) -> None:
    """Stamp ``v2-migrating``: from now until the ``v2`` stamp, neither layout
    boots (``redis_budget.require_v1_layout``, ``require_v2_layout``)."""
    await data.set(layout_key(key_prefix), LAYOUT_MIGRATING)


async def drop_bookkeeping(data: RedisPort, key_prefix: str, namespaces: list[str],
                           subjects: list[BudgetKey]) -> None:
    """The bookkeeping has nothing left to protect; drop it, records of applied
    claims before sequence counters. The other order could, if interrupted,
    leave old records beside restarted sequence numbers, and a later stray v1
    write would get an old token and be dropped as a replay."""
    for namespace in namespaces:
        await data.delete(applied_claims_key(key_prefix, namespace))
    for key in subjects:
        await data.delete(sequence_key(key_prefix, key))


async def collect(data: RedisPort, pattern: str) -> list[str]:
    return [key async for key in matching_keys(data, pattern)]


async def first_match(data: RedisPort, pattern: str) -> str | None:
    """Any one key matching ``pattern``, stopping at the first page that has one."""
    cursor = 0
    while True:
        cursor, keys = await data.scan(cursor, match=pattern, count=SCAN_BATCH)
        if keys:
            return keys[0]
        if cursor == 0:
            return None


# -- the lab's bootstrap -----------------------------------------------------


async def stamp_fresh_keyspace(data: RedisPort, key_prefix: str) -> bool:
    """Run the migration on a keyspace nothing has written to yet (no marker,
    no key under the prefix), which only stamps ``v2``; whether it did.

    A v2 store refuses an unmarked keyspace, as it must: unmarked usually
    means v1 spend not yet carried. A brand-new deployment has nothing to
    carry, and axond's own tests stamp it by running the migration; the lab's
    v2 kind does the same at boot so a fresh run can serve. Anything already
    under the prefix is left for ``connect`` to judge.
    """
    try:
        if await data.get(layout_key(key_prefix)) is not None:
            return False
        if await first_match(data, f"{glob_escape(key_prefix)}:*") is not None:
            return False
    except UNREACHABLE as error:
        raise BudgetError(BACKEND, f"the server did not answer at boot: {error}") from error
    await migrate_v1_to_v2(data, key_prefix, ())
    return True
