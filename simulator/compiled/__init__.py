"""The compiled hot path: which modules are compiled, and whether the build may be used.

The modules in ``HOT_PATH`` are plain Python. ``python -m simulator.compiled.build``
(``make compiled``) compiles them with Cython, as they are, into extension
modules under ``build/compiled/`` (outside the source tree, so the same
checkout runs either build), and writes a manifest there naming each
module's source and a hash of it. ``simulator/__init__.py`` calls ``install``
first thing: it puts a finder at the front of ``sys.meta_path`` that loads
those extension modules instead of the sources, unless

* ``LAB_INTERPRETED=1`` is set (the interpreted build, on purpose), or
* there is no build (nothing is said: a machine without a C compiler was told
  once, by the build), or
* the build is stale: any compiled module's source (or its ``.pxd``) differs
  from the one it was built from. A stale extension would silently run old
  code, so then *no* module is loaded compiled (the modules call each other
  and are only ever checked as one build), and one line says so, once per
  process tree.

Rules kept here:

* Checking costs an ``os.stat`` per module on every import of ``simulator``;
  a source is hashed again only when its size or modification time differs
  from what the manifest recorded.
* The finder loads only modules the manifest names, each from its own file:
  a module removed from ``HOT_PATH`` or never built is imported from source.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

HOT_PATH: tuple[str, ...] = (
    # The kernel and what it steps on every event.
    "simulator.engine.kernel",
    "simulator.engine.traps",
    "simulator.engine.runtime",
    # Messages: links, multiplexed connections, the server and its queue.
    "simulator.net.links",
    "simulator.net.connections",
    "simulator.net.server",
    "simulator.net.pipeline",
    "simulator.net.redis_port",
    "simulator.net.service",
    "simulator.net.service_port",
    "simulator.world.fleet",
    # The observers, oracles and the trace every event reaches.
    "simulator.engine.trace",
    "simulator.run.metrics",
    "simulator.plugin.attribution",
    "simulator.plugin.key_mirror",
    "simulator.families.axond_budget.lifecycle",
    "simulator.families.axond_budget.observer",
    "simulator.families.axond_budget.scope_oracle",
    "simulator.families.axond_budget.oracle",
    "simulator.families.axond_budget.in_process",
    "simulator.families.axond_leases.lifecycle",
    "simulator.families.axond_leases.observer",
    "simulator.families.axond_leases.books",
    "simulator.families.axond_leases.oracle",
    "simulator.families.av_state.lifecycle",
    "simulator.families.av_state.observer",
    "simulator.families.av_state.books",
    "simulator.families.av_state.oracle",
    "simulator.families.tollgate.lifecycle",
    "simulator.families.tollgate.observer",
    "simulator.families.tollgate.books",
    "simulator.families.tollgate.oracle",
)
"""The modules compiled together: what calls what on every executed script.

Left out: modules defining pydantic models (``distributions``, ``arrivals``,
``sessions``, ``workload``): pydantic reads a model's class body, and a
compiled method is not a plain function to it."""

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: ``simulator/`` and ``build/`` sit side by side in it."""
BUILD_DIR = ROOT / "build" / "compiled"
MANIFEST = BUILD_DIR / "manifest.json"
INTERPRETED_ENV = "LAB_INTERPRETED"
NOTICE_ENV = "LAB_COMPILED_NOTICE_SHOWN"
"""Set once the stale-build line was printed, so a process's children stay quiet."""


def source_of(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


CIMPORT = re.compile(r"^from (simulator\.[\w.]+) cimport", re.MULTILINE)


def sources_of(module: str) -> list[Path]:
    """What a module is compiled from: its ``.py``, its ``.pxd`` if it has one,
    and the ``.pxd`` of each module that one cimports (``from simulator.x
    cimport ...``: a change there changes this module's extension types)."""
    source = source_of(module)
    declarations = source.with_suffix(".pxd")
    if not declarations.exists():
        return [source]
    cimported = [source_of(match.group(1)).with_suffix(".pxd") for match in
                 CIMPORT.finditer(declarations.read_text(encoding="utf-8"))]
    return [source, declarations, *cimported]


def digest_of(paths: list[Path]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def stamp_of(paths: list[Path]) -> list[list[int]]:
    """Sizes and modification times: a cheap first look before hashing."""
    return [[stat.st_size, stat.st_mtime_ns] for stat in (path.stat() for path in paths)]


@dataclass(frozen=True, slots=True)
class BuildState:
    """What ``install`` found: the extension of each module it may load, or why none."""

    extensions: dict[str, Path]
    stale: tuple[str, ...] = ()
    reason: str = ""

    @property
    def usable(self) -> bool:
        return bool(self.extensions) and not self.stale and not self.reason


def read_build(manifest_path: Path = MANIFEST) -> BuildState:
    """The build a manifest describes (its extensions sit beside it), checked
    against today's sources."""
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        return BuildState({}, reason="no compiled build")
    if manifest.get("ext_suffix") != sysconfig.get_config_var("EXT_SUFFIX"):
        return BuildState({}, reason="the compiled build is for another Python")
    extensions: dict[str, Path] = {}
    stale: list[str] = []
    for module, entry in manifest.get("modules", {}).items():
        paths = [ROOT / name for name in entry["sources"]]
        extension = manifest_path.parent / entry["extension"]
        try:
            if paths != sources_of(module) or not extension.exists():
                stale.append(module)
            elif stamp_of(paths) != entry["stamp"] and digest_of(paths) != entry["digest"]:
                stale.append(module)
        except OSError:
            stale.append(module)
        extensions[module] = extension
    return BuildState(extensions, tuple(stale))


class CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled extension of each module the build holds."""

    def __init__(self, extensions: dict[str, Path]) -> None:
        self.extensions = extensions

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        extension = self.extensions.get(fullname)
        if extension is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(extension))
        return importlib.util.spec_from_file_location(fullname, extension, loader=loader)


def install(manifest_path: Path = MANIFEST) -> BuildState:
    """Load the hot path compiled from now on, when a current build exists (see
    the module docstring); say once, on stderr, why a stale one is not used."""
    if os.environ.get(INTERPRETED_ENV) == "1":
        return BuildState({}, reason=f"{INTERPRETED_ENV}=1")
    state = read_build(manifest_path)
    if state.usable:
        if not any(isinstance(finder, CompiledFinder) for finder in sys.meta_path):
            sys.meta_path.insert(0, CompiledFinder(state.extensions))
    elif state.stale and not os.environ.get(NOTICE_ENV):
        os.environ[NOTICE_ENV] = "1"
        more = f" (and {len(state.stale) - 1} more)" if len(state.stale) > 1 else ""
        print(f"simulator: the compiled build is older than {state.stale[0]}{more}; running "
              "interpreted (make compiled rebuilds it)", file=sys.stderr)
    return state


def in_use() -> bool:
    """Whether this process loads the hot path compiled."""
    return any(isinstance(finder, CompiledFinder) for finder in sys.meta_path)
