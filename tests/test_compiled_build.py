"""The compiled hot path (``simulator.compiled``): used when current, the same runs
as the interpreted build, never used when stale, and optional.

The tests that need the build bring it up to date first (only what changed is
rebuilt) and skip loudly when it cannot be built here; ``REQUIRE_COMPILED=1``
(CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from simulator import compiled
from simulator.compiled import build

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import contextlib, io, json, sys
import simulator.compiled, simulator.engine.kernel
from simulator.cli import main
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario

cases = json.loads(sys.argv[1])
runs = {}
for path, overrides, backend in cases["runs"]:
    result = run_scenario(load_scenario(path, overrides), backend=backend)
    runs[f"{path} {overrides} {backend}"] = result.summary
hunts = {}
for argv in cases["commands"]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    hunts[" ".join(argv)] = [status, out.getvalue()]
print(json.dumps({"compiled": simulator.compiled.in_use(),
                  "kernel": simulator.engine.kernel.__file__, "runs": runs, "commands": hunts}))
"""

CASES = {
    "runs": [
        # fakeredis: the budget scripts, a hot namespace.
        ["data/scenarios/exactness-hot-namespace.toml", {"duration": "2s"}, None],
        # In-process stores on the memory backend.
        ["data/scenarios/in-memory-fleet.toml", {"duration": "1s"}, "memory"],
        # A transactional ledger service; multiplexed connections; sessions.
        ["data/scenarios/tollgate.toml", {"duration": "3s"}, "memory"],
        ["data/scenarios/leases.toml", {"duration": "3s"}, None],
        ["data/scenarios/av-state.toml", {"duration": "3s"}, None],
    ],
    "commands": [
        ["hunt", "data/scenarios/hunt/split-settlement-quiet.toml", "--invariant",
         "conservation_drift_microdollars_total < 0", "--examples", "4", "--seed", "3"],
    ],
}


def _unavailable(reason: str) -> None:
    message = f"compiled hot path unavailable here: {reason}"
    if os.environ.get("REQUIRE_COMPILED") == "1":
        pytest.fail(f"REQUIRE_COMPILED=1 but {message}")
    pytest.skip(message)


@pytest.fixture(scope="module")
def current_build() -> compiled.BuildState:
    """The build, brought up to date (a no-op when it is), or a loud skip."""
    state = compiled.read_build()
    if not state.usable:
        done = subprocess.run([sys.executable, "-m", "simulator.compiled.build"], cwd=ROOT,
                              capture_output=True, text=True,
                              env={**os.environ, compiled.INTERPRETED_ENV: "1"})
        state = compiled.read_build()
        if not state.usable:
            _unavailable((done.stderr or done.stdout).strip() or state.reason)
    return state


def _probe(interpreted: bool) -> dict:
    env = {**os.environ, compiled.NOTICE_ENV: "1"}
    env.pop(compiled.INTERPRETED_ENV, None)
    if interpreted:
        env[compiled.INTERPRETED_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CASES)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_hot_path_loads_from_the_compiled_extensions_when_the_build_is_current(
        current_build):
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    files = subprocess.run(
        [sys.executable, "-c", "import importlib, json, sys; print(json.dumps("
         "{m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))",
         *current_build.extensions],
        cwd=ROOT, capture_output=True, text=True, check=True,
        env={key: value for key, value in os.environ.items()
             if key != compiled.INTERPRETED_ENV}).stdout
    loaded = json.loads(files)
    assert set(loaded) == set(compiled.HOT_PATH) & set(current_build.extensions)
    assert all(path.endswith(suffix) for path in loaded.values()), loaded


def test_interpreted_and_compiled_builds_give_identical_summaries_and_fingerprints(
        current_build):
    interpreted, compiled_run = _probe(interpreted=True), _probe(interpreted=False)
    assert not interpreted["compiled"] and interpreted["kernel"].endswith(".py")
    assert compiled_run["compiled"], "the compiled build went stale during the test"
    assert compiled_run["runs"] == interpreted["runs"]
    assert compiled_run["commands"] == interpreted["commands"]
    fingerprints = {run["trace_fingerprint"] for run in interpreted["runs"].values()}
    assert len(fingerprints) == len(CASES["runs"])  # every case ran, and differently


def _manifest_for(tmp_path: Path, module: str, **changed: object) -> Path:
    """A manifest in ``tmp_path`` holding ``module`` as built from today's source,
    with ``changed`` entries overriding what was recorded."""
    entry = {**build.entry_of(module), **changed}
    (tmp_path / str(entry["extension"])).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / str(entry["extension"])).write_bytes(b"")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
                                    "modules": {module: entry}}))
    return manifest


def test_a_source_edited_since_the_build_makes_the_whole_build_unused(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.delenv(compiled.INTERPRETED_ENV, raising=False)
    monkeypatch.delenv(compiled.NOTICE_ENV, raising=False)
    manifest = _manifest_for(tmp_path, "simulator.engine.traps", digest="0" * 32, stamp=[[0, 0]])
    finders = list(sys.meta_path)
    state = compiled.install(manifest)
    assert state.stale == ("simulator.engine.traps",) and not state.usable
    assert sys.meta_path == finders  # no finder for a stale build
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "simulator.engine.traps" in lines[0] and "interpreted" in lines[0]
    # Said once per process tree: the children it starts stay quiet.
    compiled.install(manifest)
    assert capsys.readouterr().err == ""


def test_a_source_touched_but_unchanged_keeps_the_build(tmp_path):
    manifest = _manifest_for(tmp_path, "simulator.engine.traps", stamp=[[0, 0]])
    state = compiled.read_build(manifest)
    assert state.usable and set(state.extensions) == {"simulator.engine.traps"}


def test_a_build_for_another_python_is_not_used(tmp_path):
    manifest = _manifest_for(tmp_path, "simulator.engine.traps")
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "ext_suffix": ".cpython-299-elsewhere.so"}))
    assert not compiled.read_build(manifest).usable


def test_without_a_c_compiler_the_build_says_so_in_one_line_and_runs_interpreted(
        monkeypatch, capsys):
    monkeypatch.setattr(build.shutil, "which", lambda _: None)
    before = compiled.MANIFEST.read_bytes() if compiled.MANIFEST.exists() else None
    assert build.main(["--force"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "no C compiler" in lines[0] and "running interpreted" in lines[0]
    # The build already there is left as it was.
    assert (compiled.MANIFEST.read_bytes() if compiled.MANIFEST.exists() else None) == before


def test_a_module_is_compiled_from_the_declarations_its_pxd_cimports_too():
    kernel = compiled.sources_of("simulator.engine.kernel")
    assert [path.name for path in kernel] == ["kernel.py", "kernel.pxd", "traps.pxd"]
    assert [path.name for path in compiled.sources_of("simulator.engine.traps")] == [
        "traps.py", "traps.pxd"]
    assert [path.name for path in compiled.sources_of("simulator.net.links")] == ["links.py"]
