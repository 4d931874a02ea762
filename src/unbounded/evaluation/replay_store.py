"""The store of a replayed session: it keeps what the session reads back, never the entries.

A replay appends every recorded entry to its `Session`, whose transcript already holds them;
a `MemoryStore` would keep a second list of them all. A replay never reopens its session, so
its store only counts the entries it was given and keeps the state documents, notes and tool
outputs the session reads back while it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from unbounded.errors import ConfigError
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.storage import MemoryStore


class ReplayStore(MemoryStore):
    """A `MemoryStore` that counts the entries appended instead of keeping them."""

    def __init__(self) -> None:
        super().__init__()
        self.appended = 0
        """Entries appended so far (none of them kept)."""

    def load(self) -> Transcript:
        """An empty transcript until the first entry; after that a replay store cannot be
        reopened (it kept none of them)."""
        if self.appended:
            raise ConfigError(
                f"a replay store kept none of its {self.appended:,} entries: it cannot be "
                "reopened; use a MemoryStore for a session that is read back"
            )
        return super().load()

    def append(self, entries: Sequence[Entry]) -> None:
        """Count the entries; keep none."""
        self.appended += len(entries)
