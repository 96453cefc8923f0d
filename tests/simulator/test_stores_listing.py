"""``python -m simulator stores`` lists every kind in two aligned columns."""

from __future__ import annotations

import re

from simulator.cli import main
from stores import registry

LONG_NAME = "my_team.variants.a_store_name_longer_than_any_the_lab_ships_today"


def test_the_summaries_start_in_one_column_past_the_longest_name(monkeypatch, capsys):
    # A plugin's kind with a long name, without registering it for good.
    shipped = registry.kinds()
    monkeypatch.setattr(registry, "kinds",
                        lambda: {**shipped, LONG_NAME: shipped["axond_budget.redis_v1"]})
    assert main(["stores"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(shipped) + 1
    starts = {re.match(r"\S+ +", line).end() for line in lines}
    assert starts == {len(LONG_NAME) + 2}, "every summary starts in the same column"
