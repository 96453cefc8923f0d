"""The scenario examples the README shows are scenarios the lab accepts: a
newcomer who copies one into a file gets a run, not a refusal."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from simulator.scenario.model import parse_scenario, read_toml

REPO = Path(__file__).resolve().parents[1]


def readme_scenario_blocks() -> list[dict]:
    readme = (REPO / "README.md").read_text()
    blocks = [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", readme, re.S)]
    # A sweep file names its base scenario; the rest are scenario fragments.
    return [block for block in blocks if "vary" not in block]


def test_every_scenario_fragment_in_the_readme_validates_on_the_demo():
    blocks = readme_scenario_blocks()
    assert blocks, "the README shows a scenario fragment"
    for block in blocks:
        scenario = {**read_toml(REPO / "data/scenarios/demo.toml"), **block}
        parse_scenario(scenario, source=f"README fragment with [{', '.join(block)}]")
