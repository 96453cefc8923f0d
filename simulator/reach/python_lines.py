"""Which lines of a store's own Python classes can run, and which did.

The lines that can run are coverage.py's statements inside the methods a
class defines itself (the methods ``mutate`` mutates; a ``def`` line runs at
import, not in a run). Which ran is coverage.py's tracer's record, limited to
the files of those classes: a multi-line statement counts once, on its first
line, as coverage.py reports it. A mutant class is compiled from its base's
file at its base's lines (``simulator.mutate.python``), so its lines are
counted as the base's.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

QUIET = ["no-data-collected", "module-not-measured", "module-not-imported",
         "already-imported", "couldnt-parse", "no-ctracer"]
"""coverage.py's warnings, none of which the lab's user can act on: a run
that never enters the store's code simply reached none of its lines."""


@cache
def _parser(path: str):  # -> coverage.parser.PythonParser
    from coverage.parser import PythonParser

    parser = PythonParser(filename=path)
    parser.parse_source()
    return parser


def source_file(cls: type) -> str:
    path = inspect.getsourcefile(cls)
    if path is None:
        raise ValueError(f"{cls.__qualname__} has no source file: its reach cannot be told")
    return path


@cache
def runnable_lines(cls: type) -> frozenset[int]:
    """The file lines of the statements in the methods ``cls`` defines itself."""
    lines, first = inspect.getsourcelines(cls)
    (classdef,) = ast.parse(textwrap.dedent("".join(lines))).body
    assert isinstance(classdef, ast.ClassDef)
    statements = _parser(source_file(cls)).statements
    found: set[int] = set()
    for method in classdef.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        start = method.body[0].lineno + first - 1
        end = (method.end_lineno or method.lineno) + first - 1
        found.update(line for line in statements if start <= line <= end)
    return frozenset(found)


def statement_line(cls: type, line: int) -> int:
    """The first line of the statement holding file line ``line`` of ``cls``'s
    file (what the tracer reports it as)."""
    return _parser(source_file(cls)).first_line(line)


class PythonTracer:
    """coverage.py's tracer over the given files, one run at a time."""

    def __init__(self, files: list[str]) -> None:
        import coverage

        self.files = sorted(set(files))
        self._coverage = coverage.Coverage(data_file=None, include=self.files,
                                           config_file=False)
        self._coverage.set_option("run:disable_warnings", QUIET)

    @contextmanager
    def tracing(self) -> Iterator[None]:
        self._coverage.erase()
        self._coverage.start()
        try:
            yield
        finally:
            self._coverage.stop()

    def reached(self) -> dict[str, set[int]]:
        """Per file, the first lines of the statements that ran."""
        data = self._coverage.get_data()
        found: dict[str, set[int]] = {}
        for path in self.files:
            raw = data.lines(path) or ()
            parser = _parser(path)
            found[path] = {parser.first_line(line) for line in raw}
        return found
