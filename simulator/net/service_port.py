"""The data port a service kind's client gets inside the simulation
(``stores.ports.ServicePort``): every call is one message over the replica's
simulated link, executed as one transaction on the service node
(``simulator.net.service``)."""

from __future__ import annotations

from typing import Any

from simulator.engine.traps import Send
from simulator.net.server import Command


class SimServicePort:
    """``ServicePort`` over a simulated link; the verb labels the call in the
    trace and in fault schedules (``call = "consolidate"``)."""

    def __init__(self, link: Any) -> None:
        self.link = link

    async def call(self, verb: str, *args: Any) -> Any:
        return await Send(self.link, Command(verb, (), args, verb))
