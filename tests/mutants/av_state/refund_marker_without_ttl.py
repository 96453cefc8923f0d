"""Mutant (Lua): the refund scripts write their replay marker with no expiry.

The marker only needs to outlive the driver's retry window; the seed gives
it 5 minutes so a day of refunds does not accumulate a day of marker keys
(004_3d0b2b7832cd8f83.txt:26-29, the SET NX ... EX of 135-152). Without EX
every refund leaves a key in Redis for good. Nothing the lab does writes a
marker without its TTL: ``refund_markers_without_ttl`` is the store's alone.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="refund_marker_without_ttl",
    breaks="the refund scripts SET their replay marker NX with no EX: every refund "
           "leaves a marker key that never expires",
    violates="004_3d0b2b7832cd8f83.txt:26-29",
    scenario={},
    damage=("refund_markers_without_ttl",),
    exposed_by="",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(
    refund=Patch("'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS})", "'NX')"),
    refund_many=Patch("'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS})", "'NX')")))
