"""Judging a run by its summary: thresholds, conditions, and a reference run.

Three ways a summary is judged, all here so ``run``'s ``[expect]``, ``hunt``
and race reports read them alike:

* an ``Expectation``, one threshold on one metric, written
  ``metric = "<= 0.01"`` in ``[expect]`` (operators ``<``, ``<=``, ``==``,
  ``!=``, ``>=``, ``>``);
* a condition, thresholds joined by ``and`` / ``or`` (``and`` binds tighter;
  parentheses group), e.g. ``"cap_overshoot_microdollars_total > 0 or
  conservation_drift_microdollars_total != 0"`` (``parse_condition``);
* a comparison with a reference run of another store kind under the same
  scenario, seed and schedule, on a family's ``Invariant``\\ s: the candidate
  is broken where it does worse (``judge``).

A metric a condition names that the summary lacks is an error naming the
known ones (``check_metrics``), never a quiet "holds": a misspelt metric must
not read as "nothing broke it". ``judge_expectations`` keeps each
``[expect]`` entry's measured values beside its outcome, for ``run`` to print
(``simulator.present.verdicts``).
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

OPERATORS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
             "<": operator.lt, ">": operator.gt}
_NUMBER = r"-?[0-9][0-9_]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"
_EXPRESSION = re.compile(rf"^\s*(<=|>=|==|!=|<|>)\s*({_NUMBER})\s*$")
_TOKEN = re.compile(rf"\s*(?:(?P<paren>[()])|(?P<operator><=|>=|==|!=|<|>)|(?P<number>{_NUMBER})"
                    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")
_EXAMPLE = ("'cap_overshoot_microdollars_total > 0 or "
            "conservation_drift_microdollars_total != 0'")


@dataclass(frozen=True, slots=True)
class Expectation:
    """One threshold on one summary metric: the leaf of every condition."""

    metric: str
    operator: str
    threshold: float

    @classmethod
    def parse(cls, metric: str, text: Any) -> Expectation:
        match = _EXPRESSION.match(str(text))
        if not match:
            raise ValueError(f"expected a comparison such as '<= 0.01' or '== 0', got {text!r}")
        return cls(metric, match.group(1), _number(match.group(2)))

    def holds_for(self, value: Any) -> bool:
        return value is not None and OPERATORS[self.operator](value, self.threshold)

    def holds_in(self, summary: Mapping[str, Any]) -> bool:
        return self.holds_for(summary.get(self.metric))

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric,)

    @property
    def comparison(self) -> str:
        """``< 0``: the threshold without its metric, as ``[expect]`` writes it
        (and reads it back: ``> 100000000``, never ``> 1e+08``)."""
        threshold = float(self.threshold)
        written = str(int(threshold)) if threshold.is_integer() else repr(threshold)
        return f"{self.operator} {written}"

    def __str__(self) -> str:
        return f"{self.metric} {self.comparison}"


@dataclass(frozen=True, slots=True)
class AllOf:
    """Holds when every part holds (``and``)."""

    parts: tuple[Condition, ...]

    def holds_in(self, summary: Mapping[str, Any]) -> bool:
        return all(part.holds_in(summary) for part in self.parts)

    @property
    def metrics(self) -> tuple[str, ...]:
        return _metrics_of(self.parts)

    def __str__(self) -> str:
        # ``or`` binds looser than ``and``: an AnyOf inside needs its parentheses.
        return " and ".join(f"({part})" if isinstance(part, AnyOf) else str(part)
                            for part in self.parts)


@dataclass(frozen=True, slots=True)
class AnyOf:
    """Holds when some part holds (``or``)."""

    parts: tuple[Condition, ...]

    def holds_in(self, summary: Mapping[str, Any]) -> bool:
        return any(part.holds_in(summary) for part in self.parts)

    @property
    def metrics(self) -> tuple[str, ...]:
        return _metrics_of(self.parts)

    def __str__(self) -> str:
        return " or ".join(str(part) for part in self.parts)


Condition = Expectation | AllOf | AnyOf
"""A threshold, or thresholds joined by ``and`` / ``or``."""


def parse_condition(text: str) -> Condition:
    """``"a > 0 or b != 0 and c < 1"`` as a condition (``and`` binds tighter)."""
    tokens = _tokens(text)
    position = 0

    def fail(wanted: str) -> ValueError:
        got = f"{tokens[position][1]!r}" if position < len(tokens) else "the end"
        return ValueError(f"{text!r}: expected {wanted}, found {got} "
                          f"(a condition reads like {_EXAMPLE})")

    def peek() -> tuple[str, str] | None:
        return tokens[position] if position < len(tokens) else None

    def take(kind: str, wanted: str) -> str:
        nonlocal position
        token = peek()
        if token is None or token[0] != kind:
            raise fail(wanted)
        position += 1
        return token[1]

    def joined(part: Any, keyword: str, build: type[AllOf] | type[AnyOf]) -> Condition:
        nonlocal position
        parts = [part()]
        while peek() == ("word", keyword):
            position += 1
            parts.append(part())
        return parts[0] if len(parts) == 1 else build(tuple(parts))

    def either() -> Condition:
        return joined(both, "or", AnyOf)

    def both() -> Condition:
        return joined(single, "and", AllOf)

    def single() -> Condition:
        if peek() == ("paren", "("):
            take("paren", "(")
            inner = either()
            take("paren", "')'")
            return inner
        if peek() in (("word", "and"), ("word", "or")):
            raise fail("a metric name")
        metric = take("word", "a metric name")
        comparison = take("operator", f"a comparison after {metric!r} (< <= == != >= >)")
        return Expectation(metric, comparison, _number(take("number", "a number")))

    condition = either()
    if position != len(tokens):
        raise fail("'and', 'or' or the end")
    return condition


def parse_expectation(name: str, text: Any) -> Condition:
    """An ``[expect]`` entry: ``metric = "<= 0.01"`` (a threshold on the metric
    it is named after) or ``label = "a > 0 and b == 0"`` (a whole condition)."""
    text = str(text)
    if _EXPRESSION.match(text):
        return Expectation.parse(name, text)
    try:
        return parse_condition(text)
    except ValueError as error:
        raise ValueError(f"expected a comparison such as '<= 0.01' or '== 0', or a "
                         f"condition: {error}") from None


def check_metrics(condition: Condition, summary: Mapping[str, Any]) -> None:
    """Refuse a condition that names a metric the summary does not have."""
    unknown = [metric for metric in condition.metrics if metric not in summary]
    if unknown:
        raise ValueError(unknown_metrics(unknown, (
            name for name, value in summary.items()
            if isinstance(value, int | float) and not isinstance(value, bool))))


def unknown_metrics(unknown: Iterable[str], known: Iterable[str]) -> str:
    """The one line that refuses ``unknown`` metric names: the close matches
    among ``known`` first (a typo is the likely cause), then every known name."""
    unknown, known = list(unknown), sorted(known)
    close = sorted({match for metric in unknown
                    for match in difflib.get_close_matches(metric, known, n=3)})
    hint = (f"did you mean {', '.join(close)}? " if close else "")
    return (f"no metric {', '.join(map(repr, unknown))} in the summary; "
            f"{hint}known metrics: {', '.join(known)}")


@dataclass(frozen=True, slots=True)
class ExpectationOutcome:
    """One ``[expect]`` entry judged on a run's summary."""

    name: str
    """Its key in ``[expect]``: the metric, or the label of a whole condition."""
    condition: Condition
    values: Mapping[str, Any]
    """Each metric the condition names, as the summary has it."""
    missing: tuple[str, ...]
    """The metrics the condition names that the summary lacks."""
    held: bool

    @property
    def label(self) -> str:
        """``metric < 1000``, or ``label: a == 0 and b == 0`` for a named condition."""
        if isinstance(self.condition, Expectation) and self.condition.metric == self.name:
            return str(self.condition)
        return f"{self.name}: {self.condition}"


def judge_expectations(expectations: Mapping[str, str],
                       summary: Mapping[str, Any]) -> tuple[ExpectationOutcome, ...]:
    """Every ``[expect]`` entry judged on ``summary``, in the scenario's order;
    one naming a metric the summary lacks does not hold."""
    outcomes = []
    for name, text in expectations.items():
        condition = parse_expectation(name, text)
        missing = tuple(metric for metric in condition.metrics if metric not in summary)
        outcomes.append(ExpectationOutcome(
            name, condition, {metric: summary.get(metric) for metric in condition.metrics},
            missing, not missing and condition.holds_in(summary)))
    return tuple(outcomes)


def failed_expectations(expectations: dict[str, str], summary: dict[str, Any]) -> list[str]:
    """One line per expectation that does not hold (or names no metric)."""
    return failures_of(judge_expectations(expectations, summary), summary)


def failures_of(outcomes: list[ExpectationOutcome], summary: dict[str, Any]) -> list[str]:
    """One line per judged expectation that does not hold (or names no metric)."""
    failures = []
    for outcome in outcomes:
        if outcome.missing:
            failures.append(f"{outcome.condition}: the summary has no metric "
                            f"{', '.join(map(repr, outcome.missing))}")
        elif not outcome.held:
            failures.append(f"{outcome.condition}: got {_observed(outcome.condition, summary)}")
    return failures


# ---------------------------------------------------------------- against a reference


STORE_RAISED = "store_raised"
"""The summary's entry naming the first store call that raised, and where
(absent when none did): any run with it is broken (``Verdict.raised``)."""


NOISE = 0.01
"""An invariant's noise margin against a reference, unless it states its own:
1% of the reference's value (none at all where the reference did no damage)."""
NOISY = 0.10
"""The margin of the noisy invariants: counts of denials and refusals, and
what leaked holds and leases cost in time (a hold leaks until the next call
on its key reclaims it, so any change of timing moves its cost)."""
BLAMED_REFERENCE = NOISY
"""The margin on the store's own part where the oracle blamed the reference's
store too: a sound store it should never blame, so the schedule shows the
oracle unsure, and the candidate must do clearly worse (10%), not by chance."""
STORE_PART = "store_logic"
"""The cause the fault contracts file the store's own damage under
(``simulator.plugin.attribution.STORE_LOGIC``, a layer above this one)."""


@dataclass(frozen=True, slots=True)
class Invariant:
    """A summary metric a family promises to keep down, and which way is worse:
    ``"higher"`` (overshoot, leaked hold-seconds) or ``"further_from_zero"``
    (drift, whose sign says which way the books are wrong). Either way it
    holds at 0, its sound value."""

    metric: str
    worse: Literal["higher", "further_from_zero"] = "higher"
    by_cause: str = ""
    """The names of its parts filed by cause, ``{cause}`` standing for the
    cause (``cap_overshoot_by_{cause}_microdollars``); empty for the usual
    ``<metric>_by_{cause}``."""
    store_only: bool = False
    """Damage only the store can do, whatever the lab does (the fault
    contracts excuse none of it): all of it is ``store_logic``, and the
    summary has no parts by cause for it."""
    noise: float = NOISE
    """Against a reference, the candidate is worse only by more than this
    share of the reference's badness (``margin``): two stores whose runs part
    after a fault differ a little on every continuous metric by chance of
    timing, and a count of denials moves with any change of who waits."""

    def badness(self, value: float) -> float:
        return abs(value) if self.worse == "further_from_zero" else value

    def margin(self, reference_value: float) -> float:
        """How much worse than the reference's ``reference_value`` is still noise."""
        return self.noise * self.badness(reference_value)

    def store_part(self, summary: Mapping[str, Any]) -> float | None:
        """The store's own part of it in ``summary`` (signed, as the metric);
        None where the summary files this invariant by no cause."""
        causes = self.causes(summary)
        return causes.get(STORE_PART, 0) if causes else None

    @property
    def cause_pattern(self) -> str:
        return self.by_cause or f"{self.metric}_by_{{cause}}"

    def in_scope(self, prefix: str) -> Invariant:
        """The same invariant measured in another scope, whose metrics carry
        ``prefix`` (``namespace_``)."""
        return Invariant(prefix + self.metric, self.worse, prefix + self.cause_pattern,
                         self.store_only, self.noise)

    def causes(self, summary: Mapping[str, Any]) -> dict[str, Any]:
        """Its parts in ``summary`` by cause (zeros included), in the summary's order."""
        if self.store_only:
            value = summary.get(self.metric)
            return {} if value is None else {STORE_PART: value}
        before, _, after = self.cause_pattern.partition("{cause}")
        named = re.compile(f"{re.escape(before)}(?P<cause>[a-z0-9_]+){re.escape(after)}")
        found = {}
        for name, value in summary.items():
            match = named.fullmatch(name)
            if match and isinstance(value, int | float) and not isinstance(value, bool):
                found[match.group("cause")] = value
        return found


@dataclass(frozen=True, slots=True)
class Worse:
    """One invariant on which the candidate did worse than the reference."""

    metric: str
    candidate: float
    reference: float
    by: float
    margin: float = 0.0
    """The noise margin it was worse beyond (``Invariant.margin``)."""
    part: str = ""
    """``store_logic`` when judged on the store's own part alone (then
    ``candidate`` and ``reference`` are that part, signed as the metric);
    empty for the whole."""
    store_share: float | None = None
    """How much of the candidate's damage beyond the reference's the store's
    own part is (0 to 1; 1.0 for an invariant only the store can break);
    None where the invariant is filed by no cause."""

    def __str__(self) -> str:
        beyond = f", beyond its noise margin of {self.margin:g}" if self.margin else ""
        whose = f" {self.part} part" if self.part else ""
        return (f"{self.metric}{whose} ({self.candidate!r} against {self.reference!r}, "
                f"worse by {self.by:g}{beyond})")


def worse_than_reference(invariants: Iterable[Invariant], candidate: Mapping[str, Any],
                         reference: Mapping[str, Any]) -> tuple[Worse, ...]:
    """The invariants on which ``candidate`` did worse than ``reference``
    beyond the noise margin. Where the oracle files an invariant by cause,
    only the store's own part (``store_logic``) is compared, beyond
    ``noise`` of the reference's part (none where that is 0;
    ``BLAMED_REFERENCE`` where it is not): what the lab's own causes did
    differs by chance once a fault parts the two runs' histories, and a
    candidate the oracle does not blame is no worse a store. Elsewhere the
    whole is compared, beyond ``noise`` of the reference's figure. One
    absent from either summary (a namespace metric of a run without
    namespace caps) is not compared."""
    found = []
    for invariant in invariants:
        mine, theirs = candidate.get(invariant.metric), reference.get(invariant.metric)
        if mine is None or theirs is None:
            continue
        my_part, their_part = invariant.store_part(candidate), invariant.store_part(reference)
        if my_part is None or their_part is None or invariant.store_only:
            by = invariant.badness(mine) - invariant.badness(theirs)
            margin = invariant.margin(theirs)
            if by > margin:
                share = 1.0 if invariant.store_only else None
                found.append(Worse(invariant.metric, mine, theirs, by, margin,
                                   store_share=share))
            continue
        by = invariant.badness(my_part) - invariant.badness(their_part)
        margin = (max(invariant.noise, BLAMED_REFERENCE if their_part else 0.0)
                  * invariant.badness(their_part))
        if by > margin:
            whole = invariant.badness(mine) - invariant.badness(theirs)
            share = min(by / whole, 1.0) if whole > 0 else 1.0
            found.append(Worse(invariant.metric, my_part, their_part, by, margin,
                               STORE_PART, share))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a run was judged: its condition, its comparison with a reference, or both."""

    condition: Condition | None
    values: Mapping[str, Any]
    """The condition's metrics as the run's summary has them."""
    condition_broken: bool
    reference: str | None
    worse: tuple[Worse, ...]
    compared: int
    """How many invariants were compared with the reference."""
    raised: str | None = None
    """The first store call that raised in the run, if one did: a finding
    whatever the condition says (``simulator.world.findings``)."""

    @property
    def broken(self) -> bool:
        return self.condition_broken or bool(self.worse) or self.raised is not None

    @property
    def value(self) -> Any:
        """The one metric's value for a single threshold; else the values, by metric."""
        if isinstance(self.condition, Expectation) and not self.worse:
            return self.values[self.condition.metric]
        if self.condition is not None and not self.worse:
            return dict(self.values)
        return {**self.values, **{worse.metric: worse.candidate for worse in self.worse}}

    @property
    def observed(self) -> str:
        """What the run showed: ``metric = -5``, or where it did worse than the reference."""
        seen = [f"the store raised {self.raised}"] if self.raised is not None else []
        if self.condition is not None and (self.condition_broken or not self.worse):
            seen.append(", ".join(f"{metric} = {value!r}" for metric, value in self.values.items()))
        if self.worse:
            seen.append(f"worse than {self.reference} on "
                        + ", ".join(str(worse) for worse in self.worse))
        elif self.reference is not None and not self.condition_broken:
            seen.append(f"no worse than {self.reference} on {self.compared} invariant(s)")
        return "; ".join(seen)

    @property
    def rule(self) -> str:
        """When the run counts as broken, in parentheses."""
        rules = []
        if isinstance(self.condition, Expectation):
            rules.append(self.condition.comparison)
        elif self.condition is not None:
            rules.append(str(self.condition))
        if self.reference is not None:
            rules.append(f"worse than {self.reference}")
        return f"(broken when {' or '.join(rules)})"

    def __str__(self) -> str:
        return f"{self.observed} {self.rule}"


def judge(summary: Mapping[str, Any], condition: Condition | None = None,
          reference: str | None = None, reference_summary: Mapping[str, Any] | None = None,
          invariants: Iterable[Invariant] = ()) -> Verdict:
    """Judge a run's ``summary`` by ``condition`` and, when ``reference_summary``
    is given, against the ``reference`` kind's run on ``invariants``."""
    invariants = tuple(invariants)
    values = {metric: summary.get(metric) for metric in condition.metrics} if condition else {}
    worse = (worse_than_reference(invariants, summary, reference_summary)
             if reference_summary is not None else ())
    compared = sum(1 for invariant in invariants
                   if invariant.metric in summary and reference_summary is not None
                   and invariant.metric in reference_summary)
    return Verdict(condition, values, condition is not None and condition.holds_in(summary),
                   reference, worse, compared, summary.get(STORE_RAISED))


def _observed(condition: Condition, summary: Mapping[str, Any]) -> str:
    if isinstance(condition, Expectation):
        return repr(summary[condition.metric])
    return ", ".join(f"{metric} = {summary[metric]!r}" for metric in condition.metrics)


def _metrics_of(parts: Iterable[Condition]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(metric for part in parts for metric in part.metrics))


def _number(text: str) -> float:
    value = float(text.replace("_", ""))
    if math.isinf(value):  # 1e999: a threshold every value meets, or none does
        raise ValueError(f"expected a finite threshold, got {text!r}")
    return value


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"{text!r}: cannot read {text[position:].strip()!r} "
                             f"(a condition reads like {_EXAMPLE})")
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens
