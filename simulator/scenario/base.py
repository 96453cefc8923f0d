"""The base of every scenario model: frozen, strict about unknown fields, and
validating defaults too (they are written as people write them, "30s")."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from stores.domains import Integer

MAX_REPLICAS = 100_000
"""The largest fleet: ``fleet.replicas`` and every field that numbers or
counts replicas (a fault's, a migration's, an arrival's) is bounded by it."""

ReplicaIndex = Annotated[Integer, Field(ge=0, le=MAX_REPLICAS - 1)]
"""A replica's number, from 0; below ``fleet.replicas`` too (the scenario
checks the two together)."""


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
