"""A session's transcript in memory: the append-only entries and the view derived from them.

    entries     the main thread, as the store holds it (only ever appended to, except a
                discarded last reply)
    view        the entries after the last compaction boundary
    normalizer  the view as API messages, built one entry at a time
    counter     the view's token count, anchored on the last reported usage

The view, its messages and its count are derived: appending an entry advances all three, a
compaction boundary (or a discarded reply) derives them again from the entries.

A caller that scores compactions (the replay) turns on `keep_stretches`: each boundary is then
kept with the view it closed, so the caller reads that stretch instead of slicing and
re-deriving the whole history at every compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import orjson

from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.text import repair_value
from unbounded.storage import SessionStore
from unbounded.tokens.estimate import ContextCounter


class SessionTranscript:
    """The entries of one session, written through to its store, and their view."""

    def __init__(self, store: SessionStore, entries: list[Entry], warnings: list[str]) -> None:
        self.store = store
        self.entries = entries
        self.warnings = warnings
        """What reading the transcript found amiss, and repairs made since."""
        self.compacted_before = any(e.is_compact_boundary for e in entries)
        """The history holds a compaction (recall has something to bring back)."""
        self.view: list[Entry] = []
        self._stretches: list[tuple[Entry, list[Entry]]] | None = None
        self.normalizer = MessageNormalizer([])
        self.counter = ContextCounter([])
        self.rebuild_view()

    @classmethod
    def load(cls, store: SessionStore) -> SessionTranscript:
        """The transcript the store holds (its main thread), with what reading it found."""
        transcript = store.load()
        warnings = list(transcript.warnings) + transcript.thread_report().warnings()
        return cls(store, transcript.main_thread(), warnings)

    def rebuild_view(self) -> None:
        """Derive the view, its messages and its count from the entries again."""
        self.view = messages_after_compact_boundary(self.entries)
        self.normalizer = MessageNormalizer(self.view)
        self.counter = ContextCounter(self.view)

    @property
    def messages(self) -> list[MessageParam]:
        """The API messages of the view."""
        return self.normalizer.messages

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries to the store, the transcript and the view (parentUuid chained)."""
        if not entries:
            return
        for entry in entries:
            self._repair_text(entry)
        previous = self.entries[-1].uuid if self.entries else None
        for entry in entries:
            if entry.data.get("parentUuid") is None and not entry.is_compact_boundary:
                entry.data["parentUuid"] = previous
            previous = entry.uuid or previous
        self.store.append(entries)
        self.entries.extend(entries)
        if any(e.is_compact_boundary for e in entries):
            if self._stretches is not None:
                self._stretches += self._stretches_of(entries)
            self.compacted_before = True
            self.rebuild_view()
            return
        for entry in entries:
            self.view.append(entry)
            self.normalizer.append(entry)
            self.counter.append(entry)

    def keep_stretches(self) -> None:
        """From now on keep each compact boundary appended with the view it closed, until
        `take_stretches` (a live session never turns this on: nothing would take them)."""
        if self._stretches is None:
            self._stretches = []

    def take_stretches(self) -> list[tuple[Entry, list[Entry]]]:
        """(boundary, the view just before it) of each compact boundary appended since the
        last take, in order: the entries `messages_after_compact_boundary` gives of the
        history up to the boundary, read from the view instead of the whole history."""
        taken = self._stretches or []
        if self._stretches is not None:
            self._stretches = []
        return taken

    def _stretches_of(self, entries: Sequence[Entry]) -> list[tuple[Entry, list[Entry]]]:
        """(boundary, the view before it) of each boundary of `entries`, about to be added."""
        stretches: list[tuple[Entry, list[Entry]]] = []
        # The view is already in its derived form (a partial compaction's kept messages
        # spliced in): deriving it again with the batch's entries before each boundary gives
        # what deriving the whole history up to the boundary gives.
        pending: list[Entry] = list(self.view)
        for entry in entries:
            if entry.is_compact_boundary:
                stretch = messages_after_compact_boundary(pending)
                stretches.append((entry, stretch))
                pending = messages_after_compact_boundary([*pending, entry])
                continue
            pending.append(entry)
        return stretches

    def _repair_text(self, entry: Entry) -> None:
        """Replace lone surrogates (which neither the transcript nor the API can encode) with
        U+FFFD, in place, and say so in the warnings."""
        try:
            orjson.dumps(entry.data)
        except TypeError:
            repaired, changed = repair_value(entry.data)
            if not changed:
                raise
            entry.data.clear()
            entry.data.update(repaired)
            self.warnings.append(
                f"lone surrogates in {changed} string(s) of a {entry.type} message were "
                "replaced by U+FFFD (text that UTF-8 cannot encode)"
            )

    def discard_last_reply(self) -> list[Entry]:
        """Take the last reply (one response: its lines share a message id) out of the
        entries and the view; returns what was taken out."""
        end = len(self.entries)
        start = end
        reply_id: str | None = None
        while start > 0:
            entry = self.entries[start - 1]
            if entry.type != "assistant" or entry.is_sidechain:
                break
            if start < end and entry.message_id != reply_id:
                break  # one response only (its lines share a message id)
            reply_id = entry.message_id
            start -= 1
        removed = self.entries[start:]
        if removed:
            del self.entries[start:]
            self.rebuild_view()
        return removed

    def pending_tool_use_ids(self) -> list[str]:
        """Tool calls of the last response that have no result yet."""
        last = self.normalizer.last()
        if last is None or last["role"] != "assistant":
            return []
        content = last["content"]
        if not isinstance(content, list):
            return []
        return [str(b.get("id")) for b in content if b.get("type") == "tool_use"]

    def last_reply_time(self) -> datetime | None:
        """When the last real reply of the view was recorded (synthetic errors passed over)."""
        for entry in reversed(self.view):
            if entry.type == "assistant" and not entry.is_synthetic_api_error:
                return entry.time
        return None


__all__ = ["SessionTranscript"]
