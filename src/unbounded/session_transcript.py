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

A caller that runs for thousands of calls (the replay) turns on `spill_history`: from then on
the entries before the last compaction boundary live in a temporary file
(`unbounded.model.spilled_entries`) and are read back when asked for, so memory follows the
live context rather than the length of the session; the view is then derived across each
boundary from the view it closed, never from the whole history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson

from unbounded.catalog import ModelTable
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.record_checks import RECEIPT_KEY
from unbounded.model.spilled_entries import SpilledEntries
from unbounded.model.text import repair_value
from unbounded.storage import SessionStore
from unbounded.tokens.estimate import ContextCounter


class SessionTranscript:
    """The entries of one session, written through to its store, and their view."""

    def __init__(
        self,
        store: SessionStore,
        entries: list[Entry],
        warnings: list[str],
        *,
        models: ModelTable | None = None,
    ) -> None:
        self.store = store
        self.models = models
        """The table the count looks models up in (None: the packaged one and the variable's)."""
        self._entries: list[Entry] | SpilledEntries = entries
        self.warnings = warnings
        """What reading the transcript found amiss, and repairs made since."""
        self.compacted_before = any(e.is_compact_boundary for e in entries)
        """The history holds a compaction (recall has something to bring back)."""
        self._uuids: set[str] | None = set()
        """Every entry's uuid while no two entries share one (None from the first repeat or
        uuid that is not a string on, and once spilled): the view is then derived across a
        boundary from the boundary backwards (about 50 bytes an entry)."""
        self._count_uuids()
        self.view: list[Entry] = []
        self._awaited_anchor: str | None = None
        """The uuid a partial compaction's kept messages follow, while it is not in the view."""
        self._stretches: list[tuple[Entry, list[Entry]]] | None = None
        self.normalizer = MessageNormalizer([])
        self.counter = ContextCounter([], models=models)
        self.rebuild_view()

    @classmethod
    def load(cls, store: SessionStore, *, models: ModelTable | None = None) -> SessionTranscript:
        """The transcript the store holds (its main thread), with what reading it found
        (`models`: the session's model table, which the count reads)."""
        transcript = store.load()
        warnings = list(transcript.warnings) + transcript.thread_report().warnings()
        return cls(store, transcript.main_thread(), warnings, models=models)

    @property
    def entries(self) -> Sequence[Entry]:
        """The main thread, oldest first (read back from disk where spilled)."""
        return self._entries

    def rebuild_view(self) -> None:
        """Derive the view, its messages and its count from the entries again."""
        unique = self._uuids is not None and not isinstance(self._entries, SpilledEntries)
        self._set_view(messages_after_compact_boundary(self._entries, unique_uuids=unique))

    def _count_uuids(self, entries: Iterable[Entry] | None = None) -> None:
        """Add the uuids of `entries` (None: count all the entries again)."""
        if entries is None:
            self._uuids = set()
            entries = self._entries
        seen = self._uuids
        if seen is None:
            return
        for entry in entries:
            uuid = entry.data.get("uuid")
            if uuid is None:
                continue
            if not isinstance(uuid, str) or uuid in seen:
                self._uuids = None
                return
            seen.add(uuid)

    def _set_view(self, view: list[Entry]) -> None:
        self.view = view
        self._awaited_anchor = _unspliced_anchor(view)
        self.normalizer = MessageNormalizer(view)
        self.counter = ContextCounter(view, models=self.models)

    def spill_history(self) -> None:
        """From now on keep the entries before the last compaction boundary on disk, read back
        on demand (a live session never turns this on: its history stays in memory)."""
        if isinstance(self._entries, SpilledEntries):
            return
        self._entries = SpilledEntries(self._entries)
        self._uuids = None  # the spilled view is derived from the view it closes instead
        self._spill_to_last_boundary(self._entries)

    def close(self) -> None:
        """Delete the spill file, if any (spilled entries cannot be read after this)."""
        if isinstance(self._entries, SpilledEntries):
            self._entries.close()

    @staticmethod
    def _spill_to_last_boundary(entries: SpilledEntries) -> None:
        live = entries.live
        for offset in range(len(live) - 1, -1, -1):
            if live[offset].is_compact_boundary:
                entries.spill_before(entries.spilled + offset)
                return

    @property
    def messages(self) -> list[MessageParam]:
        """The API messages of the view."""
        return self.normalizer.messages

    def append(
        self, entries: Sequence[Entry], *, checked: list[dict[str, Any]] | None = None
    ) -> None:
        """Append entries to the store, the transcript and the view (parentUuid chained).
        `checked`: a compaction receipt's items known to encode as JSON (each checked as it
        was built, `RunningReceipt.checked`), not checked again in its boundary."""
        if not entries:
            return
        for entry in entries:
            self._repair_text(entry, checked)
        previous = self._entries[-1].uuid if self._entries else None
        for entry in entries:
            if entry.data.get("parentUuid") is None and not entry.is_compact_boundary:
                entry.data["parentUuid"] = previous
            previous = entry.uuid or previous
        closed = self.view
        self.store.append(entries)
        self._entries.extend(entries)
        self._count_uuids(entries)
        if any(e.is_compact_boundary for e in entries):
            self.compacted_before = True
            spilled = self._entries if isinstance(self._entries, SpilledEntries) else None
            if self._stretches is None and spilled is None:
                self.rebuild_view()
                return
            stretches, view = self._across_boundaries(entries)
            if self._stretches is not None:
                self._stretches += stretches
            if spilled is not None and self._derives_alike(closed, entries, spilled.live):
                self._set_view(view)
            else:
                self.rebuild_view()  # spilled: read back (a segment not kept in one run)
            if spilled is not None:
                self._spill_to_last_boundary(spilled)
            return
        awaited = self._awaited_anchor
        if awaited is not None and any(entry.uuid == awaited for entry in entries):
            # A partial compaction's boundary came before the record its kept messages follow
            # (a transcript mirrored record by record): now that it is here, the view is what
            # deriving the history gives, as it would be read back from disk.
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

    @staticmethod
    def _derives_alike(closed: list[Entry], batch: Sequence[Entry], live: list[Entry]) -> bool:
        """Whether deriving the view from `closed` (the view before `batch`) and the batch
        gives what deriving the whole history gives: one boundary in the batch, whose kept
        messages (if any) are one run of `live` (the entries since the last spill), in file
        order, as every compaction of a session writes them."""
        boundaries = [entry for entry in batch if entry.is_compact_boundary]
        if len(boundaries) != 1:
            return False
        boundary = boundaries[0]
        segment = boundary.compact_metadata.get("preservedSegment")
        if not isinstance(segment, dict):
            return True
        batch_before = list(batch[: list(batch).index(boundary)])
        uuids = [entry.uuid for entry in (*closed, *batch_before)]
        head, tail = segment.get("headUuid"), segment.get("tailUuid")
        if head not in uuids or tail not in uuids:
            return False
        start, end = uuids.index(head), uuids.index(tail)
        if end < start:
            return False
        run = [*closed, *batch_before][start : end + 1]
        first = next((i for i, entry in enumerate(live) if entry is run[0]), len(live))
        found = live[first : first + len(run)]
        return len(found) == len(run) and all(a is b for a, b in zip(found, run, strict=True))

    def _across_boundaries(
        self, entries: Iterable[Entry]
    ) -> tuple[list[tuple[Entry, list[Entry]]], list[Entry]]:
        """(boundary, the view before it) of each boundary of `entries`, about to be added,
        and the view after them all."""
        stretches: list[tuple[Entry, list[Entry]]] = []
        # The view is already in its derived form (a partial compaction's kept messages
        # spliced in), and a boundary's kept messages are all in the view it closes: deriving
        # that view with the entries from the boundary on (where its anchor is) gives what
        # deriving the whole history gives.
        closed: list[Entry] = list(self.view)
        since: list[Entry] = []  # the entries from the batch's latest boundary on
        for entry in entries:
            if entry.is_compact_boundary:
                if since:
                    closed = messages_after_compact_boundary([*closed, *since])
                stretches.append((entry, closed))
                since = [entry]
            elif since:
                since.append(entry)
            else:
                closed.append(entry)
        return stretches, messages_after_compact_boundary([*closed, *since])

    def _repair_text(self, entry: Entry, checked: list[dict[str, Any]] | None = None) -> None:
        """Replace lone surrogates (which neither the transcript nor the API can encode) with
        U+FFFD, in place, and say so in the warnings. `checked`: see `append`."""
        try:
            orjson.dumps(_without_checked(entry, checked))
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
        end = len(self._entries)
        start = end
        reply_id: str | None = None
        while start > 0:
            entry = self._entries[start - 1]
            if entry.type != "assistant" or entry.is_sidechain:
                break
            if start < end and entry.message_id != reply_id:
                break  # one response only (its lines share a message id)
            reply_id = entry.message_id
            start -= 1
        removed = list(self._entries[start:])
        if removed:
            del self._entries[start:]
            if self._uuids is not None:  # they were each the only one
                self._uuids.difference_update(e.data.get("uuid") for e in removed)
            tail = self.view[len(self.view) - len(removed) :]
            if (
                isinstance(self._entries, SpilledEntries)
                and len(tail) == len(removed)
                and all(kept is taken for kept, taken in zip(tail, removed, strict=True))
            ):
                self._set_view(self.view[: len(self.view) - len(removed)])
            else:
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


def _without_checked(entry: Entry, checked: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The entry's data to check for text JSON cannot encode: a boundary whose receipt holds
    the `checked` items (the thousands of a long history's results, 500 KB at 10,000
    messages) without them, so they are not encoded a second time."""
    data = entry.data
    if checked is None or not entry.is_compact_boundary:
        return data
    metadata = data.get("compactMetadata")
    if not isinstance(metadata, dict):
        return data
    receipt = metadata.get(RECEIPT_KEY)
    if not isinstance(receipt, dict) or receipt.get("toolResults") is not checked:
        return data
    return {**data, "compactMetadata": {**metadata, RECEIPT_KEY: {**receipt, "toolResults": []}}}


def _unspliced_anchor(view: Sequence[Entry]) -> str | None:
    """The `anchorUuid` of the view's partial compaction when its record is not in the view
    yet (its kept messages could not be spliced in), else None."""
    if not view or not view[0].is_compact_boundary:
        return None
    segment = view[0].compact_metadata.get("preservedSegment")
    if not isinstance(segment, dict):
        return None
    anchor = segment.get("anchorUuid")
    if not isinstance(anchor, str) or any(entry.uuid == anchor for entry in view):
        return None
    return anchor


__all__ = ["SessionTranscript"]
