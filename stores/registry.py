"""The registry of store kinds: how the simulator finds a store.

The simulator reaches store implementations only through this module: a
scenario names a kind (``"axond_budget.redis_v1"``), and the ``StoreKind``
says how to build it, which settings it takes, which backends it runs on,
which request protocol a gateway speaks to it, which Lua scripts it runs, and
how the lab reads what it recorded. A family registers its kinds in its
package's ``KINDS``; a plugin module, imported by ``load_plugins``, calls
``register``.

How a kind replaces a script: its ``scripts`` (a ``stores.scripts.ScriptSet``)
maps every script name of its family -- runnable scripts, fragments they
include, migration scripts -- to the text it runs, and its store loads
scripts through that set only. A kind whose set replaces ``settle_v1`` with a
file of its own (``ScriptSet.replacing(settle_v1=Path("my_settle.lua"))``)
runs that file, and the lab labels its calls ``settle_v1`` in traces, in
fault schedules (``call = "settle_v1"``) and in race reports; one that changes
a few lines patches the shipped text instead
(``ScriptSet.patching(settle_v1=Patch(old, new))``, refused unless ``old``
occurs in it exactly once), as the historical variants do. For the axond
budget family, ``stores.axond_budget.redis_kind`` builds such a kind in one
call, with ``build``, ``migrate`` and ``scripts`` agreeing.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from stores.scripts import ScriptSet

FAMILIES = ("axond_budget", "axond_leases", "av_state", "tollgate")


@dataclass(frozen=True)
class StoreKind:
    """One selectable store: a family's implementation (or historical variant)."""

    name: str
    summary: str
    protocol: str
    """The request lifecycle a gateway runs against it, e.g. ``"budget"``."""
    settings_model: type[BaseModel]
    backends: tuple[str, ...]
    """Backend families it runs on: ``"redis"`` (fakeredis or a real server),
    ``"memory"`` (in-process state: each replica's own, or a service kind's
    service in the lab's process) or ``"postgresql"`` (a service kind on a
    real PostgreSQL)."""
    build: Callable[[Any, Any, Any], Awaitable[Any]]
    """``build(data_port_or_None, runtime, settings)``: boot one replica's store."""
    contract: ModuleType
    """The family's contract module (key and result types)."""
    ledger_keys: Callable[[Any, Any], dict[str, str]] | None
    """Redis kinds: ``ledger_keys(settings, key)`` names the Redis keys that
    hold a key's ledger, each with its role (``"spent"``, ``"holds"``...), so
    the lab's oracle can follow the store's state exactly."""
    decode: Callable[[str, Any], Any] | None
    """Redis kinds: ``decode(role, raw)`` reads one such key's raw content."""
    read_ledgers: Callable[[Any], dict[Any, Any]] | None
    """In-process kinds: ``read_ledgers(store)`` reads every ledger one
    replica's store retains, by key (read-only: it reclaims nothing)."""
    scripts: ScriptSet = ScriptSet()
    """The Lua it runs, by script name: its family's files with the kind's own
    replacements. Its ``build`` and ``migrate`` load scripts from this set, and
    the lab names the calls it sees by it (``ScriptSet.labels``)."""
    migrate: Callable[[Any, Any, Any], Awaitable[Any]] | None = None
    """``migrate(data_port, settings, namespaces)``: the migration an operator
    runs, with the fleet stopped, before starting a fleet of this kind on a
    keyspace another kind wrote (its report has ``carried_microdollars``)."""
    service: Callable[[str | None, Any, list[Any], str], Awaitable[Any]] | None = None
    """Service kinds (a ledger, not Redis): ``service(url, settings, keys, name)``
    opens the ``stores.ports.Service`` the lab's service node runs, provisioned
    for the workload's ``keys`` -- in process for ``None``, else on the
    database at ``url``, under ``name`` (unique to the run: its schema) -- and
    each replica's ``build`` gets a ``stores.ports.ServicePort`` to it."""
    holds_count_past_deadline: bool = False
    """The store keeps counting a hold against the cap after its deadline,
    until something deletes it (its settlement, or the expiry of the key that
    holds it), instead of stopping at the deadline: a variant that never
    reclaims expired holds. The oracle needs it to know when such a hold stops
    counting."""

    with_scripts: Callable[[str, ScriptSet], StoreKind] | None = None
    """Redis kinds: ``with_scripts(name, scripts)`` is this kind under another
    name running ``scripts`` instead (its ``build`` and ``migrate`` too): how
    a plugin, or ``mutate``, derives a kind whose one script changed."""
    classes: tuple[type, ...] = ()
    """The kind's own Python classes, those ``with_classes`` can replace: a
    Redis kind's store class; the tollgate ledger's holder and rules."""
    with_classes: Callable[[str, Mapping[type, type]], StoreKind] | None = None
    """``with_classes(name, {cls: replacement})`` is this kind under another
    name with each of its ``classes`` in the mapping replaced (a subclass
    changing one method): how ``mutate`` derives a kind whose Python changed."""

    @property
    def per_replica(self) -> bool:
        """Each replica keeps its own state (no shared server or service)."""
        return self.service is None and "redis" not in self.backends

    @property
    def default_backend(self) -> str:
        return "fakeredis" if "redis" in self.backends else "memory"


_REGISTERED: dict[str, StoreKind] = {}
"""Kinds registered at run time by plugins (``register``), by name."""

_ORIGINS: dict[str, str] = {}
"""The module each registered kind came from, by kind name: what a race
report or a sweep worker imports to have the kind again."""

_IMPORTING: list[str] = []
"""The plugin modules ``load_plugins`` is importing right now, innermost last."""


class PluginError(ValueError):
    """A plugin module that could not be imported; one line, naming it."""


def register(kind: StoreKind) -> StoreKind:
    """Make ``kind`` selectable by name, from outside the tree: a plugin module
    calls this when imported. A name a shipped kind or another plugin already
    uses is refused, so a plugin can never silently replace a store."""
    taken = shipped()
    if kind.name in taken or kind.name in _REGISTERED:
        raise ValueError(f"store kind {kind.name!r} is already registered")
    _REGISTERED[kind.name] = kind
    # The module to import for this kind again: the plugin being loaded, or
    # else the module whose code called register.
    _ORIGINS[kind.name] = (_IMPORTING[-1] if _IMPORTING
                           else sys._getframe(1).f_globals.get("__name__", "__main__"))
    return kind


def load_plugins(modules: Iterable[str]) -> tuple[str, ...]:
    """Import each plugin module (a dotted name found on ``sys.path``), which
    registers its kinds; the names, in order. A module already imported is not
    imported again, so naming a plugin twice (on the command line and in the
    scenario, or in every sweep task) is harmless; one that registers nothing
    is fine. A module that fails to import is a ``PluginError`` naming it."""
    loaded = []
    for module in modules:
        if module not in sys.modules:
            _IMPORTING.append(module)
            try:
                importlib.import_module(module)
            except Exception as error:  # noqa: BLE001 - whatever the plugin raised, one line
                raise PluginError(_import_failure(module, error)) from None
            finally:
                _IMPORTING.pop()
        loaded.append(module)
    return tuple(loaded)


def _import_failure(module: str, error: Exception) -> str:
    if isinstance(error, ModuleNotFoundError) and error.name is not None and (
            module == error.name or module.startswith(f"{error.name}.")):
        return (f"plugin {module!r} cannot be imported: no module named {error.name!r} on "
                "the Python path; put its directory on PYTHONPATH (or install it)")
    return f"plugin {module!r} failed to import: {type(error).__name__}: {error}"


def plugins_for(names: Iterable[str]) -> tuple[str, ...]:
    """The plugin modules that registered the kinds ``names`` (shipped kinds
    need none), each once, in order: what a race report lists in ``plugins``."""
    found = [_ORIGINS[name] for name in names if name in _ORIGINS]
    return tuple(dict.fromkeys(found))


def shipped() -> dict[str, StoreKind]:
    found: dict[str, StoreKind] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"stores.{family}")
        for kind in module.KINDS:
            found[kind.name] = kind
    return found


def kinds() -> dict[str, StoreKind]:
    """Every registered kind, by name: the shipped ones, then plugins'."""
    return {**shipped(), **_REGISTERED}


def get(name: str) -> StoreKind:
    """The kind called ``name``; a clear error listing the known ones otherwise."""
    known = kinds()
    if name not in known:
        raise ValueError(f"unknown store {name!r}{_hint(name, known)}; known stores: "
                         f"{', '.join(sorted(known))}")
    return known[name]


def _hint(name: str, known: dict[str, StoreKind]) -> str:
    """A near miss of a known name, or, for a name no shipped family
    prefixes, where a plugin's kind comes from."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if name.split(".", 1)[0] not in {kind.split(".", 1)[0] for kind in shipped()}:
        return (" (a plugin's store? load the module that registers it with --plugin MODULE, "
                "importable from PYTHONPATH)")
    return ""
