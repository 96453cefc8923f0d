"""The service node and its backends: what makes a transactional service a
server on the lab's network (``simulator.net.service``,
``simulator.backends.service_backend``)."""

from __future__ import annotations

import asyncio

import pytest

from simulator.backends import BackendSpec
from simulator.backends.service_backend import LoopThread, ServiceRunner, step_to_end
from simulator.engine.kernel import Kernel
from simulator.engine.trace import Trace
from simulator.net.server import Command
from simulator.net.service import ServiceNode


class Counter:
    """A service of one integer: ``add`` commits, ``refuse`` answers a refusal."""

    def __init__(self) -> None:
        self.value = 0
        self.calls: list[tuple[str, int]] = []

    async def transact(self, verb: str, args: tuple, now_ms: int):
        self.calls.append((verb, now_ms))
        if verb == "refuse":
            return ValueError("refused")
        self.value += args[0]
        return self.value

    async def close(self) -> None:
        self.value = -1


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        self.seen.append((observed, now_us, tag))


def node(service=None, loop=None) -> tuple[Kernel, ServiceNode, Recorder]:
    kernel = Kernel(1)
    observer = Recorder()
    return kernel, ServiceNode(kernel, ServiceRunner(service or Counter(), loop), Trace(),
                               observer), observer


def test_a_transaction_runs_at_the_nodes_clock_and_its_observer_hears_it():
    kernel, server, observer = node()
    def arrive() -> None:
        server.execute(Command("add", (), (5,), "add"), tag=7)

    kernel.at(2_500, arrive)
    kernel.run(10_000)
    service = server.backend.service
    assert service.value == 5 and server.transactions == 1
    (verb, now_ms), = service.calls
    assert verb == "add" and now_ms % 1000 == 2  # epoch ms plus 2 ms of virtual time
    assert observer.seen == [(("add", (5,), 5), 2_500, 7)]


def test_a_refusal_is_the_replys_value_not_an_error():
    _, server, _ = node()
    outcome = server.execute(Command("refuse", (), (), "refuse"))
    assert outcome.error is None and isinstance(outcome.value, ValueError)


def test_a_restart_keeps_every_commit():
    _, server, _ = node()
    server.execute(Command("add", (), (3,), "add"))
    server.restart(keep_until_us=None, how="none")  # Redis terms: would lose everything
    assert server.backend.service.value == 3
    assert list(server.trace.columns["outcome"]) == ["durable"]


def test_an_in_process_service_that_awaits_mid_transaction_stops_the_run():
    async def awaits():
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="awaited in the middle of a transaction"):
        step_to_end(awaits())


def test_a_service_on_its_own_loop_runs_even_where_a_loop_already_runs():
    async def inside_a_running_loop() -> int:
        loop = LoopThread()
        try:
            _, server, _ = node(loop=loop)
            return server.execute(Command("add", (), (4,), "add")).value
        finally:
            loop.close()

    assert asyncio.run(inside_a_running_loop()) == 4


def test_closing_the_backend_closes_the_service():
    _, server, _ = node()
    server.backend.close()
    assert server.backend.service.value == -1


@pytest.mark.parametrize("text", ["postgresql://lab@127.0.0.1:5432/postgres",
                                  "postgres://127.0.0.1/db"])
def test_a_postgresql_url_is_a_backend_of_its_own(text):
    spec = BackendSpec.parse(text)
    assert (spec.kind, spec.family, str(spec)) == ("postgresql", "postgresql", text)
    assert BackendSpec.parse("postgresql") == BackendSpec("postgresql")  # a throwaway server
    assert BackendSpec.parse("fakeredis").family == "redis"
    assert BackendSpec.parse("memory").family == "memory"
