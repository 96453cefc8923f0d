"""The CLI imports a command's modules only when that command runs: ``--help``
and ``stores`` start without the simulation, the search or the results' stack."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("simulator.run.compose", "simulator.search.hunt", "simulator.present.report",
         "simulator.sweeps", "hypothesis", "pyarrow", "pandas", "matplotlib", "fakeredis")


def modules_after(*argv: str) -> set[str]:
    code = ("import json, sys\n"
            "from simulator.cli import main\n"
            "try:\n"
            f"    main({list(argv)!r})\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_help_loads_no_command():
    loaded = modules_after("--help")
    assert loaded & set(HEAVY) == set()


def test_stores_loads_no_simulation():
    loaded = modules_after("stores")
    assert {"simulator.run.compose", "simulator.search.hunt", "hypothesis"} & loaded == set()


def test_a_command_loads_what_it_needs():
    # The check above would pass vacuously if nothing were ever loaded.
    assert "simulator.run.preflight" in modules_after("check", "data/scenarios/demo.toml")
