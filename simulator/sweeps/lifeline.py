"""A lifeline from a sweep's driver to its worker processes: cut it, and they exit.

A sweep's driver must leave nothing behind, however it ends: killed by any
signal (SIGKILL included, which it cannot catch), or stopped on purpose
(Ctrl-C, SIGTERM) while simulations are still running.

What was measured without a lifeline (CPython 3.11, Linux): after ``kill -9``
of the driver, its workers, the forkserver and the resource tracker lived on
for good (about 370 MB). A local pool's processes hang together like this:

* the forkserver is the driver's child, and it exits at EOF on its "alive"
  pipe; but every worker it forks holds that pipe's write end too (so a worker
  could start processes of its own), so it outlives the driver as long as one
  worker does;
* a worker waits for its next task on a queue whose write end it holds
  itself, so it never sees EOF there, and a running simulation is never
  interrupted at all;
* the resource tracker exits at EOF on its pipe, held by the driver, the
  forkserver and every worker.

So the workers are the knot: once they exit, the forkserver and then the
resource tracker exit by themselves (measured: all gone well under a second
after the workers).

How the lifeline unties it: the driver opens a pipe and keeps its write end;
each worker receives the read end (the pool's initializer, ``hold``) and
starts a daemon thread blocked on it. Nothing is ever written, so that thread
wakes only at EOF, when every copy of the write end is closed: by the driver
on purpose (``cut``: stop now, not after the runs in progress), or by the
kernel because the driver died, whatever killed it. The thread then ends its
worker with ``os._exit`` even mid-simulation: a run is pure Python, which
hands the GIL over every few milliseconds. The write end is never inherited:
``os.pipe`` makes it close-on-exec, and the forkserver and resource tracker
are started with only the descriptors they need. (A process the driver forks
with the "fork" start method would hold it and keep the workers alive while
it lives.)

Alternatives weighed: ``prctl(PR_SET_PDEATHSIG)`` is Linux only and follows
the *parent*, which for a worker is the forkserver, not the driver; it would
have to be set in the forkserver too (fired by the death of the driver's
thread that forked it, not of the driver), a chain of two. Polling
``os.getppid()`` has the same wrong parent, and polling the driver's pid
costs a wake-up per interval and can be fooled by pid reuse. multiprocessing's
own parent sentinel (``parent_process().sentinel``) gives the same EOF on the
driver's death, but the driver cannot close it on purpose to stop its workers
mid-run without reaching into the pool's private state; one pipe does both.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from types import FrameType, TracebackType

from simulator.backends.engine import stop_all
from simulator.backends.run_marks import mark_process_temp_dir

CUT_EXIT_CODE = 75
"""A worker's exit status when its lifeline was cut (EX_TEMPFAIL: run it again later)."""


class Lifeline:
    """The driver's end of the pipe: workers of pools made here live while it is open."""

    def __init__(self) -> None:
        self._reader, self._writer = multiprocessing.Pipe(duplex=False)
        # The pools' forkserver keeps its socket in this process's pymp-*
        # directory, which a driver killed outright leaves: marked, ``clean``
        # knows it for the lab's.
        mark_process_temp_dir()

    def pool(self, workers: int, context: BaseContext) -> ProcessPoolExecutor:
        """A process pool whose every worker exits when this lifeline is cut."""
        return ProcessPoolExecutor(workers, mp_context=context, initializer=hold,
                                   initargs=(self._reader,))

    def cut(self) -> None:
        """Every worker holding this lifeline exits now, whatever it is running.
        Idempotent; the driver dying cuts it as well."""
        self._writer.close()
        self._reader.close()

    def __enter__(self) -> Lifeline:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.cut()


@contextmanager
def tethered_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A forkserver process pool whose workers die with this process (or when
    the block is left), for a notebook's or a library's own parallel runs."""
    with Lifeline() as lifeline, lifeline.pool(
            workers, multiprocessing.get_context("forkserver")) as pool:
        yield pool


def hold(reader: Connection) -> None:
    """A pool's initializer, in each worker: exit as soon as the lifeline is
    cut, or as soon as the pool terminates it (SIGTERM: what a process pool
    sends its other workers once one has exited, as a cut one does), in
    either case with the worker's engine servers stopped first."""
    signal.signal(signal.SIGTERM, _exit_when_terminated)
    threading.Thread(target=_exit_when_cut, args=(reader,), name="lifeline",
                     daemon=True).start()


def _exit_when_cut(reader: Connection) -> None:
    wait([reader])  # readable only at EOF: nothing is ever written
    _exit_now()


def _exit_when_terminated(signum: int, frame: FrameType | None) -> None:
    _exit_now()


def _exit_now() -> None:
    # os._exit skips every exit handler: the worker's engine servers are
    # stopped (their directories removed) first, or only `clean` would find them.
    stop_all(wait=False)
    # os._exit, not sys.exit: the main thread may be deep in a simulation, and
    # nothing of a run in progress is worth keeping (the driver records runs).
    os._exit(CUT_EXIT_CODE)
