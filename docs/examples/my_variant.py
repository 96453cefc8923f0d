"""my_variant: the v1 budget store with our own settle script (a plugin)."""

from pathlib import Path

from stores.axond_budget import SCRIPTS, redis_kind
from stores.registry import register

register(redis_kind(
    "my_team.settle_once",
    "v1 store whose settle charges only a hold still held (my_settle_v1.lua)",
    scripts=SCRIPTS.replacing(settle_v1=Path(__file__).with_name("my_settle_v1.lua")),
))
