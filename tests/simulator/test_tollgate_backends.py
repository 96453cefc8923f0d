"""Every committed tollgate scenario gives the same run on the in-process
ledger and on a real PostgreSQL: the same summary (but for its ``backend``
field) and the same trace fingerprint, and the lab leaves no schema behind.

The PostgreSQL runs need the throwaway cluster (``postgres_server``): they
skip loudly without its binaries and fail when ``REQUIRE_POSTGRES=1``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, load_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted({*REPO.glob("data/scenarios/tollgate*.toml"),
                    *REPO.glob("data/scenarios/hunt/tollgate*.toml")})


def test_the_tollgate_scenarios_are_found():
    assert len(SCENARIOS) >= 6, SCENARIOS


async def _schemas(dsn: str) -> set[str]:
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch("SELECT schema_name FROM information_schema.schemata")
        return {row["schema_name"] for row in rows}
    finally:
        await connection.close()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda path: path.stem)
def test_memory_and_postgresql_give_the_same_run(path, postgres_server):
    scenario = load_scenario(path)
    before = asyncio.run(_schemas(postgres_server.dsn))
    in_memory = run_scenario(scenario, backend="memory").summary
    on_postgres = run_scenario(scenario, backend=postgres_server.dsn).summary
    assert (in_memory.pop("backend"), on_postgres.pop("backend")) == ("memory", "postgresql")
    assert on_postgres == in_memory
    assert asyncio.run(_schemas(postgres_server.dsn)) == before


def test_an_unreachable_database_is_one_clear_error():
    scenario = load_scenario(REPO / "data/scenarios/tollgate.toml")
    from simulator.backends import BackendError

    with pytest.raises((BackendError, ScenarioError), match="cannot open the service"):
        run_scenario(scenario, backend="postgresql://lab@127.0.0.1:1/postgres")


def test_backend_postgresql_alone_runs_on_a_throwaway_server_of_the_runs_own(postgres_server):
    # postgres_server only makes the test skip (or fail when required) like
    # the others when the binaries are missing; the run starts its own.
    scenario = load_scenario(REPO / "data/scenarios/hunt/tollgate-replay-bills-twice-quiet.toml")
    in_memory = run_scenario(scenario).summary
    throwaway = run_scenario(scenario, backend="postgresql")
    assert throwaway.run_info["backend"] == "postgresql"
    assert throwaway.summary["trace_fingerprint"] == in_memory["trace_fingerprint"]


def test_a_throwaway_server_dies_with_the_process_that_started_it(postgres_server, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    starter = tmp_path / "start.py"
    starter.write_text("import time\n"
                       "from simulator.backends.local_postgres import ThrowawayPostgres\n"
                       "server = ThrowawayPostgres()\n"
                       "print(server.process.pid, flush=True)\n"
                       "time.sleep(120)\n")
    lab = subprocess.Popen([sys.executable, str(starter)], stdout=subprocess.PIPE, text=True,
                           cwd=REPO)
    postgres = int(lab.stdout.readline())
    try:
        lab.send_signal(signal.SIGKILL)
        lab.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{postgres}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{postgres}").exists(), "the throwaway postgres outlived the lab"
    finally:
        if Path(f"/proc/{postgres}").exists():
            os.kill(postgres, signal.SIGKILL)


def test_the_fixed_ledger_on_postgresql_is_never_blamed_under_every_fault_class(
        postgres_server):
    # Issue 24: the same run as in memory (test_tollgate_fault_contract), every fault
    # class of the lab at once, and nothing filed under store_logic.
    from blame import blamed_on_the_store
    from scenario_data import merge
    from test_tollgate_family import BASE
    from test_tollgate_fault_contract import _all_together

    from simulator.scenario.model import parse_scenario

    scenario = parse_scenario(merge(BASE, _all_together()))
    in_memory = run_scenario(scenario, backend="memory").summary
    on_postgres = run_scenario(scenario, backend=postgres_server.dsn).summary
    assert (in_memory.pop("backend"), on_postgres.pop("backend")) == ("memory", "postgresql")
    assert on_postgres == in_memory
    assert blamed_on_the_store(on_postgres) == {}
