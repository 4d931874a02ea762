"""Default callbacks that connect `compact_conversation` to rehydration and the facts ledger.

Used by the CLI and the session for recorded or live transcripts: the working state is
rebuilt from the entries, and files are re-read only inside the session's working folders, or
restored from the transcript's own record of them where there is no such disk (a worker on a
shared store, a replay of a session recorded elsewhere).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Literal

# Importing rehydrate registers the renderers of the attachment types it creates.
from unbounded.compaction.facts import RunningFacts, facts_ledger_for
from unbounded.compaction.recorded_files import AppendedSince, RecordedFile, RecordedFilesReader
from unbounded.compaction.rehydrate import WorkingStateReader, make_rehydrator
from unbounded.compaction.view_folds import ViewFolds
from unbounded.model.entries import Entry
from unbounded.policy import Policy

RehydrateSource = Literal["disk", "transcript"]
"""Where restored files come from: the local disk, or the transcript's own record of them."""
Rehydrator = Callable[[list[Entry]], tuple[list[dict[str, Any]], list[str]]]


def session_roots(entries: Sequence[Entry]) -> list[str]:
    """The working folders a recorded session ran in (its records' `cwd`), oldest first."""
    roots: list[str] = []
    for entry in entries:
        cwd = entry.data.get("cwd")
        if isinstance(cwd, str) and cwd and cwd not in roots:
            roots.append(cwd)
    return roots


TURN_READ_LIMIT = 256
"""Entries a session's turn reads at most for its compactions (`RecordedState.advance`)."""


class RecordedState:
    """What `rehydrator_for` reads from a transcript that only grows (its working state, the
    files as it last showed them, its working folders), and the folds a summary reads of its
    view, each entry read once: a session that compacts again and again does not read its
    whole transcript at every compaction. A session advances them on every turn
    (`advance`), so that the turn that compacts reads only its own entries."""

    def __init__(self) -> None:
        self.working = WorkingStateReader()
        self.files = RecordedFilesReader()
        self._roots = RootsReader()
        self.view = ViewFolds()
        """Folds over the view a compaction reads (`compaction.view_folds`)."""
        self._in_step = True
        """The turns read all that the previous one added (the files and roots readers,
        which read to the end, are then read on every turn too)."""
        self._read_to: dict[str, tuple[Sequence[Entry], int]] = {}
        """Reader ("roots", "files") -> the list it last read to its end and its length then."""

    def roots(self, entries: Sequence[Entry]) -> list[str]:
        """`session_roots` of these entries."""
        roots = self._roots.read(entries)
        self._read_to["roots"] = (entries, len(entries))
        return roots

    def recorded_files(self, entries: Sequence[Entry]) -> dict[str, RecordedFile]:
        """The files as these entries last showed them (`RecordedFilesReader.read`)."""
        files = self.files.read(entries)
        self._read_to["files"] = (entries, len(entries))
        return files

    def _near(self, reader: str, entries: Sequence[Entry]) -> bool:
        """Whether `reader` last read `entries` to within `TURN_READ_LIMIT` of its end."""
        seen, length = self._read_to.get(reader, (None, 0))
        return seen is entries and 0 <= len(entries) - length <= TURN_READ_LIMIT

    def advance(
        self, entries: Sequence[Entry], view: Sequence[Entry], source: RehydrateSource | None
    ) -> None:
        """Read what `entries` and `view` added since the last call, `TURN_READ_LIMIT` entries
        of each at most: the view's folds, and what `rehydrator_for` reads for `source`
        (None: nothing is re-injected, nothing read). A session resumed with a long history
        catches up over a few turns; a compaction reads whatever is left."""
        self.view.advance(view, TURN_READ_LIMIT)
        if source is None:
            return
        caught_up = self.working.advance(entries, TURN_READ_LIMIT)
        if not caught_up:
            # The files and roots readers read to the end: until they are near it again,
            # the compaction feeds them.
            self._in_step = False
            return
        if not self._in_step:
            # Back in step once a compaction read them to (near) the end: this turn reads
            # what is left, `TURN_READ_LIMIT` entries of each at most.
            if not (
                self._near("roots", entries)
                and (source != "transcript" or self._near("files", entries))
            ):
                return
            self._in_step = True
        self.roots(entries)  # the roots on disk too, where the session names none
        if source == "transcript":
            self.recorded_files(entries)


class RootsReader:
    """`session_roots` over a transcript that only grows (the entries added since the last
    call; a list that is not the last one grown is read from the start)."""

    def __init__(self) -> None:
        self._roots: list[str] = []
        self._since = AppendedSince()

    def read(self, entries: Sequence[Entry]) -> list[str]:
        """The working folders of these entries, oldest first."""
        count = self._since.start(entries)
        if count is None:
            self._roots, count = [], 0
        for entry in entries[count:]:
            cwd = entry.data.get("cwd")
            if isinstance(cwd, str) and cwd and cwd not in self._roots:
                self._roots.append(cwd)
        return list(self._roots)


def rehydrator_for(
    entries: Sequence[Entry],
    allowed_roots: Sequence[str] | None = None,
    *,
    source: RehydrateSource = "disk",
    policy: Policy | None = None,
    recorded: RecordedState | None = None,
) -> Rehydrator:
    """A rehydrator over the working state recorded in `entries`: files re-read from the disk
    inside the roots, or (`source="transcript"`) restored as the transcript last showed them.
    `recorded`: what earlier calls on this growing transcript already read."""
    known = recorded or RecordedState()
    state = known.working.read(entries)
    if source == "transcript":
        cwd = (known.roots(entries) or [os.sep])[-1]
        shown = {
            os.path.join(cwd, path): file for path, file in known.recorded_files(entries).items()
        }

        def read_shown(path: str) -> str:
            text = shown[path].text
            if text is None:
                raise OSError("changed in a way the transcript does not show")
            return text

        return make_rehydrator(
            state,
            allowed_roots=None,
            read_file=read_shown,
            file_size=lambda path: 0 if path in shown else None,
            resolve_path=lambda path: path,
            cwd=cwd,
            policy=policy,
        )
    roots = list(allowed_roots) if allowed_roots is not None else known.roots(entries)
    return make_rehydrator(
        state, allowed_roots=roots, cwd=roots[-1] if roots else None, policy=policy
    )


def default_facts_ledger(entries: list[Entry]) -> str:
    """The facts ledger of the summarized entries."""
    return facts_ledger_for(entries)


def running_facts_ledger(
    running: RunningFacts, view: Callable[[], Sequence[Entry]]
) -> Callable[[list[Entry]], str]:
    """`default_facts_ledger` for a session whose view (`view()`: the current one) `running`
    folds call by call: the summarized entries that are that view are not read again."""

    def ledger(entries: list[Entry]) -> str:
        return running.ledger(view(), entries)

    return ledger
