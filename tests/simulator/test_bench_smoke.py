"""``bench --quick`` runs to the end and prints every line with its ratio (a
smoke test: timings are the bench's to print, never a test's to assert)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from redis_server import redis_binary, redis_required

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(?P<name>[A-Za-z ]+): .+ -> .+ = (?P<ratio>[0-9.]+)( \(target .+\))?$")


def test_the_quick_bench_prints_each_figure_with_its_ratio():
    if redis_binary() is None and not redis_required():
        pytest.skip("no redis-server on PATH: the bench's Redis line cannot be measured")
    finished = subprocess.run([sys.executable, "-m", "simulator", "bench", "--quick"],
                              cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    lines = [LINE.match(line) for line in finished.stdout.splitlines()]
    names = [match["name"] for match in lines if match]
    assert names == ["Redis ceiling", "fakeredis", "kernel", "scale"], finished.stdout
    assert all(float(match["ratio"]) > 0 for match in lines if match)
