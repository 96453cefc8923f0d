"""Mutant (Lua, v1): a reserve executed twice under one id holds twice.

The bug: when the driver re-sends a reserve whose reply was late (it timed
out and retried, so the script runs twice under the same reservation id),
the second execution finds the id already held and writes a second hold
under another name. The request's settlement releases only its own id; the
second hold counts against the cap until its deadline. The seed's reserve
writes the hold under the caller's id (``HSET ... id``), so a re-sent
reserve rewrites the same hold (``000_cfca2acab2180986.txt:76-107``): the
id, made by the caller once per request, is what makes the retry harmless.

Sound on a quiet network; exposed by ``duplicate_execution`` on
``reserve_v1`` (a slow reply past the timeout, with driver retries on).
"""

from __future__ import annotations

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.scripts import Patch

MUTANT = Mutant(
    name="retried_reserve_holds_twice",
    derived_from="axond_budget.redis_v1",
    breaks="a reserve the driver re-sends writes a second hold beside the first",
    scenario="budget-exposed-retried-reserve.toml",
    damage=("leaks",),
    replaces="reserve_v1",
)


KIND = register_exposed(MUTANT, Patch(
    "redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms))",
    # The bug: a second execution takes its own id to be someone else's.
    "local id = reservation_id\n"
    "if redis.call('HEXISTS', KEYS[2], id) == 1 then\n"
    "  id = id .. '~again'\n"
    "end\n"
    "redis.call('HSET', KEYS[2], id, estimate .. ':' .. (now_ms + ttl_ms))"))
