"""The shim and the store bodies as one Redis Functions library, loaded once per run.

A script sent by EVALSHA is one self-contained chunk: on every call the server
runs the whole wrapped script, so the virtual-expiry shim rebuilds its tables
and closures each time (23-31 µs of server time against ~7 µs for the bare
body). A Functions library's code runs once, at ``FUNCTION LOAD``; each
function then runs only its body and the shim's per-call work. On fakeredis
the same holds, and more: ``FCALL`` neither compiles the script nor runs a
full Lua garbage collection nor checks the Lua globals around every
``redis.call``, as its EVAL does.

The library belongs to one run: its name is the run's own token
(``lab_<hex>``), its functions' names start with it (function names are
global on a server), and it is deleted when the backend closes, as the run's
keys are. Bodies arrive as the stores first use them; each new one reloads
the library (``FUNCTION LOAD REPLACE``) with every body so far, so a function
already in use is never missing, even to a call still in flight on another
connection. A store registers a handful of bodies per run, so a reload is
rare and small.

A server that refuses (Redis before 7, FUNCTION or FCALL denied by an ACL,
any error loading the library) is not offered one: the backend keeps to
EVALSHA with the same results. A reload refused mid-run leaves the bodies
already loaded where they are; the new body goes by EVALSHA.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError

from simulator.backends.virtual_expiry import GENERIC_COMMAND, as_function, shim_expression

PROBE_REPLY = "PONG"


class FunctionsLibrary:
    """One run's library on one server: the bodies loaded so far, by function name."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name
        self._functions: dict[str, str] = {}  # body -> its function's name
        self._loaded = False
        self.refused = False  # a reload failed: new bodies go by EVALSHA
        self.loads = 0  # FUNCTION LOADs sent (the first and each reload)

    @classmethod
    def offered(cls, client: Any, name: str) -> FunctionsLibrary | None:
        """The library, loaded with the plain-command body and proven callable
        by one ``FCALL``; None if the server refuses either (nothing is left
        behind then)."""
        library = cls(client, name)
        function = library.function_for(GENERIC_COMMAND)
        if function is None:
            return None
        try:
            reply = client.execute_command("FCALL", function, 0, "PING", "", "0")
            if reply[-1] != PROBE_REPLY:
                raise ResponseError(f"unexpected probe reply {reply!r}")
        except ResponseError:
            library.delete()
            return None
        return library

    def function_for(self, body: str) -> str | None:
        """The name of the function that runs ``body`` in the shim, loading it
        if it is new; None once the server refused a load."""
        function = self._functions.get(body)
        if function is not None or self.refused:
            return function
        function = f"{self.name}_{len(self._functions)}"
        bodies = {**self._functions, body: function}
        try:
            if self._loaded:
                self.client.execute_command("FUNCTION", "LOAD", "REPLACE", self.source(bodies))
            else:
                self.client.execute_command("FUNCTION", "LOAD", self.source(bodies))
        except ResponseError:
            self.refused = True
            return None
        finally:
            self.loads += 1
        self._loaded = True
        self._functions = bodies
        return function

    def source(self, bodies: dict[str, str]) -> str:
        """The library's code: the shim compiled once, then each body as a
        function of its own, registered under its name."""
        parts = [f"#!lua name={self.name}\nlocal lab_shim = {shim_expression()}\n"]
        for body, function in bodies.items():
            # Each body is compiled here, once; a call only runs it.
            parts.append(f"do\nlocal lab_body = {as_function(body)}\n"
                         f"redis.register_function('{function}', function(keys, args)\n"
                         "return lab_shim(lab_body, keys, args)\nend)\nend\n")
        return "".join(parts)

    def plain(self, message: str) -> str:
        """An error message without the run's random token (an uncaught error
        names the function it came from), so a run's results stay its seed's."""
        return message.replace(self.name, "lab")

    def delete(self) -> None:
        """Remove the library from the server, if it was ever loaded."""
        if self._loaded:
            try:
                self.client.execute_command("FUNCTION", "DELETE", self.name)
            except ResponseError:
                pass  # already gone (FUNCTION FLUSH): nothing of the run is left
            self._loaded = False
