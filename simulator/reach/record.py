"""Recording one run's reach: what the store's code is, where it lives, and
the two records of what ran (the server's log for the Lua, the marks of
the store's methods for the Python), put together at the run's end."""

from __future__ import annotations

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


class ReachRecorder:
    """The reach of one run of ``kinds`` (the scenario's, then any it migrates
    to): attach it to the run's Redis backend, trace while the run runs, and
    read the reach when it is done."""

    def __init__(self, kinds: list[Any]) -> None:
        self.bodies: dict[str, str] = {}
        """Each script text the kinds send, and its unit."""
        self.runnable: dict[str, frozenset[int]] = {}
        self.classes: dict[str, type] = {}
        for kind in kinds:
            for name, body in sorted((kind.scripts or {}).items()):
                unit = self.bodies.setdefault(body, script_unit(kind, name))
                self.runnable[unit] = self.runnable.get(unit, frozenset()) | lua_runnable(body)
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
                reached[self.bodies[body]] |= lines
        for unit, cls in self.classes.items():
            reached[unit] |= self.marked.lines.get(source_file(cls), set())
        return Reach(dict(self.runnable),
                     {unit: frozenset(lines & self.runnable[unit])
                      for unit, lines in reached.items()})

