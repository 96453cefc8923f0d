"""Recording one run's reach: what the store's code is, where it lives, and
the two records of what ran (the server's log for the Lua, the marks of
the store's methods for the Python), put together at the run's end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.reach.lines import Reach
from simulator.reach.lua_lines import runnable_lines as lua_runnable
from simulator.reach.python_lines import Marked, source_file
from simulator.reach.python_lines import runnable_lines as python_runnable
from simulator.reach.replay import Replayed, ServerLog, replayed_lines


def shown_path(path: Path) -> str:
    """``path`` as a user reads it: from the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def own_class(cls: type) -> type:
    """The store's class a mutant class stands in for (``mutate`` builds a
    subclass of the same name, compiled at the base's lines): its lines are
    counted as the base's."""
    while (cls.__bases__ and cls.__bases__[0].__qualname__ == cls.__qualname__
           and cls.__bases__[0].__module__ == cls.__module__):
        cls = cls.__bases__[0]
    return cls


def script_unit(kind: Any, name: str) -> str:
    """What a kind's script is called in a reach: its file beside the kind's
    first class when there is one, else the kind's name and the script's."""
    for cls in kind.classes:
        path = Path(source_file(own_class(cls))).with_name(f"{name}.lua")
        if path.exists():
            return shown_path(path)
    return f"{kind.name}: {name}.lua"


def class_unit(cls: type) -> str:
    return f"{shown_path(Path(source_file(cls)))}: {cls.__qualname__}"


@dataclass(frozen=True)
class Sent:
    """Where the lines of a script text the server runs are counted: a
    script that includes a fragment (``-- lab:include``) runs as the
    fragment's text then its own, so its first lines are the fragment's."""

    unit: str
    fragment_unit: str = ""
    fragment_lines: int = 0


def _sent(scripts: Any, name: str, units: dict[str, str]) -> tuple[str, Sent]:
    """Script ``name``'s text as sent, and where its lines go (``units``: each
    script's unit)."""
    own = scripts[name]
    sent = scripts.source(name) if hasattr(scripts, "source") else own
    if sent == own:
        return sent, Sent(units[name])
    fragment = sent.removesuffix(own)
    included = next((other for other in scripts if scripts[other] in (fragment,
                                                                      fragment[:-1])), None)
    if included is None:
        return sent, Sent(units[name])  # not a fragment of the set: counted as its own
    return sent, Sent(units[name], units[included], fragment.count("\n"))


class ReachRecorder:
    """The reach of one run of ``kinds`` (the scenario's, then any it migrates
    to): attach it to the run's Redis backend, trace while the run runs, and
    read the reach when it is done."""

    def __init__(self, kinds: list[Any]) -> None:
        self.bodies: dict[str, Sent] = {}
        """Each script text the kinds send, and where its lines are counted."""
        self.runnable: dict[str, frozenset[int]] = {}
        self.classes: dict[str, type] = {}
        owner: dict[str, str] = {}  # each unit's own text: the first kind's
        for kind in kinds:
            scripts = kind.scripts or {}
            units = {}
            for name, body in sorted(scripts.items()):
                unit = script_unit(kind, name)
                if owner.setdefault(unit, body) != body:
                    # Another kind's copy of the file, changed (a mutant's, a
                    # variant's): other code, counted apart, so that a mutated
                    # script's lines count only where its own text ran.
                    unit = f"{unit} ({kind.name}'s)"
                units[name] = unit
                self.runnable[unit] = self.runnable.get(unit, frozenset()) | lua_runnable(body)
            for name in sorted(scripts):
                self.bodies.setdefault(*_sent(scripts, name, units))
            for cls in map(own_class, kind.classes):
                unit = class_unit(cls)
                self.classes[unit] = cls
                self.runnable[unit] = python_runnable(cls)
        self.log = ServerLog()
        self.marked = Marked([cls for kind in kinds for cls in kind.classes], own_class)
        self.replayed: Replayed | None = None
        self._marking: Any = None

    def attach(self, backend: Any) -> None:
        """Have ``backend`` (one, or a cluster's ``ShardBackends``) keep the log."""
        for each in getattr(backend, "backends", [backend]):
            each.reach_log = self.log

    def start(self) -> None:
        """Mark the store's methods (until ``stop``)."""
        if self._marking is None:
            self._marking = self.marked.marking()
            self._marking.__enter__()

    def stop(self) -> None:
        """Put the store's own methods back."""
        if self._marking is not None:
            marking, self._marking = self._marking, None
            marking.__exit__(None, None, None)

    def reach(self) -> Reach:
        """What ran of what can: call once the run is done."""
        self.stop()
        reached: dict[str, set[int]] = {unit: set() for unit in self.runnable}
        if self.bodies:
            self.replayed = replayed_lines(self.log, list(self.bodies))
            for body, lines in self.replayed.lines.items():
                sent = self.bodies[body]
                for line in lines:
                    if line <= sent.fragment_lines:
                        reached[sent.fragment_unit].add(line)
                    else:
                        reached[sent.unit].add(line - sent.fragment_lines)
        for unit, cls in self.classes.items():
            reached[unit] |= self.marked.lines.get(source_file(cls), set())
        return Reach(dict(self.runnable),
                     {unit: frozenset(lines & self.runnable[unit])
                      for unit, lines in reached.items()})

