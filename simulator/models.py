"""The base of every scenario model: frozen, strict about unknown fields, and
validating defaults too (they are written as people write them, "30s")."""

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
