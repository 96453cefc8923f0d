"""Mutants of a store kind's own Python classes, through the AST.

A kind names the classes that are its own (``StoreKind.classes``: a Redis
kind's store class, a service kind's holder and rules). Each method a
class defines itself is read from its source with ``ast``, and each mutation
is, as for Lua (``simulator.mutate.lua.Mutation``), one span of the class's
source text replaced: the text is the class's own, so the diff shows the
change in place and nothing else moves. The operator classes:

* ``relational`` -- ``<`` and ``<=`` (``>`` and ``>=``) shifted into each
  other and flipped, ``==``/``!=``, ``is``/``is not`` and ``in``/``not in``
  swapped;
* ``arithmetic`` -- a binary or augmented ``+`` made ``-`` and the reverse;
* ``constant`` -- an integer literal moved by one, either way;
* ``call_removed`` -- a call made as a statement dropped (an ``await``ed one
  too): a retry, a compensation, a release, a cleanup (logging is left alone:
  removing it changes nothing a checker could see);
* ``condition_negated`` -- an ``if``'s or a ``while``'s condition negated;
* ``exception_swallowed`` -- a ``raise`` inside an ``except`` block made
  ``pass``: the failure it passed on is swallowed.

A mutant class is a subclass of the original, named as it is, defining only
the mutated method, compiled in the original module's namespace (its names
resolve as the original's do) with a bare ``super()`` pointing past the
original, as it did there; its line numbers are the file's, so a traceback
points at the mutated line.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from simulator.mutate.lua import FLIPPED, Mutation
from simulator.reach.python_lines import SuperNamed

OPERATORS = ("relational", "arithmetic", "constant", "call_removed", "condition_negated",
             "exception_swallowed")
"""Every Python operator class, in the order a node's mutations are listed."""

COMPARISONS = {"<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="),
               "==": ("!=",), "!=": ("==",), "is not": ("is",), "is": ("is not",),
               "not in": ("in",), "in": ("not in",)}
"""Each comparison's mutants: shifted, then flipped (as Lua's ``SHIFTED``, ``FLIPPED``)."""
assert all(COMPARISONS[op][-1] == FLIPPED[op] for op in FLIPPED)
ARITHMETIC = {"+": "-", "-": "+"}
QUIET_CALLS = ("log", "logger", "_log", "warnings", "print")
"""Receivers of calls whose removal no run can see."""
BASE = "__lab_base__"
"""The name the original class has in a mutant's namespace."""
REACHED = "__lab_reached__"
"""The name of the probe's marker in a mutant's namespace."""


@dataclass(frozen=True)
class PythonMutation(Mutation):
    """One change of one method: ``script`` is the class's dotted path,
    ``offset`` within its source, ``line`` the file's."""

    method: str = ""

    def diff(self, text: str) -> str:
        """The unified diff of the class's source, before and after, its
        lines numbered as the file's."""
        path = self.script.rsplit(".", 1)[0].replace(".", "/") + ".py"
        shift = self.line - 1 - text.count("\n", 0, self.offset)
        return "".join(_HUNK.sub(lambda found: _shifted(found, shift), line)
                       for line in difflib.unified_diff(
                           text.splitlines(keepends=True),
                           self.apply(text).splitlines(keepends=True),
                           path, f"{path} (mutant)", n=1))


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _shifted(found: re.Match[str], shift: int) -> str:
    before, before_count, after, after_count = found.groups()
    return (f"@@ -{int(before) + shift}{before_count or ''} "
            f"+{int(after) + shift}{after_count or ''} @@")


def class_path(cls: type) -> str:
    """``package.module.Class``: how a mutation names its class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def class_source(cls: type) -> tuple[str, int]:
    """The class's source, dedented, and the file line it starts on."""
    lines, first = inspect.getsourcelines(cls)
    return textwrap.dedent("".join(lines)), first


def mutations(cls: type, operators: tuple[str, ...] = OPERATORS) -> list[PythonMutation]:
    """Every mutation of the methods ``cls`` defines itself, in source order."""
    text, first = class_source(cls)
    starts = _line_starts(text)
    (classdef,) = ast.parse(text).body
    assert isinstance(classdef, ast.ClassDef)
    found = []
    for method in classdef.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or _bound_elsewhere(
                method):
            continue
        for operator, old_span, new in _changes(method, text, starts):
            if operator not in operators:
                continue
            start, end = old_span
            found.append(PythonMutation(class_path(cls), operator, start, text[start:end], new,
                                        first + text.count("\n", 0, start), method.name))
    return found


def mutant_class(cls: type, mutation: PythonMutation,
                 reached: Callable[[], None] | None = None) -> type:
    """A subclass of ``cls`` whose ``mutation.method`` is the mutated one;
    with ``reached``, calling it each time the mutated statement is about to
    run (the probe's coverage)."""
    text, first = class_source(cls)
    mutated = mutation.apply(text)
    (classdef,) = ast.parse(mutated).body
    assert isinstance(classdef, ast.ClassDef)
    (method,) = [node for node in classdef.body
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                 and node.name == mutation.method]
    SuperNamed(BASE).visit(method)
    if reached is not None:
        _mark(method, _statement_at(method, mutated, mutation.offset))
    subclass = ast.copy_location(
        ast.ClassDef(name=cls.__name__, bases=[ast.Name(BASE, ast.Load())], keywords=[],
                     body=[method], decorator_list=[]), method)
    if "type_params" in ast.ClassDef._fields:  # Python 3.12 on
        subclass.type_params = []
    module = ast.Module(body=[subclass], type_ignores=[])
    ast.increment_lineno(module, first - 1)
    ast.fix_missing_locations(module)
    namespace = dict(vars(sys.modules[cls.__module__]))
    namespace[BASE] = cls
    namespace[REACHED] = reached
    exec(compile(module, inspect.getsourcefile(cls) or cls.__module__, "exec"), namespace)
    mutant = namespace[cls.__name__]
    mutant.__qualname__ = cls.__qualname__
    mutant.__lab_source__ = (mutated, first)  # what its reach is marked from (simulator.reach)
    return mutant


def _statement_at(method: ast.AST, text: str, offset: int) -> ast.stmt:
    """The innermost statement of ``method`` whose text holds ``offset``."""
    starts = _line_starts(text)
    found = method
    for node in ast.walk(method):
        if isinstance(node, ast.stmt) and node is not method:
            start, end = _span(node, text, starts)
            if start <= offset < max(end, start + 1) and _within(found, node):
                found = node
    return found  # type: ignore[return-value]


def _within(outer: ast.AST, node: ast.AST) -> bool:
    return any(child is node for child in ast.walk(outer))


def _mark(method: ast.AST, statement: ast.stmt) -> None:
    """Put a call of the probe's marker just before ``statement`` (at the
    start of the method's body when the change is in its signature)."""
    marker = ast.Expr(ast.Call(ast.Name(REACHED, ast.Load()), [], []))
    ast.copy_location(marker, statement)
    for node in ast.walk(method):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(item is statement for item in block):
                block.insert(next(index for index, item in enumerate(block)
                                  if item is statement), marker)
                return
    method.body.insert(0, marker)  # type: ignore[attr-defined]


def _bound_elsewhere(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated by another name's attribute (``@x.setter``): a subclass
    defining it alone would not find ``x``."""
    return any(isinstance(decorator, ast.Attribute) for decorator in method.decorator_list)


def _line_starts(text: str) -> list[int]:
    starts, position = [0], 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        starts.append(position)
    return starts


def _offset(text: str, starts: list[int], line: int, column: int) -> int:
    """A node's (line, UTF-8 byte column) as an offset in ``text``."""
    start = starts[line - 1]
    return start + len(text[start:].encode()[:column].decode())


def _span(node: ast.AST, text: str, starts: list[int]) -> tuple[int, int]:
    return (_offset(text, starts, node.lineno, node.col_offset),  # type: ignore[attr-defined]
            _offset(text, starts, node.end_lineno, node.end_col_offset))  # type: ignore


def _operator_span(text: str, between: tuple[int, int], operator: str) -> tuple[int, int]:
    """Where ``operator`` is in the text between two operands (parentheses and
    spaces around it); its words may be split by spaces (``is  not``)."""
    gap = text[between[0]:between[1]]
    words = operator.split()
    at = gap.find(words[0])
    end = at + len(words[0])
    for word in words[1:]:
        end = gap.index(word, end) + len(word)
    return between[0] + at, between[0] + end


_COMPARE_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                 ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
                 ast.NotIn: "not in"}
_ARITHMETIC_TEXT = {ast.Add: "+", ast.Sub: "-"}


def _changes(method: ast.AST, text: str, starts: list[int]
             ) -> Iterator[tuple[str, tuple[int, int], str]]:
    """Each mutation of ``method``'s body: its class, span and new text,
    in source order (a node's classes in ``OPERATORS`` order)."""
    handlers = {id(node) for handler in ast.walk(method)
                if isinstance(handler, ast.ExceptHandler)
                for node in ast.walk(handler) if isinstance(node, ast.Raise)}
    # Before Python 3.12 the nodes inside an f-string have no true positions.
    quoted = {id(node) for string in ast.walk(method) if isinstance(string, ast.JoinedStr)
              for node in ast.walk(string)}
    nodes = [node for node in ast.walk(method)
             if hasattr(node, "lineno") and id(node) not in quoted]
    nodes.sort(key=lambda node: (node.lineno, node.col_offset))  # type: ignore[attr-defined]
    body = method.body  # type: ignore[attr-defined]
    docstring = (body[0].value if body and isinstance(body[0], ast.Expr)
                 and isinstance(body[0].value, ast.Constant) else None)
    for node in nodes:
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for index, op in enumerate(node.ops):
                old = _COMPARE_TEXT[type(op)]
                span = _operator_span(text, (_span(operands[index], text, starts)[1],
                                             _span(operands[index + 1], text, starts)[0]), old)
                for new in COMPARISONS[old]:
                    yield "relational", span, new
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITHMETIC_TEXT:
            old = _ARITHMETIC_TEXT[type(node.op)]
            left, right = ((node.left, node.right) if isinstance(node, ast.BinOp)
                           else (node.target, node.value))
            span = _operator_span(text, (_span(left, text, starts)[1],
                                         _span(right, text, starts)[0]), old)
            yield "arithmetic", span, ARITHMETIC[old]
        elif (isinstance(node, ast.Constant) and type(node.value) is int
              and node is not docstring):
            span = _span(node, text, starts)
            for new in (node.value + 1, node.value - 1):
                yield "constant", span, str(new)
        elif isinstance(node, ast.Expr) and _called(node.value):
            yield "call_removed", _span(node, text, starts), "pass"
        elif isinstance(node, ast.If | ast.While) and not isinstance(node.test, ast.Constant):
            # (``while True`` negated never runs its loop: a mutant no one would write.)
            span = _span(node.test, text, starts)
            yield "condition_negated", span, f"not ({text[span[0]:span[1]]})"
        elif isinstance(node, ast.Raise) and id(node) in handlers:
            yield "exception_swallowed", _span(node, text, starts), "pass"


def _called(value: ast.expr) -> bool:
    """A call worth removing: made for its effect, not to log."""
    if isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    receiver = value.func
    while isinstance(receiver, ast.Attribute):
        receiver = receiver.value
    return not (isinstance(receiver, ast.Name) and receiver.id in QUIET_CALLS)
