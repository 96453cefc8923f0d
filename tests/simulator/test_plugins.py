"""Stores from outside the tree: plugin modules register store kinds, bring
their own Lua, and every command that reads scenarios honours them."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import textwrap
from multiprocessing import forkserver
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from simulator.cli import USER_ERROR, main
from simulator.present.verdicts import VERDICT_FAILED
from simulator.run.compose import script_names
from simulator.scenario.model import ScenarioError, parse_scenario
from simulator.sweeps import load_sweep, read_results, run_sweep
from stores import registry
from stores.axond_budget import SCRIPTS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"

# A RedisBudget subclass whose settle never charges: the damage shows that
# the plugin's class ran, not the shipped one.
SUBCLASS_PLUGIN = '''
from stores.axond_budget import RedisBudget, redis_kind
from stores.registry import register


class NeverCharges(RedisBudget):
    async def settle(self, key, reservation, actual_microdollars):
        await super().settle(key, reservation, 0)


register(redis_kind("plugtest.never_charges", "settles without charging",
                    store_class=NeverCharges))
'''

# The shipped class with its own settle_v1.lua (charging twice the spend) and
# its own migration_apply.lua, next to the module.
SCRIPT_PLUGIN = '''
from pathlib import Path

from stores.axond_budget import SCRIPTS, redis_kind
from stores.registry import register

HERE = Path(__file__).parent
register(redis_kind("plugtest.double_charge", "settle_v1 charges twice",
                    scripts=SCRIPTS.replacing(settle_v1=HERE / "double_settle.lua")))
register(redis_kind("plugtest.own_migration", "v2, its own migration_apply", layout="v2",
                    scripts=SCRIPTS.replacing(migration_apply=HERE / "own_apply.lua")))
'''

DOUBLE_SETTLE = """\
-- settle_v1, but the charge is doubled
redis.call('HDEL', KEYS[2], ARGV[1])
local actual = tonumber(ARGV[2])
if actual > 0 then
  redis.call('INCRBY', KEYS[1], 2 * actual)
end
return 1
"""

SCENARIO = """
name = "plugged"
duration = "2s"
drain = "1s"
{head}
[store_settings]
subject_cap_microdollars = 200_000
reservation_ttl = "5s"
[fleet]
replicas = 10
[workload]
arrivals = "poisson(100/s)"
keys = {{ subjects = 5, namespaces = 1 }}
estimate_microdollars = 5000
actual_microdollars = "uniform(1000, 5000)"
duration = "lognormal(50ms, 0.5)"
"""


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the lab holding the plugin modules (on no path yet)."""
    directory = tmp_path_factory.mktemp("plugins")
    (directory / "plugtest_subclass.py").write_text(SUBCLASS_PLUGIN)
    (directory / "plugtest_scripts.py").write_text(SCRIPT_PLUGIN)
    (directory / "double_settle.lua").write_text(DOUBLE_SETTLE)
    (directory / "own_apply.lua").write_text(
        "-- our own migration_apply\n" + SCRIPTS["migration_apply"])
    (directory / "plugtest_nothing.py").write_text('"""Registers nothing."""\n')
    return directory


@pytest.fixture
def on_path(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(plugin_dir))
    return plugin_dir


def write_scenario(directory: Path, head: str, name: str = "scenario.toml") -> Path:
    path = directory / name
    path.write_text(SCENARIO.format(head=head))
    return path


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_a_plugin_subclass_kind_runs_via_the_plugin_option(on_path, tmp_path, capsys):
    scenario = write_scenario(tmp_path, 'store = "plugtest.never_charges"')
    out = tmp_path / "out"
    code = main(["run", str(scenario), "--plugin", "plugtest_subclass", "--quiet",
                 "--out", str(out)])
    assert code == VERDICT_FAILED, capsys.readouterr().err
    summary = summary_of(out)
    assert summary["store"] == "plugtest.never_charges"
    # Nothing is ever charged: all the spend is missing from the books.
    assert summary["conservation_drift_microdollars_total"] < 0


def test_a_scenario_names_its_plugins_and_naming_one_twice_is_harmless(on_path, tmp_path,
                                                                        capsys):
    scenario = write_scenario(tmp_path, 'plugins = ["plugtest_subclass", "plugtest_subclass"]\n'
                                        'store = "plugtest.never_charges"')
    out = tmp_path / "out"
    code = main(["run", str(scenario), "--plugin", "plugtest_subclass", "--quiet",
                 "--out", str(out)])
    assert code == VERDICT_FAILED, capsys.readouterr().err
    assert summary_of(out)["store"] == "plugtest.never_charges"
    assert registry.load_plugins(["plugtest_subclass"]) == ("plugtest_subclass",)


def test_a_plugin_that_registers_nothing_is_fine(on_path, capsys):
    assert main(["stores", "--plugin", "plugtest_nothing"]) == 0


def test_a_missing_plugin_module_is_a_one_line_user_error(tmp_path, capsys):
    scenario = write_scenario(tmp_path, 'store = "axond_budget.redis_v1"')
    code = main(["run", str(scenario), "--plugin", "no_such_plugin_here", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == USER_ERROR
    assert len(err.splitlines()) == 1
    assert "'no_such_plugin_here'" in err and "PYTHONPATH" in err


def test_a_scenario_plugin_that_cannot_be_imported_names_the_field(tmp_path):
    with pytest.raises(ScenarioError, match=r"plugins: plugin 'no_such_plugin_here' cannot"):
        parse_scenario({"name": "x", "plugins": ["no_such_plugin_here"],
                        "store": "axond_budget.redis_v1"})


def test_a_plugin_that_raises_on_import_is_named_with_its_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "plugtest_broken.py").write_text("raise RuntimeError('half written')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["stores", "--plugin", "plugtest_broken"]) == USER_ERROR
    err = capsys.readouterr().err
    assert "'plugtest_broken' failed to import: RuntimeError: half written" in err


def test_stores_lists_a_plugin_kind(on_path, capsys):
    assert main(["stores", "--plugin", "plugtest_subclass"]) == 0
    assert "plugtest.never_charges" in capsys.readouterr().out


def test_fields_takes_plugins_too(on_path, capsys):
    assert main(["fields", "--plugin", "plugtest_subclass"]) == 0
    assert "plugins" in capsys.readouterr().out


def test_a_replaced_script_is_named_by_its_script_name_and_scheduled_faults_hit_it(
        on_path, tmp_path, capsys):
    scenario = write_scenario(tmp_path, textwrap.dedent('''\
        store = "plugtest.double_charge"
        [[faults.schedule]]
        at = "500ms"
        fault = "lose_reply"
        replicas = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        call = "settle_v1"
        count = 2
        '''))
    out = tmp_path / "out"
    code = main(["run", str(scenario), "--plugin", "plugtest_scripts", "--quiet",
                 "--out", str(out)])
    assert code == VERDICT_FAILED, capsys.readouterr().err
    trace = pq.read_table(out / "trace.parquet").to_pylist()
    labels = {row["detail"] for row in trace if row["kind"] == "call_executed"}
    assert "settle_v1" in labels
    assert not any(label.startswith("script:") for label in labels)
    lost = [row for row in trace if row["kind"] == "reply_lost" and row["outcome"] == "scheduled"]
    assert lost and all(row["detail"] == "settle_v1" for row in lost)
    # The replacement ran: every settlement charged twice what was spent.
    assert summary_of(out)["conservation_drift_microdollars_total"] > 0


def test_a_kind_replacing_a_migration_script_names_it_for_the_lab(on_path):
    scenario = parse_scenario({
        "name": "x", "plugins": ["plugtest_scripts"], "store": "axond_budget.redis_v1",
        "store_settings": {"subject_cap_microdollars": 1000},
        "migrations": [{"at": "1s", "to": "plugtest.own_migration",
                        "settings": {"namespace_cap_microdollars": 5000}}]})
    names = script_names(scenario)
    own = registry.get("plugtest.own_migration").scripts.source("migration_apply")
    assert own != SCRIPTS["migration_apply"]
    assert names[hashlib.sha1(own.encode()).hexdigest()] == "migration_apply"
    # The fleet's kind still names the shipped one.
    assert names[hashlib.sha1(SCRIPTS["migration_apply"].encode()).hexdigest()] == (
        "migration_apply")


def test_replacing_a_script_the_family_does_not_have_is_refused():
    with pytest.raises(ValueError, match="no script named 'settle_v3'"):
        SCRIPTS.replacing(settle_v3="return 1")


def test_a_sweep_with_a_plugin_runs_in_worker_processes(plugin_dir, tmp_path, monkeypatch,
                                                         capsys):
    # The fork server the workers start from is running before the plugin's
    # directory is on the driver's path; the workers get the driver's path
    # as it is when the sweep starts, and import the plugin themselves.
    forkserver.ensure_running()
    monkeypatch.syspath_prepend(str(plugin_dir))
    write_scenario(tmp_path, 'store = "plugtest.never_charges"', name="base.toml")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('name = "plugged"\nscenario = "base.toml"\nseeds = 1\n'
                     '[vary]\n"network.reply_loss" = [0.0, 0.05]\n')
    out = tmp_path / "out"
    code = main(["sweep", str(sweep), "--plugin", "plugtest_subclass", "--workers", "2",
                 "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    results = read_results(out)
    assert len(results) == 2
    assert (results["store"] == "plugtest.never_charges").all()
    assert (results["conservation_drift_microdollars_total"] < 0).all()


def test_a_sweep_with_a_plugin_runs_on_a_dask_cluster(plugin_dir, tmp_path, monkeypatch):
    from distributed import LocalCluster

    # The cluster's workers are started after the plugin's directory is on
    # the driver's path, as a user's `dask worker` would be started with it
    # on PYTHONPATH; each worker imports the plugin the task names.
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("PYTHONPATH", str(plugin_dir))
    write_scenario(tmp_path, 'store = "plugtest.never_charges"', name="base.toml")
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text('name = "plugged"\nscenario = "base.toml"\nseeds = 1\n'
                          '[vary]\n"network.reply_loss" = [0.0, 0.05]\n')
    sweep = load_sweep(sweep_file, plugins=["plugtest_subclass"])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        outcome = run_sweep(sweep, tmp_path / "out", scheduler=cluster.scheduler_address,
                            progress=False)
    assert (outcome.completed, outcome.failed) == (2, {})
    results = read_results(tmp_path / "out")
    assert (results["store"] == "plugtest.never_charges").all()
    assert (results["conservation_drift_microdollars_total"] < 0).all()


REPORT = """
title = "A plugin's store loses every charge"
seed = 1
{plugins}
[scenario]
name = "plugged"
duration = "2s"
drain = "1s"
store = "axond_budget.redis_v1"
[scenario.store_settings]
subject_cap_microdollars = 200_000
reservation_ttl = "5s"
[scenario.fleet]
replicas = 10
[scenario.workload]
arrivals = "poisson(100/s)"
keys = {{ subjects = 5, namespaces = 1 }}
estimate_microdollars = 5000
actual_microdollars = "uniform(1000, 5000)"
duration = "lognormal(50ms, 0.5)"

[variant]
store = "plugtest.never_charges"

[fixed]
store = "axond_budget.redis_v1"

[invariant]
metric = "conservation_drift_microdollars_total"
broken_when = "< 0"
"""


def test_a_race_report_with_plugins_replays(on_path, tmp_path, capsys):
    report = tmp_path / "report.toml"
    report.write_text(REPORT.format(plugins='plugins = ["plugtest_subclass"]'))
    assert main(["replay", str(report)]) == 0, capsys.readouterr().err
    assert "REPRODUCED" in capsys.readouterr().out


def test_replaying_a_report_whose_plugin_is_missing_names_it(tmp_path, capsys):
    report = tmp_path / "report.toml"
    report.write_text(REPORT.format(plugins='plugins = ["plugtest_not_installed"]'))
    assert main(["replay", str(report)]) == USER_ERROR
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'plugtest_not_installed'" in err and "PYTHONPATH" in err


def test_a_report_lists_the_plugins_its_kinds_came_from(on_path):
    registry.load_plugins(["plugtest_subclass", "plugtest_scripts"])
    assert registry.plugins_for(["axond_budget.redis_v1", "plugtest.own_migration",
                                 "plugtest.never_charges", "plugtest.double_charge"]) == (
        "plugtest_scripts", "plugtest_subclass")


# -- the README's example -------------------------------------------------------------


def test_the_readme_shows_the_example_plugin_as_it_is(capsys):
    readme = (REPO / "README.md").read_text()
    example = (EXAMPLES / "my_variant.py").read_text()
    assert example in readme
    assert readme_plugin_command() is not None


def readme_plugin_command() -> list[str]:
    """The README's command that runs the example plugin, as arguments to ``main``."""
    readme = (REPO / "README.md").read_text()
    command = re.search(r"PYTHONPATH=docs/examples \.venv/bin/python -m simulator run "
                        r"((?:.*\\\n)*.*)", readme)
    assert command is not None
    words = shlex.split(command.group(1).replace("\\\n", " "))
    assert words[words.index("--plugin") + 1] == "my_variant"
    return ["run", *words]


def test_the_readme_example_shows_the_variant_s_bug(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    words = readme_plugin_command()
    words[words.index("--out") + 1] = str(out)
    code = main([*words, "--set", "duration=4s", "--quiet"])
    assert code == VERDICT_FAILED, capsys.readouterr().err  # it blames the variant
    summary = summary_of(out)
    assert summary["store"] == "my_team.settle_once"
    assert summary["conservation_drift_by_store_logic_microdollars"] < 0
    trace = pq.read_table(out / "trace.parquet", columns=["kind", "detail"]).to_pylist()
    assert {"reserve_v1", "settle_v1"} <= {row["detail"] for row in trace
                                           if row["kind"] == "call_executed"}


def test_hunt_writes_the_plugins_a_report_needs_and_replay_imports_them(on_path, tmp_path,
                                                                          capsys):
    scenario = write_scenario(tmp_path, 'store = "plugtest.never_charges"')
    found = tmp_path / "found.toml"
    code = main(["hunt", str(scenario), "--plugin", "plugtest_subclass", "--examples", "3",
                 "--invariant", "conservation_drift_microdollars_total < 0",
                 "--faults", "lose_reply", "--out", str(found)])
    assert code == 0, capsys.readouterr().err
    assert 'plugins = ["plugtest_subclass"]' in found.read_text()
    assert main(["replay", str(found)]) == 0
    assert "REPRODUCED" in capsys.readouterr().out


def test_a_plugin_s_store_named_without_its_plugin_says_to_load_it():
    with pytest.raises(ValueError, match=r"--plugin MODULE"):
        registry.get("their_team.never_registered")
    with pytest.raises(ValueError, match=r"did you mean 'axond_budget.redis_v2'"):
        registry.get("axond_budget.redis_v3")
