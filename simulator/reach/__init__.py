"""Reach: which lines of the store under test a run executed.

A verdict covers only the code its runs reached. A run asked for its reach
(``run --coverage``; every hunt and campaign) records the lines of the store
kind's Lua scripts (``lua_lines``, through a replay of what the server ran:
``replay``) and of its own Python classes (``python_lines``) that ran, and
reports them against the lines that can run (``lines``).
"""
