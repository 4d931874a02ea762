"""Default callbacks that connect `compact_conversation` to rehydration and the facts ledger.

Used by the CLI and the session for recorded or live transcripts: the working state is
rebuilt from the entries, and files are re-read only inside the session's working folders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# Importing rehydrate registers the renderers of the attachment types it creates.
from unbounded.compaction.facts import facts_ledger_for
from unbounded.compaction.rehydrate import make_rehydrator, working_state_from_entries
from unbounded.model.entries import Entry

Rehydrator = Callable[[list[Entry]], tuple[list[dict[str, Any]], list[str]]]


def session_roots(entries: Sequence[Entry]) -> list[str]:
    """The working folders a recorded session ran in (its records' `cwd`), oldest first."""
    roots: list[str] = []
    for entry in entries:
        cwd = entry.data.get("cwd")
        if isinstance(cwd, str) and cwd and cwd not in roots:
            roots.append(cwd)
    return roots


def rehydrator_for(
    entries: Sequence[Entry], allowed_roots: Sequence[str] | None = None
) -> Rehydrator:
    """A rehydrator over the working state recorded in `entries`, reading only inside roots."""
    roots = list(allowed_roots) if allowed_roots is not None else session_roots(entries)
    cwd = roots[-1] if roots else None
    return make_rehydrator(working_state_from_entries(entries), allowed_roots=roots, cwd=cwd)


def default_facts_ledger(entries: list[Entry]) -> str:
    """The facts ledger of the summarized entries."""
    return facts_ledger_for(entries)
