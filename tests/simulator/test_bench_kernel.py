"""The kernel and scale bench lines: the two kernel models are the same model,
and both lines measure something. No timing is asserted: timings live in the
bench, not in tests."""

from __future__ import annotations

from simulator.bench.kernel import ModelSize, measure_kernel, run_lab, run_simpy
from simulator.bench.lines import BenchLine
from simulator.bench.scale import measure_scale


def test_both_kernel_models_simulate_the_same_requests_in_the_same_virtual_time():
    size = ModelSize(replicas=50, virtual_us=3_000_000, seed=7)
    lab, _ = run_lab(size)
    simpy, _ = run_simpy(size)
    assert lab.as_dict() == simpy.as_dict()
    assert lab.requests > 500
    # The race against the timeout is exercised: some calls lose it.
    assert lab.denied_by_timeout > 0
    assert lab.settle_timeouts > 0


def test_the_kernel_models_depend_on_the_seed():
    one, _ = run_lab(ModelSize(replicas=20, virtual_us=1_000_000, seed=1))
    two, _ = run_lab(ModelSize(replicas=20, virtual_us=1_000_000, seed=2))
    assert one.as_dict() != two.as_dict()


def test_the_kernel_line_reports_both_rates_and_their_ratio():
    line = measure_kernel(quick=True)
    assert isinstance(line, BenchLine)
    assert line.name == "kernel"
    assert line.ratio > 0
    assert "lab " in line.figures and "SimPy " in line.figures


def test_the_scale_line_reports_memory_wall_time_and_requests_in_flight():
    line = measure_scale(quick=True)
    assert isinstance(line, BenchLine)
    assert line.name == "scale"
    assert 0 < line.ratio < 1
    assert "quick" in line.figures and "in flight" in line.figures
