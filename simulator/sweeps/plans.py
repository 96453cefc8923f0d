"""Per-family plans: one TOML file a family, ``FAMILY.toml``, in one directory
(``bench --rediscovery``'s in ``data/rediscovery/``, ``bench --power``'s in
``data/power/``), each read into the plan's pydantic model with its family
named by the file."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

PlanModel = TypeVar("PlanModel", bound=BaseModel)


def load_plan(path: Path, model: type[PlanModel], what: str) -> PlanModel:
    """The plan in ``path``; one clear line (``what``: the kind of plan) when
    it is not one."""
    try:
        return model.model_validate({**tomllib.loads(path.read_text()), "family": path.stem})
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as error:
        raise ValueError(f"{path}: not a {what}: {str(error).splitlines()[0]}") from None


def family_plans(directory: Path, families: Sequence[str], model: type[PlanModel],
                 option: str, what: str) -> list[PlanModel]:
    """The plans in ``directory`` of ``families`` (all when empty), by family
    name; a family with none is refused in one line naming ``option``."""
    found = {path.stem: path for path in sorted(directory.glob("*.toml"))}
    unknown = [family for family in families if family not in found]
    if unknown:
        raise ValueError(f"{option}: no plan for {', '.join(unknown)}; plans: "
                         f"{', '.join(found) or 'none'} (in {directory})")
    return [load_plan(found[family], model, what) for family in (families or found)]
