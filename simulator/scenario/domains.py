"""A field's domain in words, read from the model that enforces it, and its
path as a refusal names it.

The fields reference (``simulator.scenario.reference``) states every field's
domain, and a value outside it is refused with the same words
(``simulator.scenario.model.format_errors``): both come from here, and here they
come from the types and constraints validation itself applies — the
``Domain`` markers of ``stores.domains`` and ``stores.quantities``, the
bounds (``Field(ge=..., le=...)``), the literals and enumerations — so the
documentation cannot drift from what is checked.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from stores.domains import Domain, spell_number

Typed = tuple[Any, tuple[Any, ...]]
"""A type and the metadata it is annotated with (bounds, ``Domain`` markers)."""


def split(annotation: Any, metadata: Iterable[Any] = ()) -> Typed:
    """``annotation`` with its ``Annotated`` layers and ``None`` (an optional
    field) taken off, and every piece of metadata found on the way."""
    found = list(metadata)
    while True:
        if typing.get_origin(annotation) is Annotated:
            found += annotation.__metadata__
            annotation = typing.get_args(annotation)[0]
            continue
        options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if _is_union(annotation) and len(options) == 1:
            annotation = options[0]
            continue
        break
    flat: list[Any] = []
    for item in found:  # a Field(...) inside Annotated carries its bounds in its metadata
        flat += item.metadata if isinstance(item, FieldInfo) else [item]
    return annotation, tuple(flat)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def of_field(field: FieldInfo) -> Typed:
    return split(field.annotation, field.metadata)


def field_at(model: type[BaseModel], location: Sequence[Any]) -> Typed | None:
    """The type at ``location`` (a validation error's ``loc``: field names as
    written, list indexes, table keys) under ``model``; None when it leads
    elsewhere (a union's branch, a value read as text)."""
    current: Typed = (model, ())
    for part in location:
        annotation = current[0]
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = next((f for name, f in annotation.model_fields.items()
                          if (f.alias or name) == part), None)
            if field is None:
                return None
            current = of_field(field)
        elif origin in (list, tuple) and isinstance(part, int):
            current = split(typing.get_args(annotation)[0])
        elif origin is dict:
            current = split(typing.get_args(annotation)[1])
        else:
            return None
    return current


def describe(typed: Typed) -> str:
    """What values of this type may be: ``an integer from 1 to 100,000``."""
    annotation, metadata = typed
    domain = next((item for item in metadata if isinstance(item, Domain)), None)
    if domain is None:
        return _by_type(annotation)
    low, high = _bounds(domain, metadata)
    spell = domain.spell or spell_number
    return domain.kind + _range(low, high, lambda value: "0" if value == 0 else spell(value))


def _by_type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(value) for value in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in annotation)
    if annotation is bool:
        return "true or false"
    if annotation is str:
        return "text"
    if origin in (list, tuple):
        return "a list; each item: " + describe(split(typing.get_args(annotation)[0]))
    if origin is dict or annotation is dict:
        return "a table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a table"
    return "a value"


Bound = tuple[float, bool] | None
"""A bound and whether it is included."""


def _bounds(domain: Domain, metadata: Iterable[Any]) -> tuple[Bound, Bound]:
    """The tightest bounds of the type's own and its field's constraints."""
    low: Bound = None if domain.low is None else (domain.low, True)
    high: Bound = None if domain.high is None else (domain.high, True)
    for item in metadata:
        for name, included, is_low in (("ge", True, True), ("gt", False, True),
                                        ("le", True, False), ("lt", False, False)):
            value = getattr(item, name, None)
            if value is None or not isinstance(item, annotated_types.BaseMetadata):
                continue
            if is_low:
                low = _tighter(low, (value, included), max)
            else:
                high = _tighter(high, (value, included), min)
    return low, high


def _tighter(current: Bound, new: tuple[float, bool], pick: Any) -> Bound:
    if current is None or current[0] != new[0]:
        return new if current is None or pick(current[0], new[0]) == new[0] else current
    return (current[0], current[1] and new[1])  # the same value: exclusive wins


def _range(low: Bound, high: Bound, spell: Any) -> str:
    if low and high and low[1] and high[1]:
        return f" from {spell(low[0])} to {spell(high[0])}"
    parts = []
    if low:
        parts.append(f"{spell(low[0])} or more" if low[1] else f"more than {spell(low[0])}")
    if high:
        parts.append(f"at most {spell(high[0])}" if high[1] else f"less than {spell(high[0])}")
    return (", " + " and ".join(parts)) if parts else ""


def field_path(parts: Iterable[Any]) -> str:
    """A field's path as a refusal names it, ``faults.schedule.0.replica``: a
    key holding a space, a quote or a character that does not print (a line
    break) is quoted as TOML quotes it (``fleet."rep\\nlicas"``), so a user's
    key can neither split the one line its problem is said in nor blur where
    it starts and ends. (A dotted key stays bare: a sweep's ``vary`` names
    fields by their dotted paths.)"""
    return ".".join(str(part) if isinstance(part, int) or _plain(str(part))
                    else json.dumps(str(part)) for part in parts)


def _plain(key: str) -> bool:
    return bool(key) and key.isprintable() and not any(
        character.isspace() or character in "\"\\" for character in key)
