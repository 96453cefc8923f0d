"""Settings of the av_state counter stores.

The store itself takes whole keys, as the seed's does: a session's prefix
comes with each request. ``key_prefix`` is where the lab puts those sessions,
so a run (and its cleanup) stays inside its own namespace on a shared server.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StateSettings(BaseModel):
    """What one replica's counter store is configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    key_prefix: str = Field(
        "av_state", description="Prefix under which every session's counter keys are written."
    )
