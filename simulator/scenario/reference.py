"""The scenario fields reference: every field, its default, its domain and its
meaning, and the rules between fields (``python -m simulator fields``;
``docs/scenario-fields.txt`` is its output for the kinds the lab ships).

Everything here is read from the models that validate a scenario: the
defaults and descriptions from the fields, the domains through
``simulator.scenario.domains``, the distributions' parameters from their own
tables, the rules between fields from the checks that enforce them. A test
keeps the file in ``docs/`` equal to what this prints.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from pydantic import BaseModel

from simulator.scenario import distributions
from simulator.scenario.domains import describe, of_field
from simulator.scenario.model import CROSS_FIELD_CHECKS, Scenario
from stores import registry
from stores.quantities import DURATION_HINT, RATE_HINT

DOMAIN_INDENT = " " * 43
"""A field's domain is on the line under it, under its default."""

PREAMBLE = (
    "Every field has a default and a domain: what its values may be. A value outside "
    "its domain, or fields that disagree (see the end), are refused before anything "
    "runs: one line naming the file, the field, what was expected and what was given.",
    "Numbers are written as numbers: true, false and \"500\" are not numbers, NaN and "
    "infinities are refused.",
    f"Durations: {DURATION_HINT}; at most ten years.",
    f"Rates: {RATE_HINT}.",
)


def fields_reference(shipped_only: bool = False) -> str:
    """Every scenario field and every store's settings, with defaults and
    domains (only the kinds the lab ships with ``shipped_only``: the
    reference in ``docs/``)."""
    lines = ["# Scenario fields", "", *PREAMBLE, "", "# Distributions", "",
             *distributions.reference(), "", "# Fields", "", *_model_fields(Scenario, "")]
    kinds = registry.shipped() if shipped_only else registry.kinds()
    for name, kind in sorted(kinds.items()):
        lines += ["", f"# store_settings for {name}: {kind.summary}", ""]
        lines += _model_fields(kind.settings_model, "store_settings.") or ["(none)"]
    lines += ["", "# Fields checked together", ""]
    lines += [f"- {_one_line(inspect.getdoc(check) or '')}" for check in CROSS_FIELD_CHECKS]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds, directly, optionally or as a list of them."""
    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            if getattr(candidate, "written_as_text", False):
                return None, ""
            if typing.get_origin(annotation) is list:
                return candidate, "list"
            return candidate, "optional" if type(None) in candidates else "table"
    return None, ""


def _model_fields(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        written = field.alias or name
        path = f"{prefix}{written}"
        nested, shape = _nested_model(field.annotation)
        if nested is not None:
            header = {"table": f"[{path}]", "optional": f"[{path}]  (optional)",
                      "list": f"[[{path}]]  (a list)"}[shape]
            rows.append(f"\n{header}  {field.description or ''}".rstrip())
            rows.extend(_model_fields(nested, f"{path}."))
            continue
        if field.is_required():
            default = "(required)"
        elif field.default_factory is not None:
            default = repr(field.default_factory())
        else:
            default = field.default
            default = repr(getattr(default, "value", default))
            if default.startswith(("Arrivals(", "Retries(")):
                default = repr(str(field.default))
        rows.append(f"{path:<42} default {default:<26} {field.description or ''}".rstrip())
        rows.append(f"{DOMAIN_INDENT}domain: {describe(of_field(field))}")
    return rows
