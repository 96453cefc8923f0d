"""An operator's configuration change (``reconfigure``): which of a store's
settings may change while it runs, and what the change is.

A store kind's settings model declares the settings an operator may reload
(``reloadable``: a tuple of names as ``store_settings`` spells them, e.g.
``("some_cap", "some_ttl")``): caps and TTLs, whose
meaning the family's oracle follows replica by replica. A kind that
declares none refuses a ``reconfigure`` entry: its oracle could not tell what
the change, rather than the store, caused.

A ``reconfigure`` entry names the settings it changes and their new values
(``settings``); each must be reloadable, and the store's settings with the
change must still be valid settings of the kind: checked when the scenario
is read, one line per problem naming the field (``unreloadable`` here, the
values by the scenario model, which reads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from simulator.scenario.domains import field_path

RELOADABLE = "reloadable"
"""The class attribute of a settings model naming its reloadable settings."""


@dataclass(frozen=True)
class Reconfiguration:
    """A ``reconfigure`` entry, read: its schedule entry and the changes it
    rolls out, by the settings model's field names, as parsed values
    (``{"some_ttl_ms": 15_000}``)."""

    entry: Any
    """The ``ScheduledFault`` (``at``, ``every``, ``down_for``, ``replicas``)."""
    changes: Mapping[str, Any]

    def words(self) -> str:
        """``some_cap=500000,some_ttl_ms=1000``, as the trace names it."""
        return ",".join(f"{name}={value}" for name, value in sorted(self.changes.items()))


def reloadable(settings_model: type[BaseModel]) -> tuple[str, ...]:
    """The settings of ``settings_model`` an operator may reload, as written."""
    return tuple(getattr(settings_model, RELOADABLE, ()))


def field_name(settings_model: type[BaseModel], written: str) -> str | None:
    """The field ``written`` (a name or an alias, as ``store_settings`` spells it) names."""
    for name, field in settings_model.model_fields.items():
        if written in (name, field.alias):
            return name
    return None


def unreloadable(settings_model: type[BaseModel], kind: str, changes: Mapping[str, Any],
                 path: tuple[Any, ...]) -> list[str]:
    """The settings ``changes`` names that a ``kind`` store may not reload,
    one line each, naming the field at ``path`` + the setting."""
    allowed = reloadable(settings_model)
    said = (f"one of {', '.join(allowed)}" if allowed
            else f"nothing: the store {kind!r} reloads no setting")
    return [f"{field_path((*path, name))}: expected a setting the operator may reload, "
            f"{said}; got {name!r}" for name in changes if name not in allowed]


def takes(settings_model: type[BaseModel], store_settings: Mapping[str, Any],
          changes: Mapping[str, Any]) -> bool:
    """Whether ``store_settings`` with ``changes`` are settings ``settings_model`` takes."""
    try:
        settings_model.model_validate({**store_settings, **changes})
    except ValidationError:
        return False
    return True


def parsed_changes(settings_model: type[BaseModel], store_settings: Mapping[str, Any],
                   changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` as the settings model reads them, by field name (checked
    valid already: ``problems``)."""
    parsed = settings_model.model_validate({**store_settings, **changes})
    names = [field_name(settings_model, written) for written in changes]
    return {name: getattr(parsed, name) for name in names if name is not None}


def reconfigured(settings: BaseModel, changes: Mapping[str, Any]) -> BaseModel:
    """``settings`` with ``changes`` (by field name) applied: those of its
    fields it has (a migration may have moved the fleet to another kind)."""
    kept = {name: value for name, value in changes.items() if name in type(settings).model_fields}
    return settings.model_copy(update=kept)


FACTORS = ((11, 10), (9, 10), (2, 1), (1, 2), (10, 1), (1, 10))
"""How a drawn change scales a setting, gentlest first (what shrinking
prefers): a tenth more or less, doubled, halved, ten times more or less."""


def drawn_values(settings_model: type[BaseModel],
                 store_settings: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The new values ``hunt --faults reconfigure`` draws for each reloadable
    setting the store is configured with, as ``store_settings`` writes them:
    the current value scaled by ``FACTORS`` (a duration in milliseconds,
    written ``"1500ms"``), gentlest first, each one the settings take."""
    current = settings_model.model_validate(dict(store_settings))
    found: dict[str, list[Any]] = {}
    for written in reloadable(settings_model):
        name = field_name(settings_model, written)
        value = None if name is None else getattr(current, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            continue  # not configured (a namespace cap a v1 store lacks)
        duration = name.endswith("_ms")
        values = []
        for times, over in FACTORS:
            scaled = value * times // over
            candidate = f"{scaled}ms" if duration else scaled
            if scaled != value and candidate not in values and takes(
                    settings_model, store_settings, {written: candidate}):
                values.append(candidate)
        if values:
            found[written] = values
    return found
