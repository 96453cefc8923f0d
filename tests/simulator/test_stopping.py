"""A stop signal wins over whatever a library raises while handling it: the
CI saw Hypothesis replace a SIGTERM's ``Terminated`` by its own
``AssertionError`` (the signal landed while it built its runner), and the hunt
ended with a traceback instead of one line and exit 143."""

from __future__ import annotations

import os
import signal

import pytest

from simulator.run.stopping import Terminated, stopped_exit, terminate_as_interrupt


def _library_that_masks_the_signal() -> None:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        raise AssertionError("half-built state")  # raised while Terminated propagates


def test_an_exception_raised_in_place_of_the_signal_s_still_stops_as_the_signal():
    with pytest.raises(Terminated) as stopped, terminate_as_interrupt():
        _library_that_masks_the_signal()
    assert isinstance(stopped.value.__cause__, AssertionError)
    assert stopped_exit(stopped.value) == 128 + signal.SIGTERM


def test_an_error_with_no_signal_is_left_as_it_is():
    with pytest.raises(AssertionError), terminate_as_interrupt():
        raise AssertionError("a real failure")


def test_the_handlers_are_restored_after_the_block():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), terminate_as_interrupt():
        _library_that_masks_the_signal()
    assert signal.getsignal(signal.SIGTERM) == before
