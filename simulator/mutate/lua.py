"""Mutants of a store's Lua scripts: every one-token change of the classes a
checker must catch, generated from the script's own text.

The script is read by Pygments' Lua lexer, whose tokens put back together are
the text exactly, so each mutation is an offset, the text it replaces and what
replaces it, and applying it changes that one place and nothing else
(comments and strings are never touched). The operator classes:

* ``relational`` -- ``<`` and ``<=`` (``>`` and ``>=``) shifted into each
  other and flipped to the other direction, ``==`` and ``~=`` swapped;
* ``arithmetic`` -- a binary ``+`` made ``-`` and the reverse;
* ``constant`` -- a number literal moved by one, either way (an index of
  ``KEYS`` or ``ARGV`` is ``index``'s, not this);
* ``call_removed`` -- a ``redis.call(...)`` dropped: a statement removed, a
  value read as ``false`` (what Redis's nil is in Lua);
* ``ttl`` -- a write's TTL argument halved (``EXPIRE``/``PEXPIRE``, ``SET``'s
  ``EX``/``PX``) or dropped (``SET``'s ``EX``/``PX`` pair);
* ``index`` -- ``KEYS[i]`` read as every other key the script uses,
  ``ARGV[i]`` as the argument before or after it;
* ``loop_bound`` -- a numeric ``for`` loop's last value brought one step in;
* ``early_return`` -- an ``if ... then return`` taken whatever its condition.

Mutations come in the script's order, each class in this order within a
token, so the same script always gives the same mutants in the same order.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from pygments.lexers import LuaLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text

OPERATORS = ("relational", "arithmetic", "constant", "call_removed", "ttl", "index",
             "loop_bound", "early_return")
"""Every Lua operator class, in the order a token's mutations are listed."""

SHIFTED = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "~=", "~=": "=="}
FLIPPED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
TTL_COMMANDS = {"EXPIRE": 2, "PEXPIRE": 2, "SETEX": 2, "PSETEX": 2}
"""Commands whose argument at this position (after the command) is a TTL."""
TTL_OPTIONS = ("EX", "PX")
"""``SET`` options whose next argument is a TTL."""


@dataclass(frozen=True)
class Mutation:
    """One change of one script: ``old`` at ``offset`` becomes ``new``."""

    script: str
    operator: str
    offset: int
    old: str
    new: str
    line: int

    def apply(self, text: str) -> str:
        if text[self.offset:self.offset + len(self.old)] != self.old:
            raise ValueError(f"{self.label}: the script no longer has {self.old!r} there")
        return text[:self.offset] + self.new + text[self.offset + len(self.old):]

    @property
    def label(self) -> str:
        """``script:line operator: old -> new``, on one line."""
        old, new = (" ".join(part.split()) or "(nothing)" for part in (self.old, self.new))
        return f"{self.script}:{self.line} {self.operator}: {old} -> {new}"

    def diff(self, text: str) -> str:
        """The unified diff of the script, before and after."""
        return "".join(difflib.unified_diff(
            text.splitlines(keepends=True), self.apply(text).splitlines(keepends=True),
            f"{self.script}.lua", f"{self.script}.lua (mutant)", n=1))


@dataclass(frozen=True)
class Token:
    offset: int
    kind: object
    text: str

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


def tokens(text: str) -> list[Token]:
    """The script's significant tokens (no whitespace, no comments), each at
    its offset; Pygments glues closing brackets with what follows (``],``),
    so punctuation is split into one token a character."""
    found = []
    for offset, kind, value in LuaLexer().get_tokens_unprocessed(text):
        if kind in Text or kind in Comment or not value.strip():
            continue
        if kind in Punctuation and len(value) > 1:
            found.extend(Token(offset + index, kind, char) for index, char in enumerate(value)
                         if not char.isspace())
        else:
            found.append(Token(offset, kind, value))
    return _joined_strings(found)


def _joined_strings(found: list[Token]) -> list[Token]:
    """One token per string literal: the lexer gives its quotes apart."""
    joined: list[Token] = []
    for token in found:
        previous = joined[-1] if joined else None
        if (token.kind in String and previous is not None and previous.kind in String
                and previous.end == token.offset and not _closed(previous.text)):
            joined[-1] = Token(previous.offset, previous.kind, previous.text + token.text)
        else:
            joined.append(token)
    return joined


def _closed(text: str) -> bool:
    """A quoted string complete from its first quote to its last."""
    return len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]


def mutations(script: str, text: str, operators: tuple[str, ...] = OPERATORS
              ) -> list[Mutation]:
    """Every mutation of ``text`` (script ``script``) of the ``operators`` classes."""
    found = tokens(text)
    lines = _line_starts(text)
    generated = []
    for index in range(len(found)):
        for operator in OPERATORS:
            if operator in operators:
                for offset, old, new in _GENERATORS[operator](found, index, text):
                    generated.append(Mutation(script, operator, offset, old, new,
                                              _line_of(lines, offset)))
    return generated


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(index + 1 for index, char in enumerate(text) if char == "\n")
    return starts


def _line_of(starts: list[int], offset: int) -> int:
    line = 0
    while line + 1 < len(starts) and starts[line + 1] <= offset:
        line += 1
    return line + 1


Edit = tuple[int, str, str]
"""``(offset, old, new)``."""


def _relational(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    token = found[index]
    if token.kind in Operator and token.text in SHIFTED:
        yield token.offset, token.text, SHIFTED[token.text]
        if token.text in FLIPPED:
            yield token.offset, token.text, FLIPPED[token.text]


def _arithmetic(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    token = found[index]
    if token.kind in Operator and token.text in "+-" and len(token.text) == 1:
        if index > 0 and _ends_operand(found[index - 1]):  # binary, not a unary minus
            yield token.offset, token.text, "-" if token.text == "+" else "+"


def _ends_operand(token: Token) -> bool:
    """Whether ``token`` can end an expression (so an operator after it is binary)."""
    return (token.kind in Name or token.kind in Number or token.kind in String
            or token.text in (")", "]", "}") or token.text in ("true", "false", "nil"))


def _constant(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    token = found[index]
    if token.kind not in Number or _is_table_index(found, index):
        return
    try:
        value = int(token.text)
    except ValueError:
        return
    yield token.offset, token.text, str(value + 1)
    yield token.offset, token.text, str(value - 1)


def _is_table_index(found: list[Token], index: int) -> bool:
    return (index >= 2 and found[index - 1].text == "["
            and found[index - 2].text in ("KEYS", "ARGV"))


def _call_end(found: list[Token], open_index: int) -> int:
    """The index of the ``)`` closing the ``(`` at ``open_index``."""
    depth = 0
    for index in range(open_index, len(found)):
        if found[index].kind in Punctuation:
            depth += {"(": 1, ")": -1}.get(found[index].text, 0)
        if depth == 0:
            return index
    raise ValueError("unbalanced parentheses")


def _redis_call(found: list[Token], index: int) -> tuple[int, int] | None:
    """``(open, close)`` token indices of the ``redis.call(...)`` starting at ``index``."""
    if (found[index].text == "redis" and index + 3 < len(found)
            and found[index + 1].text == "." and found[index + 2].text in ("call", "pcall")
            and found[index + 3].text == "("):
        return index + 3, _call_end(found, index + 3)
    return None


def _call_removed(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    call = _redis_call(found, index)
    if call is None:
        return
    start, end = found[index].offset, found[call[1]].end
    previous = found[index - 1] if index else None
    value = previous is not None and (previous.kind in Operator or previous.text in (
        "(", ",", "{", "[", "return", "not", "and", "or", "local", "in"))
    yield start, text[start:end], "false" if value else ""


def _arguments(found: list[Token], open_index: int, close_index: int) -> list[tuple[int, int]]:
    """The call's top-level arguments, each as ``(first, last)`` token indices."""
    arguments, first, depth = [], open_index + 1, 0
    for index in range(open_index + 1, close_index):
        text = found[index].text if found[index].kind in Punctuation else ""
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(text, 0)
        if text == "," and depth == 0:
            arguments.append((first, index - 1))
            first = index + 1
    if first < close_index:
        arguments.append((first, close_index - 1))
    return arguments


def _ttl(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    call = _redis_call(found, index)
    if call is None:
        return
    arguments = _arguments(found, *call)
    if not arguments:
        return
    command = found[arguments[0][0]].text.strip("'\"").upper()

    def span(argument: tuple[int, int]) -> tuple[int, str]:
        start, end = found[argument[0]].offset, found[argument[1]].end
        return start, text[start:end]

    if command in TTL_COMMANDS and len(arguments) > TTL_COMMANDS[command]:
        start, ttl = span(arguments[TTL_COMMANDS[command]])
        yield start, ttl, f"math.floor(({ttl}) / 2)"
    if command == "SET":
        for position, argument in enumerate(arguments[:-1]):
            option = found[argument[0]].text.strip("'\"").upper()
            if argument[0] == argument[1] and option in TTL_OPTIONS:
                start, ttl = span(arguments[position + 1])
                yield start, ttl, f"math.floor(({ttl}) / 2)"
                # Dropped: from the comma before the option to the TTL's end.
                cut = found[argument[0] - 1].offset
                end = found[arguments[position + 1][1]].end
                yield cut, text[cut:end], ""


def _index(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    token = found[index]
    if not (token.kind in Number and _is_table_index(found, index)):
        return
    table = found[index - 2].text
    used = sorted({int(other.text) for position, other in enumerate(found)
                   if other.kind in Number and _is_table_index(found, position)
                   and found[position - 2].text == table})
    mine = int(token.text)
    # Every other key (a script has a few); an argument's neighbours only
    # (a script has many, and a far one is as wrong as a near one).
    others = [other for other in used if other != mine
              and (table == "KEYS" or abs(other - mine) == 1)]
    for other in others:
        yield token.offset, token.text, str(other)


def _loop_bound(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    if not (found[index].text == "for" and found[index].kind in Keyword
            and index + 2 < len(found) and found[index + 2].text == "="):
        return
    commas, position, depth = [], index + 3, 0
    while position < len(found) and not (found[position].text == "do" and depth == 0):
        text_here = found[position].text if found[position].kind in Punctuation else ""
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(text_here, 0)
        if text_here == "," and depth == 0:
            commas.append(position)
        position += 1
    if not commas or position >= len(found):
        return
    last = commas[1] - 1 if len(commas) > 1 else position - 1
    step = (text[found[commas[1] + 1].offset:found[position - 1].end]
            if len(commas) > 1 else "1")
    start, end = found[commas[0] + 1].offset, found[last].end
    bound = text[start:end]
    yield start, bound, f"({bound}) - ({step})" if step != "1" else f"({bound}) - 1"


def _early_return(found: list[Token], index: int, text: str) -> Iterator[Edit]:
    if not (found[index].text == "if" and found[index].kind in Keyword):
        return
    position = index + 1
    while position < len(found) and not (found[position].text == "then"
                                         and found[position].kind in Keyword):
        position += 1
    if position + 1 < len(found) and found[position + 1].text == "return":
        start, end = found[index + 1].offset, found[position - 1].end
        if text[start:end] != "true":
            yield start, text[start:end], "true"


_GENERATORS = {"relational": _relational, "arithmetic": _arithmetic, "constant": _constant,
               "call_removed": _call_removed, "ttl": _ttl, "index": _index,
               "loop_bound": _loop_bound, "early_return": _early_return}
