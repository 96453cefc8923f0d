"""Which lines of a store's own Python classes can run, and which did.

The lines that can run are the first lines of the statements in the methods
a class defines itself (the methods ``mutate`` mutates; a ``def`` line runs
at import, not in a run; a docstring is no statement). Which ran is told by
the methods themselves: while a run records its reach, each such method is
replaced by a copy compiled from the same source at the same lines with a
mark before every statement (``Marked``), and put back after.

A tracer (coverage.py, ``sys.settrace``) would see every Python call of the
run to find the store's few, and measured 1.7x to 3x a run's time on the
lab's families; the marks cost only where the store's code runs. A mutant
class (``simulator.mutate.python``) is marked from its own mutated source,
so its lines count as its base's, where it stands.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

MARK = "__lab_reach_mark__"
"""The name of the mark's function in a marked method's namespace."""
OWNER = "__lab_reach_owner__"
"""The class a marked method's bare ``super()`` names (as it did in place)."""
SOURCE = "__lab_source__"
"""Where a class compiled from other text than its file's (a mutant) keeps
that text and the file line it starts on."""


def source_file(cls: type) -> str:
    path = inspect.getsourcefile(cls)
    if path is None:
        raise ValueError(f"{cls.__qualname__} has no source file: its reach cannot be told")
    return path


def class_text(cls: type) -> tuple[str, int]:
    """The class's source, dedented, and the file line it starts on."""
    if SOURCE in vars(cls):
        return vars(cls)[SOURCE]
    lines, first = inspect.getsourcelines(cls)
    return textwrap.dedent("".join(lines)), first


def _methods(cls: type) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods ``cls`` defines itself, as parsed, at their file lines."""
    text, first = class_text(cls)
    module = ast.parse(text)
    ast.increment_lineno(module, first - 1)
    (classdef,) = module.body
    assert isinstance(classdef, ast.ClassDef)
    return [node for node in classdef.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _docstring(block: list[ast.stmt], owner: ast.AST) -> bool:
    first = block[0]
    return (isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef) and block is owner.body
            and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str))


def _statements(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    found = []
    for node in ast.walk(method):
        for block in _owned_blocks(node):
            found += block[1:] if _docstring(block, node) else block
    return found


def _owned_blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for case in getattr(node, "cases", ()) or ():
        yield case.body


@cache
def runnable_lines(cls: type) -> frozenset[int]:
    """The file lines of the statements in the methods ``cls`` defines itself."""
    return frozenset(statement.lineno for method in _methods(cls)
                     for statement in _statements(method))


def statement_line(cls: type, line: int) -> int:
    """The first line of the innermost statement of ``cls``'s methods that
    holds file line ``line`` (what the marks report it as); ``line`` itself
    when none does."""
    best: ast.stmt | None = None
    for method in _methods(cls):
        for statement in _statements(method):
            end = statement.end_lineno or statement.lineno
            if statement.lineno <= line <= end and (
                    best is None or end - statement.lineno
                    <= (best.end_lineno or best.lineno) - best.lineno):
                best = statement
    return line if best is None else best.lineno


class SuperNamed(ast.NodeTransformer):
    """A bare ``super()`` as ``super(NAME, first_argument)``: a method
    compiled elsewhere than in its class's body would have the bare form
    name the wrong class (``mutate``'s mutants name the original past it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.first: list[str | None] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        arguments = node.args.posonlyargs + node.args.args
        self.first.append(arguments[0].arg if arguments else None)
        self.generic_visit(node)
        self.first.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        first = self.first[-1] if self.first else None
        if (isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args
                and first is not None):
            node.args = [ast.Name(self.name, ast.Load()), ast.Name(first, ast.Load())]
        return node


def _marked(method: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """A call of the mark before each statement of ``method``, naming its line."""
    for node in list(ast.walk(method)):
        for block in list(_owned_blocks(node)):
            start = 1 if _docstring(block, node) else 0
            for index in range(len(block) - 1, start - 1, -1):
                statement = block[index]
                mark = ast.Expr(ast.Call(ast.Name(MARK, ast.Load()),
                                         [ast.Constant(statement.lineno)], []))
                block.insert(index, ast.copy_location(mark, statement))


@cache
def _marked_methods(cls: type, owner: type) -> dict[str, Any]:
    """``cls``'s own methods, compiled from its source with the marks, by name."""
    text, first = class_text(cls)
    module = ast.parse(text)
    ast.increment_lineno(module, first - 1)
    (classdef,) = module.body
    assert isinstance(classdef, ast.ClassDef)
    methods = [node for node in classdef.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    for method in methods:
        SuperNamed(OWNER).visit(method)
        _marked(method)
    holder = ast.ClassDef(name=cls.__name__, bases=[], keywords=[], body=methods or [ast.Pass()],
                          decorator_list=[])
    if "type_params" in ast.ClassDef._fields:  # Python 3.12 on
        holder.type_params = []
    compiled = ast.Module(body=[ast.copy_location(holder, classdef)], type_ignores=[])
    ast.fix_missing_locations(compiled)
    namespace = dict(vars(sys.modules[cls.__module__]))
    namespace[OWNER] = owner
    namespace[MARK] = _mark_in(source_file(cls))
    exec(compile(compiled, source_file(cls), "exec"), namespace)
    made = vars(namespace[cls.__name__])
    return {method.name: made[method.name] for method in methods
            if method.name in vars(cls) and method.name in made}


class _Marks:
    """Where the marks go while a run records its reach: lines, by file."""

    lines: dict[str, set[int]] | None = None


def _mark_in(path: str) -> Any:
    """The mark of the methods compiled from ``path``."""
    def mark(line: int) -> None:
        lines = _Marks.lines
        if lines is not None:
            lines.setdefault(path, set()).add(line)
    return mark


class Marked:
    """The given classes (and, for a mutant, the class it stands in for)
    with marked methods while ``marking`` is in effect."""

    def __init__(self, classes: list[type], owner_of: Any) -> None:
        self.chain: list[tuple[type, type]] = []
        for cls in classes:
            own = owner_of(cls)
            for each in cls.__mro__:
                self.chain.append((each, own if each is cls or SOURCE in vars(each) else each))
                if each is own:
                    break
        self.lines: dict[str, set[int]] = {}

    @contextmanager
    def marking(self) -> Iterator[None]:
        replaced: list[tuple[type, str, Any]] = []
        _Marks.lines = self.lines
        try:
            for cls, owner in self.chain:
                for name, method in _marked_methods(cls, owner).items():
                    replaced.append((cls, name, vars(cls)[name]))
                    setattr(cls, name, method)
            yield
        finally:
            for cls, name, original in reversed(replaced):
                setattr(cls, name, original)
            _Marks.lines = None
