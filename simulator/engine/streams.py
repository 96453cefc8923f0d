"""Seeded random streams, one per purpose, all derived from the run seed.

A stream is named by a path such as ``("replica", 17, "workload")``; its seed
is a hash of the run seed and that path. Adding a replica therefore adds
streams without reshuffling any other replica's, link's or fault source's
randomness, and a run is reproducible from its seed alone.
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(run_seed: int, *path: object) -> int:
    """A 64-bit seed for the stream at ``path`` under ``run_seed``."""
    text = "/".join([str(run_seed), *map(str, path)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class Streams:
    """The run's random streams, created on first use and cached."""

    def __init__(self, run_seed: int) -> None:
        self.run_seed = run_seed
        self._streams: dict[tuple[object, ...], random.Random] = {}

    def get(self, *path: object) -> random.Random:
        stream = self._streams.get(path)
        if stream is None:
            stream = self._streams[path] = random.Random(derive_seed(self.run_seed, *path))
        return stream
