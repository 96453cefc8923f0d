"""The race report: one model for the file ``hunt`` writes and ``replay`` reads.

A report (``data/races/*.toml``, ``data/races/README.md`` shows the format)
is a ``RaceReport``: its fields are the file's keys, in the order it is
written. ``RaceReport.load(path)`` reads and validates one (a bad report is a
``ScenarioError``, one line per problem naming the file and the field, which
the CLI prints as exit 2), imports its ``plugins`` and reads the scenario file
it names; ``dumps()`` / ``dump(path)`` write it back as TOML, laid out as
people write reports: the top-level keys, then ``[variant]``, ``[fixed]``,
each ``[[schedule]]`` fault and ``[invariant]``. What is written loads back
equal (comments are not kept: a report is written once, by ``hunt``, then
edited by hand).

Two fields are kept as written and read through a property: ``scenario``
(``scenario_as_written``: a path relative to the report, or an inline table;
``report.scenario`` is the scenario table itself) and ``[invariant]``
(``invariant_as_written``; ``report.invariant`` is its breaking condition,
``report.reference`` its reference store kind).
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from simulator.scenario.base import Model
from simulator.scenario.conditions import Condition, Expectation, parse_condition
from simulator.scenario.model import ScenarioError, format_errors, read_toml, set_dotted
from stores import registry
from stores.domains import Seed

INVARIANT_SHAPES = ("{ metric = NAME, broken_when = '< 0' }, { broken_when = 'CONDITION' } "
                    "and/or { reference = KIND }")

EMPTY_FIXED = "[fixed]  # fill in the fixed store's changes to compare with --against fixed"
"""How an empty ``[fixed]`` is written: a hunted report names no fixed store
unless its hunt had a reference."""


class ReportInvariant(Model):
    """``[invariant]``: when a replay counts as broken. A threshold on one
    metric (``metric`` and ``broken_when = "< 0"``), a whole condition
    (``broken_when`` alone), and/or a ``reference`` store kind the store must
    do no worse than."""

    metric: str | None = None
    broken_when: str | None = None
    reference: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_of_the_shapes(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or all(data.get(key) is None
                                                for key in ("broken_when", "reference")):
            raise ValueError(f"expected {INVARIANT_SHAPES}")
        return data

    @field_validator("broken_when")
    @classmethod
    def _a_condition(cls, text: str | None, info: Any) -> str | None:
        metric = info.data.get("metric")
        if text is None:
            if metric is not None:
                raise ValueError(f"metric = {metric!r} needs its threshold, e.g. "
                                 f"broken_when = '< 0' (got none)")
            return text
        _condition(metric, text)  # a ValueError names what is wrong with it
        return text

    @property
    def condition(self) -> Condition | None:
        """The breaking condition (None: judged by ``reference`` alone)."""
        return None if self.broken_when is None else _condition(self.metric, self.broken_when)

    @classmethod
    def of(cls, condition: Condition | None, reference: str | None) -> ReportInvariant:
        """``[invariant]`` for a hunt's question: a single threshold as
        ``metric`` and ``broken_when = "< 0"``; a compound condition whole in
        ``broken_when``."""
        if isinstance(condition, Expectation):
            return cls(metric=condition.metric, broken_when=condition.comparison,
                       reference=reference)
        return cls(broken_when=None if condition is None else str(condition),
                   reference=reference)


def _condition(metric: str | None, text: str) -> Condition:
    return Expectation.parse(metric, text) if metric is not None else parse_condition(text)


class RaceReport(Model):
    """One broken invariant, written down so anyone can replay it."""

    title: str
    story: str = ""
    scenario_as_written: str | dict[str, Any] = Field(alias="scenario")
    """A scenario file's path (relative to the report), or an inline table."""
    seed: Seed
    plugins: tuple[str, ...] = ()
    """Modules registering the report's store kinds from outside the lab;
    imported when the report is loaded."""
    fingerprint: str | None = None
    """Of the trace recorded beside the report (``NAME.trace.parquet``)."""
    variant: dict[str, Any]
    """Dotted scenario paths that make it the broken store."""
    fixed: dict[str, Any] = {}
    """... and the fixed one, for ``replay --against fixed`` (empty: none named)."""
    schedule: list[dict[str, Any]] = []
    """The explicit fault schedule (replaces the scenario's)."""
    invariant_as_written: ReportInvariant = Field(alias="invariant")

    _path: Path | None = PrivateAttr(None)
    _scenario: dict[str, Any] | None = PrivateAttr(None)

    @field_validator("scenario_as_written", mode="before")
    @classmethod
    def _path_or_table(cls, value: Any) -> Any:
        if not isinstance(value, str | dict):
            raise ValueError(f"expected a scenario file's path (relative to the report) or "
                             f"an inline [scenario] table, got {value!r}")
        return value

    @field_validator("plugins", mode="before")
    @classmethod
    def _module_names(cls, value: Any) -> Any:
        if not (isinstance(value, list | tuple) and all(isinstance(name, str) for name in value)):
            raise ValueError(f"expected a list of module names, got {value!r}")
        return value

    def __eq__(self, other: object) -> bool:
        """Two reports are equal when they say the same: where each was read
        from is no part of it."""
        if not isinstance(other, RaceReport):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # its tables are mutable

    # -- what the fields mean ---------------------------------------------------------

    @property
    def path(self) -> Path:
        """The file the report was read from."""
        if self._path is None:
            raise ValueError(f"the race report {self.title!r} was not read from a file "
                             f"(RaceReport.load reads one)")
        return self._path

    @property
    def scenario(self) -> dict[str, Any]:
        """The scenario table: the inline one, or the file's it names."""
        if self._scenario is not None:
            return self._scenario
        if isinstance(self.scenario_as_written, dict):
            return self.scenario_as_written
        raise ValueError(f"the race report {self.title!r} names its scenario by a path "
                         f"({self.scenario_as_written!r}), relative to a file it was not "
                         f"read from (RaceReport.load reads one)")

    @property
    def invariant(self) -> Condition | None:
        """``[invariant]``'s breaking condition (None: judged by ``reference`` alone)."""
        return self.invariant_as_written.condition

    @property
    def reference(self) -> str | None:
        """``[invariant] reference``: a store kind the run must do no worse than."""
        return self.invariant_as_written.reference

    @property
    def recorded_trace(self) -> Path:
        return self.path.with_suffix(".trace.parquet")

    def scenario_for(self, changes: dict[str, Any]) -> dict[str, Any]:
        """The scenario with ``changes`` (dotted paths) and the report's
        schedule. Its description becomes the report's title: the scenario's
        own described the scenario before the report changed it (its faults,
        its loss rates), and would contradict what runs."""
        data = copy.deepcopy(self.scenario)
        for dotted, value in changes.items():
            set_dotted(data, dotted, value)
        data.setdefault("faults", {})["schedule"] = copy.deepcopy(self.schedule)
        data["description"] = self.title
        return data

    # -- reading and writing ----------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> RaceReport:
        """Read a race report; a bad one is a ``ScenarioError`` naming the
        file and the field. Imports its plugins and reads its scenario file."""
        path = Path(path)
        data = read_toml(path, "race report")
        required = [field.alias or name for name, field in cls.model_fields.items()
                    if field.is_required()]
        missing = [name for name in required if name not in data]
        if missing:
            raise ScenarioError(f"{path}: missing {', '.join(missing)}")
        try:
            report = cls.model_validate(data)
        except ValidationError as error:
            detail = format_errors(error, model=cls, data=data)
            raise ScenarioError("\n".join(f"{path}: {line}" for line in detail.split("\n")
                                          if line.strip())) from None
        try:
            registry.load_plugins(report.plugins)
        except registry.PluginError as error:
            raise ScenarioError(f"{path}: plugins: the report's stores need it: {error}") from None
        scenario = report.scenario_as_written
        if isinstance(scenario, str):
            scenario = read_toml((path.parent / scenario).resolve(),
                                 f"scenario file (named by the race report {path})")
        report._path, report._scenario = path, scenario
        return report

    def dumps(self) -> str:
        """The report as TOML, as ``hunt`` writes it; ``load`` reads it back equal."""
        head = [("title", self.title), ("story", self.story or None)]
        if isinstance(self.scenario_as_written, str):
            head.append(("scenario", self.scenario_as_written))
        head += [("seed", self.seed), ("plugins", list(self.plugins) or None),
                 ("fingerprint", self.fingerprint)]
        sections = [[_pair(key, value) for key, value in head if value is not None]]
        if isinstance(self.scenario_as_written, dict):
            sections.append(_table("scenario", self.scenario_as_written))
        sections.append(_table("variant", self.variant))
        sections.append(_table("fixed", self.fixed) if self.fixed else [EMPTY_FIXED])
        sections += [_table("schedule", fault, array=True) for fault in self.schedule]
        sections.append(_table("invariant", self.invariant_as_written.model_dump(
            exclude_none=True)))
        return "\n\n".join("\n".join(lines) for lines in sections) + "\n"

    def dump(self, path: str | Path) -> Path:
        """Write the report to ``path`` (a relative scenario path is read from
        beside it) and return the path."""
        path = Path(path)
        path.write_text(self.dumps(), encoding="utf-8")
        return path


# -- TOML, written ----------------------------------------------------------------------
# tomllib only reads. A report's values are TOML's own (what tomllib reads,
# what a hunt puts in a schedule): tables, arrays, text, numbers, booleans,
# dates; anything else is refused rather than written as something else.

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def toml_document(document: Mapping[str, Any]) -> str:
    """``document`` as TOML (a scenario, say): its plain keys, then each table
    under its header and each array of tables as ``[[key]]`` entries."""
    sections = [[_pair(key, value) for key, value in document.items()
                 if not _is_table(value) and not _is_table_array(value)]]
    for key, value in document.items():
        if _is_table(value):
            sections.append(_table(_key(key), value))
        elif _is_table_array(value):
            sections += [_table(_key(key), item, array=True) for item in value]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def _table(name: str, table: Mapping[str, Any], array: bool = False) -> list[str]:
    """``[name]`` (``[[name]]``) and its keys; then its sub-tables, each under
    its own header, and arrays of tables as ``[[name.key]]``."""
    lines = [f"[[{name}]]" if array else f"[{name}]"]
    lines += [_pair(key, value) for key, value in table.items()
              if not _is_table(value) and not _is_table_array(value)]
    for key, value in table.items():
        inner = f"{name}.{_key(key)}"
        if _is_table(value):
            lines += ["", *_table(inner, value)]
        elif _is_table_array(value):
            for item in value:
                lines += ["", *_table(inner, item, array=True)]
    return lines


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(map(_is_table, value))


def _pair(key: str, value: Any) -> str:
    """``key = value``; text of several lines as a multi-line string."""
    if isinstance(value, str) and "\n" in value:
        return f"{_key(key)} = {_multiline(value)}"
    return f"{_key(key)} = {_value(value)}"


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"a TOML key is text, got {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # as TOML writes floats: 0.5, 1e-05, inf, nan, -0.0
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = ", ".join(f"{_key(key)} = {_value(item)}" for key, item in value.items())
        return "{ " + pairs + " }" if pairs else "{}"
    raise TypeError(f"cannot write {value!r} in TOML (a {type(value).__name__})")


def _escape(character: str) -> str:
    if character in _ESCAPES:
        return _ESCAPES[character]
    if ord(character) < 0x20 or ord(character) == 0x7F:
        return f"\\u{ord(character):04x}"
    return character


def _string(text: str) -> str:
    return '"' + "".join(map(_escape, text)) + '"'


def _multiline(text: str) -> str:
    """A multi-line basic string, opened on a line of its own (TOML drops
    that first line break): line breaks and tabs stay as they are, a quote is
    escaped only where it would close the string."""
    out = []
    for index, character in enumerate(text):
        if character in "\n\t":
            out.append(character)
        elif character == '"':
            closes = index + 1 == len(text) or text[index + 1] == '"'
            out.append('\\"' if closes else '"')
        else:
            out.append(_escape(character))
    return '"""\n' + "".join(out) + '"""'
