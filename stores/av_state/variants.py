"""Historical variants of the Redis state store: the bugs the seed's comments
say the fixed one fixed.

Most are ``RedisStateStore`` running the shipped scripts with one thing
changed: one script, or the two refund scripts where the fix went into both,
patched back at the seam the fix changed (``stores.scripts.Patch``: the
shipped lines, and what they were before the fix), so a variant states its
bug and nothing else, and a shipped script edited where a variant patches it
fails at import instead of leaving the variant fixed. Their Python is the
fixed store's, so the calls, their keys and their arguments are the same;
only what the server does with them differs. Where the fix was in the store's
own code (``remove_prefix_noop``), the variant is a subclass overriding that
one method, running the shipped scripts. Each registers through ``KINDS``
here with ``kinds.redis_kind``; the package's ``KINDS`` includes them. The
lab runs a variant and the fixed store on the same scenario and seed to show
what the fix is worth (``data/scenarios/av-state-variant-*.toml``), with a
race report in ``data/races/`` that ``hunt`` found. Some need sessions that
reach them: ``refund_many_tonumber`` whole refunds (the "all" amount, clamped
to ``I64_MAX``: ``workload.sessions.refunds.whole``), ``add_without_ttl`` a
tally kept with ``add`` (``workload.sessions.tally``),
``refusal_without_ttl_refresh`` sessions that stay at their cap, still
calling, past the 24 h TTL, and ``remove_prefix_noop`` session ids opened
again (``workload.sessions.prefix_from = "subject"``).
"""

from __future__ import annotations

from stores.av_state.keys import MARKER_INFIX
from stores.av_state.kinds import redis_kind
from stores.av_state.redis_store import SCRIPTS, RedisStateStore
from stores.registry import StoreKind
from stores.scripts import Patch

REFUND_WITHOUT_MARKER = SCRIPTS.patching(
    # The bug: no one-shot marker on either refund script. A driver that
    # re-sends a refund whose reply was lost credits it twice: budget minted
    # out of a network flap. The fix: SET NX on a marker first. The marker's
    # key is still passed, and ignored.
    refund=Patch(
        "if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS})"
        " == false then\n    return -1\nend\n", ""),
    refund_many=Patch(
        "if redis.call('SET', KEYS[#KEYS], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS})"
        " == false then\n    return -1\nend\n", ""),
)

REFUND_NOT_EXISTS_GATED = SCRIPTS.patching(
    # The bug: DECRBY on the raw key. A refund landing after the session's
    # remove_prefix re-creates its counter, and the clamp at zero is a SET
    # with no TTL: a permanent key per racing refund, and a recycled session
    # prefix inherits it. The fix: refund only a counter that EXISTS, and
    # clamp with SET ... EX.
    refund=(
        Patch("if redis.call('EXISTS', KEYS[1]) == 0 then\n    return 0\nend\n", ""),
        Patch("redis.call('SET', KEYS[1], 0, 'EX', ${COUNTER_TTL_SECONDS})",
              "redis.call('SET', KEYS[1], 0)"),
    ),
    refund_many=(
        # The gate's `if` and the `end` closing it; the loop body runs for every key.
        Patch("    if redis.call('EXISTS', key) == 1 then\n", ""),
        Patch("        end\n    end\nend\n", "        end\nend\n"),
        Patch("redis.call('SET', key, 0, 'EX', ${COUNTER_TTL_SECONDS})",
              "redis.call('SET', key, 0)"),
    ),
)

REFUND_MANY_TONUMBER = SCRIPTS.patching(
    # The bug: refund_many's amounts through tonumber. An amount near I64_MAX
    # rounds to 2^63, DECRBY rejects it mid-loop, and the batch half-commits
    # (Redis keeps the writes made before the error). The fix: DECRBY takes
    # the caller's exact integer string.
    refund_many=Patch("redis.call('DECRBY', key, ARGV[i])",
                      "redis.call('DECRBY', key, tonumber(ARGV[i]))"),
)

ADD_WITHOUT_TTL = SCRIPTS.patching(
    # The bug: add's INCRBY with no EXPIRE. A counter touched only through
    # add never expires, and an abandoned session's leaks until Redis runs
    # out of memory. The fix: the same 24 h TTL as every spend, an EXPIRE
    # after the INCRBY. (The refusal path's EXPIRE, which keeps a refused
    # counter alive, the historical add had too: it stays.)
    add=Patch(
        "local result = redis.call('INCRBY', KEYS[1], ARGV[1])\n"
        "-- The same TTL as try_spend: a counter touched only through add (bookkeeping,\n"
        "-- telemetry) would otherwise live forever and leak memory until Redis OOMs.\n"
        "redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})\n"
        "return result\n",
        "return redis.call('INCRBY', KEYS[1], ARGV[1])\n"),
)

REFUSAL_WITHOUT_TTL_REFRESH = SCRIPTS.patching(
    # The bug: a refused spend returns without touching any TTL. A session at
    # its cap that keeps retrying (every attempt refused, the commit loop never
    # reached) has its counters expire a day after its last successful spend;
    # the next attempt reads 0 and commits: the cap resets mid-session. The
    # fix: refresh the TTL of every existing key of the batch before refusing
    # (an actively retrying session is not abandoned).
    try_spend=Patch(
        "        -- Refresh the TTL of every existing key before refusing. Otherwise a\n"
        "        -- session at its cap that keeps retrying (every attempt refused, the\n"
        "        -- commit loop never reached) has its counter expire a day after its\n"
        "        -- last successful spend, and the next attempt sees 0: the cap\n"
        "        -- silently resets mid-session. The TTL reclaims abandoned sessions;\n"
        "        -- an actively retrying session is not abandoned.\n"
        "        for _, other in ipairs(KEYS) do\n"
        "            if redis.call('EXISTS', other) == 1 then\n"
        "                redis.call('EXPIRE', other, ${COUNTER_TTL_SECONDS})\n"
        "            end\n"
        "        end\n", ""),
)



class RemovePrefixNoop(RedisStateStore):
    """The bug: ``remove_prefix`` left as the store interface's default, which
    does nothing (the 24 h TTL was taken for the only cleanup needed). A
    finished session's counters stay, and a session opened again under the
    same id spends on the same keys: it starts with the last one's counts, up
    to a day of them, where the in-memory twin starts from zero. The fix:
    ``SCAN`` the prefix and ``DEL`` every key it finds. The seam is this one
    method; the scripts are the shipped ones."""

    async def remove_prefix(self, prefix: str) -> None:
        return None


class MarkerOutsideSlot(RedisStateStore):
    """The bug shows on a cluster only: a refund's replay marker is named by
    the refund alone (``...:refund:r:ID``, under the counter's prefix but not
    its ``{hash-tag}``), not as a suffix of the counter it refunds. The refund
    script declares the counter and the marker, which hash to two slots, so
    the node answers ``CROSSSLOT`` and the refund never lands: the counter
    stays charged for work that was given back. The fix names the marker
    ``COUNTER:r:ID`` (seed 004: "same hash tag as the counter — a suffix on
    KEYS[1] — so cluster mode keeps the script single-slot"). On one server the
    marker works either way."""

    def refund_marker(self, key: str) -> str:
        tag = key.find("{")
        return f"{key[:tag] if tag >= 0 else ''}refund{MARKER_INFIX}{self.runtime.new_id()}"


KINDS: tuple[StoreKind, ...] = (
    redis_kind("av_state.variants.refund_without_marker",
               "historical: refunds with no replay marker; a re-sent refund credits twice "
               "(budget minted)",
               scripts=REFUND_WITHOUT_MARKER),
    redis_kind("av_state.variants.refund_not_exists_gated",
               "historical: refunds DECRBY the raw key; one after cleanup resurrects the "
               "counter at 0 with no TTL",
               scripts=REFUND_NOT_EXISTS_GATED),
    redis_kind("av_state.variants.refund_many_tonumber",
               "historical: refund_many converts amounts through tonumber; an I64_MAX amount "
               "fails mid-batch and the batch half-commits",
               scripts=REFUND_MANY_TONUMBER),
    redis_kind("av_state.variants.add_without_ttl",
               "historical: add sets no TTL; counters touched only by add never expire",
               scripts=ADD_WITHOUT_TTL),
    redis_kind("av_state.variants.refusal_without_ttl_refresh",
               "historical: a refused spend leaves the TTLs as they were; a session retrying "
               "at its cap loses its counters a day after its last commit (the cap resets)",
               scripts=REFUSAL_WITHOUT_TTL_REFRESH),
    redis_kind("av_state.variants.marker_outside_slot",
               "historical: a refund's marker named by the refund alone, outside its "
               "counter's hash slot; on a cluster every refund is refused (CROSSSLOT)",
               store_class=MarkerOutsideSlot),
    redis_kind("av_state.variants.remove_prefix_noop",
               "historical: remove_prefix does nothing; a session id opened again inherits "
               "the last session's counters",
               store_class=RemovePrefixNoop),
)
