"""Build the compiled hot path: ``python -m simulator.compiled.build`` (``make compiled``).

Each module of ``HOT_PATH`` is translated to C by Cython, from its plain
``.py`` (and a ``.pxd`` beside it, if one exists), then compiled by the C
compiler Python itself was built with, into ``build/compiled/``, mirroring
the package layout. Modules are built in parallel, one per core. The
manifest, written last, records each module's source hash: a build that did
not finish leaves no manifest, so nothing half-built is ever loaded.

Rules kept here:

* The sources are compiled as they are, with Cython's ``annotation_typing``
  off: a type hint never changes what the code does (``x: float`` would
  otherwise make ``x`` a C double and turn an ``int`` into ``1.0``), so the
  compiled build computes exactly what the interpreted one does.
* Nothing is rebuilt when the manifest already matches every source.
* Without Cython or a working C compiler, the build prints one line saying
  the lab runs interpreted, and exits 0: nothing else depends on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from simulator.compiled import (
    BUILD_DIR,
    HOT_PATH,
    MANIFEST,
    ROOT,
    digest_of,
    read_build,
    sources_of,
    stamp_of,
)

DIRECTIVES = "language_level=3,annotation_typing=False,binding=True"
"""Cython semantics kept exactly Python's; ``binding`` keeps functions introspectable."""
C_FLAGS = ("-O2", "-fwrapv", "-fno-strict-aliasing", "-DNDEBUG", "-w")


class BuildFailed(RuntimeError):
    """The build could not finish; the message says what to do about it."""


def c_compiler() -> list[str]:
    """The command that compiles and links one extension module, as Python was built."""
    linker = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
    if shutil.which(linker[0]) is None:
        raise BuildFailed(f"no C compiler ({linker[0]} not found)")
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        raise BuildFailed(f"no Python headers (no Python.h in {include})")
    return [*linker, *(sysconfig.get_config_var("CCSHARED") or "-fPIC").split(), *C_FLAGS,
            f"-I{include}"]


def extension_of(module: str) -> Path:
    """Where a module's extension goes, relative to ``BUILD_DIR``."""
    return Path(*module.split(".")).with_suffix("").with_name(
        module.rsplit(".", 1)[-1] + sysconfig.get_config_var("EXT_SUFFIX"))


def build_one(module: str, compiler: list[str]) -> None:
    source = sources_of(module)[0]
    # Named for this build: two builds at once (two test sessions) never share a file.
    c_file = BUILD_DIR / "c" / f"{module}.{os.getpid()}.c"
    extension = BUILD_DIR / extension_of(module)
    unfinished = extension.with_name(f".{extension.name}.{os.getpid()}")
    c_file.parent.mkdir(parents=True, exist_ok=True)
    extension.parent.mkdir(parents=True, exist_ok=True)
    steps = (
        [sys.executable, "-m", "cython", "--module-name", module, "-X", DIRECTIVES,
         "-o", str(c_file), str(source)],
        [*compiler, str(c_file), "-o", str(unfinished)],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()
            raise BuildFailed(f"{module}: {last[-1] if last else 'failed'}")
    # Into place in one step: a process loading the old extension meanwhile
    # keeps the file it opened.
    os.replace(unfinished, extension)
    c_file.unlink()


def build(workers: int | None = None, force: bool = False) -> int:
    """Build the modules of the hot path that changed (all with ``force``);
    return how many were compiled."""
    try:
        import Cython  # noqa: F401 - only whether it is installed
    except ImportError:
        raise BuildFailed("Cython is not installed") from None
    compiler = c_compiler()
    modules = [module for module in HOT_PATH if sources_of(module)[0].exists()]
    settings = settings_of(compiler)
    kept = {} if force else reusable(settings)
    MANIFEST.unlink(missing_ok=True)
    # Hashed before compiling: an edit made during the build makes it stale, not wrong.
    entries = {module: entry_of(module) for module in modules}
    changed = [module for module in modules if not same_build(kept.get(module), entries[module])]
    with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        list(pool.map(lambda module: build_one(module, compiler), changed))
    leave_only(entries)
    unfinished = MANIFEST.with_name(f".{MANIFEST.name}.{os.getpid()}")
    unfinished.write_text(json.dumps({"ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
                                      "settings": settings, "modules": entries}, indent=1))
    os.replace(unfinished, MANIFEST)
    return len(changed)


def leave_only(entries: dict[str, dict[str, object]]) -> None:
    """Remove extensions of modules no longer compiled (out of ``HOT_PATH``)."""
    wanted = {BUILD_DIR / str(entry["extension"]) for entry in entries.values()}
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for extension in (BUILD_DIR / "simulator").rglob(f"*{suffix}"):
        if extension not in wanted:
            extension.unlink()


def settings_of(compiler: list[str]) -> str:
    """Everything besides the sources that makes an extension what it is."""
    from Cython import __version__ as cython_version

    return " ".join([f"Cython {cython_version}", DIRECTIVES, *compiler])


def entry_of(module: str) -> dict[str, object]:
    paths = sources_of(module)
    return {"sources": [str(path.relative_to(ROOT)) for path in paths],
            "stamp": stamp_of(paths), "digest": digest_of(paths),
            "extension": str(extension_of(module))}


def same_build(previous: dict[str, object] | None, today: dict[str, object]) -> bool:
    """Whether an extension built from ``previous`` is what ``today`` would build
    (a source touched but not changed needs no rebuild)."""
    return previous is not None and all(
        previous.get(name) == today[name] for name in ("sources", "digest", "extension"))


def reusable(settings: str) -> dict[str, object]:
    """The previous build's entries whose extensions can be kept as they are: built
    with the same settings, and still there. (An entry is kept only if it equals
    today's sources and their digest, ``same_build``.)"""
    try:
        previous = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return {}
    if previous.get("settings") != settings:
        return {}
    return {module: entry for module, entry in previous.get("modules", {}).items()
            if (BUILD_DIR / entry["extension"]).exists()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator.compiled.build",
                                     description="Compile the lab's hot path with Cython.")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--workers", type=int, default=None,
                        help="modules compiled at once (default: one per core)")
    options = parser.parse_args(argv)
    state = read_build()
    wanted = {module for module in HOT_PATH if sources_of(module)[0].exists()}
    if state.usable and set(state.extensions) == wanted and not options.force:
        print(f"compiled hot path up to date ({len(state.extensions)} modules)")
        return 0
    started = time.monotonic()
    try:
        count = build(options.workers, options.force)
    except BuildFailed as failure:
        print(f"compiled hot path not built: {failure}; running interpreted", file=sys.stderr)
        return 0
    print(f"compiled hot path built: {count} modules in {time.monotonic() - started:.0f}s "
          f"({BUILD_DIR.relative_to(ROOT)}/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
