"""Script sets: the Lua a store kind runs, by script name.

A family ships its Lua files beside its store (``settle_v1.lua``,
``live_holds.lua``...). A ``ScriptSet`` maps each script name (the file name
without ``.lua``) to its text: the family's files, with whatever a kind
replaces. Stores load their scripts through the set they were given
(``ScriptSet.source``), never straight from their package, so a kind that
replaces ``settle_v1`` runs its own text; and the lab names every call by the
set's names (``ScriptSet.labels``), so traces, fault schedules and race
reports call that replacement ``settle_v1`` too, never a hash.

Composition: a script whose first line is ``-- lab:include FRAGMENT.lua`` runs
with the set's ``FRAGMENT`` prepended, so the reserve scripts of two layouts
share one ``live_holds`` and a kind replaces that fragment alone.

Seams: a kind that changes a few lines of a shipped script states only those
lines, as patches (``Patch``, applied by ``ScriptSet.patching``), never as a
whole copy of the script: the rest stays the shipped text, and a patch whose
lines the shipped script no longer has fails when the set is built. A patched
script follows every other edit of the shipped one, comments included, and a
trace records the SHA each ``SCRIPT LOAD`` answers: such an edit changes the
trace fingerprint of a patched kind's race reports, as it does the fixed
store's (``replay --record`` records them again).

Nothing here imports the simulator: stores and the lab both read sets.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

INCLUDE = "-- lab:include "
"""The first line of a script that has a fragment prepended when it runs."""

SUFFIX = ".lua"


@dataclass(frozen=True)
class Patch:
    """One seam of a script: the text ``old``, which must occur exactly once
    in the script patched, becomes ``new``."""

    old: str
    new: str

    def __post_init__(self) -> None:
        if not self.old:
            raise ValueError("a patch needs the text it replaces; old is empty")
        if self.old == self.new:
            raise ValueError(f"a patch that changes nothing: old and new are both {self.old!r}")

    def apply(self, name: str, text: str) -> str:
        """``text`` (script ``name``'s) with ``old`` replaced by ``new``; a
        ``ValueError`` naming the script and ``old`` unless ``old`` occurs in
        ``text`` exactly once."""
        # Exactly once, or refused: a fragment the script no longer has would
        # leave the variant running the fixed text, and one it has twice would
        # leave unsaid which place the seam is.
        count = text.count(self.old)
        if count != 1:
            where = "is not in it" if count == 0 else f"occurs {count} times in it, not once"
            raise ValueError(f"cannot patch script {name!r}: the text to replace {where}: "
                             f"{self.old!r}")
        return text.replace(self.old, self.new)


class ScriptSet(Mapping[str, str]):
    """Script name -> Lua text; immutable and hashable, so a frozen
    ``StoreKind`` can carry one."""

    __slots__ = ("_texts",)

    def __init__(self, texts: Mapping[str, str] | None = None) -> None:
        self._texts = dict(texts or {})

    @classmethod
    def shipped(cls, package: str) -> ScriptSet:
        """Every ``.lua`` file shipped in ``package``, by script name."""
        return _shipped(package)

    def __getitem__(self, name: str) -> str:
        return self._texts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def __hash__(self) -> int:
        return hash(frozenset(self._texts.items()))

    def __repr__(self) -> str:
        return f"ScriptSet({', '.join(sorted(self._texts))})"

    def replacing(self, **replacements: str | Path) -> ScriptSet:
        """This set with some scripts replaced, by name: a ``Path`` is a file
        read now, a string is the Lua text itself. Only names the set has can
        be replaced, so a typo cannot leave the shipped script running."""
        self._refuse_unknown(replacements, "replace")
        texts = dict(self._texts)
        for name, replacement in replacements.items():
            texts[name] = (replacement.read_text(encoding="utf-8")
                           if isinstance(replacement, Path) else replacement)
        return ScriptSet(texts)

    def patching(self, **patches: Patch | Sequence[Patch]) -> ScriptSet:
        """This set with some scripts patched, by name: each script's text
        with its ``Patch`` (or each of its patches, in order) applied. A name
        the set does not have, or a patch whose text to replace is not in the
        script exactly once, is a ``ValueError`` here, when the set is built."""
        self._refuse_unknown(patches, "patch")
        texts = dict(self._texts)
        for name, script_patches in patches.items():
            for patch in (script_patches,) if isinstance(script_patches, Patch) else script_patches:
                texts[name] = patch.apply(name, texts[name])
        return ScriptSet(texts)

    def _refuse_unknown(self, names: Iterable[str], verb: str) -> None:
        """Only names the set has can be changed: a typo must not leave the
        shipped script running."""
        unknown = sorted(set(names) - set(self._texts))
        if unknown:
            raise ValueError(f"no script named {', '.join(map(repr, unknown))} to {verb}; "
                             f"the scripts are: {', '.join(sorted(self._texts))}")

    def source(self, name: str) -> str:
        """The text script ``name`` runs as: its own, after the fragment its
        first line includes, if any."""
        text = self._text(name)
        first_line = text.partition("\n")[0]
        if not first_line.startswith(INCLUDE):
            return text
        fragment = self._text(first_line.removeprefix(INCLUDE).strip().removesuffix(SUFFIX))
        if not fragment.endswith("\n"):
            fragment += "\n"
        return fragment + text

    def _text(self, name: str) -> str:
        try:
            return self._texts[name]
        except KeyError:
            raise KeyError(f"no script named {name!r}; the scripts are: "
                           f"{', '.join(sorted(self._texts))}") from None

    def labels(self) -> dict[str, str]:
        """Each script's name by the SHA1 of the text it runs as: how the lab
        names a call it sees only as ``EVALSHA <sha>``."""
        return {sha1(self.source(name)): name for name in self._texts}


@functools.cache
def _shipped(package: str) -> ScriptSet:
    # Read once per package: a fleet boots thousands of stores.
    return ScriptSet({entry.name.removesuffix(SUFFIX): entry.read_text(encoding="utf-8")
                      for entry in sorted(resources.files(package).iterdir(),
                                          key=lambda entry: entry.name)
                      if entry.name.endswith(SUFFIX)})


def sha1(source: str) -> str:
    """The SHA1 Redis names a script by."""
    return hashlib.sha1(source.encode()).hexdigest()
