"""Session-memory compaction: the notes become the summary, so no summary call is made.

`try_session_memory_compaction(context, memory)` is what `SessionMemory.compact_from_memory`
runs for the session (the first tier of `Session.auto_compact`, seed 004 "Tier 3").
It reads the conversation from a `CompactionContext` (`Session.compaction_context()`), and
of the notes' keeper only the pointer, the rehydrate switch and the wait (`NotesState`):

1. Refuse (None) when session memory is off, when there are no notes, or when they are
   still the empty template. Wait for an update in flight, at most
   `Policy.session_memory_wait_seconds` (15 s); after that use the notes as they are.
2. Choose the messages to keep (`calculate_messages_to_keep_index`; the token limits are in
   real tokens, the length estimates scaled by `Session.calibration`): start at the first
   message the notes do not cover (the one after `SessionMemory.updated_through`; the first
   message after the boundary when the notes cover nothing of this view); if that keeps at
   least `session_memory_keep_max_tokens` (40,000), stop; if it keeps at least
   `session_memory_keep_min_tokens` (10,000) and `session_memory_keep_min_text_messages`
   (5) messages with text, stop; otherwise expand backwards until one of those holds, never
   past the last compact boundary.
3. Move the start back so no kept tool_result loses its tool_use and no response is split:
   lines of one API response share a message id (parallel tool calls interleaved with their
   results, thinking blocks), and all of them stay together
   (`adjust_index_to_preserve_api_invariants`).
4. Kept messages are relinked, not written again: the boundary's `preservedSegment` names the
   first and last kept entries (`headUuid`, `tailUuid`) and the summary entry as the anchor
   they follow (`up_to` semantics of `compact_conversation`). A segment is a run of the
   transcript *file*; a view that splices in a segment kept by an earlier compaction is not
   one run, so the start may move forward to where the view becomes one run again, but only
   over messages the notes already cover; otherwise the compaction is refused.
5. The summary is `summary_message_text(notes, automatic=True, transcript_path=...)` with the
   notes cut per section (`session_memory_compact_section_chars`, ~2,000 tokens) by
   `truncate_notes_for_compact`. Attachments are re-injected as after a full compaction
   (files, todos, plan, skills), unless `SessionMemory(rehydrate=False)`.
6. Refuse when the notes fail the sanity guard (`summary_guard`: too small for the messages
   they replace, or an empty Current State), so a summary call is made instead.
7. Refuse when the context after the compaction would still be at or over the auto-compact
   threshold (the next turn would compact again): counted as the next request will carry it,
   system prompt and tools included, with the length estimate calibrated on the session's
   reported usage (`Session.estimate_request_tokens`). When the kept messages alone would be
   too many, keep only those the notes do not cover before giving up.
8. PreCompact hooks run (a blocking hook refuses), SessionStart hook output is appended, and
   PostCompact hooks are told, as for a full compaction.

The result is a `CompactionResult` of the same shape as `compact_conversation`'s, with
`summarizer == "session_memory"`, no request, no usage and `attempts == 0`. Each refusal
emits a `SessionMemoryCompactionSkipped` event with its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CompactionResult, drop_attachments_to_fit
from unbounded.compaction.cut import contiguous_tail_start, discovered_tools
from unbounded.compaction.extractive import lean_summary_tokens
from unbounded.compaction.notes import (
    QUERY_SOURCE,
    first_message_index,
    notes_are_empty,
    truncate_notes_for_compact,
)
from unbounded.compaction.prompts import summary_message_text
from unbounded.compaction.server_blocks import server_compaction_record
from unbounded.compaction.summary_guard import check_summary
from unbounded.errors import ConfigError
from unbounded.events import (
    CompactionFinished,
    CompactionStarted,
    SessionMemoryCompactionSkipped,
    SessionMemoryWaitTimedOut,
    SummaryRejected,
    emit,
)
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.normalize import normalize_messages
from unbounded.policy import Policy
from unbounded.tokens.estimate import entry_tokens, estimate_messages_tokens, rough_token_count

logger = logging.getLogger(__name__)


class NotesState(Protocol):
    """What a notes compaction asks of the notes' keeper (`SessionMemory` is one)."""

    @property
    def updated_through(self) -> str | None:
        """uuid of the last message the notes cover (None: none in the current view)."""
        ...

    @property
    def rehydrate(self) -> bool:
        """Whether files, todos and plans are re-injected after the compaction."""
        ...

    async def wait_for_update(self, timeout: float) -> bool:
        """Wait for an update in flight, at most `timeout` seconds; True when none is left."""
        ...


def has_text_blocks(entry: Entry) -> bool:
    """A user or assistant message with some non-blank text."""
    if entry.type not in ("user", "assistant"):
        return False
    content = entry.content
    if isinstance(content, str):
        return bool(content.strip())
    return any(
        block.get("type") == "text" and str(block.get("text", "")).strip() for block in content
    )


def first_unsummarized_index(view: Sequence[Entry], updated_through: str | None) -> int:
    """Index of the first view entry the notes do not cover (after the boundary when the
    covered message is not in the view)."""
    floor = first_message_index(view)
    if updated_through is not None:
        for index in range(len(view) - 1, floor - 1, -1):
            if view[index].uuid == updated_through:
                return index + 1
    return floor


def calculate_messages_to_keep_index(
    view: Sequence[Entry],
    start: int,
    *,
    floor: int,
    min_tokens: int,
    min_text_messages: int,
    max_tokens: int,
) -> int:
    """Where kept messages begin: `start`, expanded backwards (not past `floor`) until the
    kept part holds `max_tokens`, or both `min_tokens` and `min_text_messages`."""
    if not 0 <= floor <= len(view):
        raise ConfigError(f"floor {floor} is outside the view (0..{len(view)})")
    index = max(floor, min(start, len(view)))
    tokens = sum(entry_tokens(entry) for entry in view[index:])
    texts = sum(1 for entry in view[index:] if has_text_blocks(entry))

    def enough() -> bool:
        return tokens >= max_tokens or (tokens >= min_tokens and texts >= min_text_messages)

    while index > floor and not enough():
        index -= 1
        tokens += entry_tokens(view[index])
        texts += has_text_blocks(view[index])
    return index


def _tool_ids(entries: Sequence[Entry], kind: str, key: str) -> set[str]:
    role = "assistant" if kind == "tool_use" else "user"
    ids: set[str] = set()
    for entry in entries:
        content = entry.content
        if entry.type != role or not isinstance(content, list):
            continue
        for block in content:
            value = block.get(key)
            if block.get("type") == kind and isinstance(value, str):
                ids.add(value)
    return ids


def adjust_index_to_preserve_api_invariants(
    view: Sequence[Entry], index: int, *, floor: int = 0
) -> int:
    """Move `index` back (not past `floor`) until every kept tool_result has its tool_use
    kept and every kept response line has all its sibling lines (same message id) kept."""
    index = max(floor, min(index, len(view)))
    while True:
        kept = view[index:]
        missing = _tool_ids(kept, "tool_result", "tool_use_id") - _tool_ids(kept, "tool_use", "id")
        message_ids = {e.message_id for e in kept if e.message_id is not None}
        new_index = index
        for position in range(index - 1, floor - 1, -1):
            entry = view[position]
            if entry.type != "assistant":
                continue
            sibling = entry.message_id is not None and entry.message_id in message_ids
            if sibling or (missing and _tool_ids([entry], "tool_use", "id") & missing):
                new_index = position
        if new_index == index:
            return index
        index = new_index


def api_invariants_hold(view: Sequence[Entry], index: int) -> bool:
    """No kept tool_result without its tool_use, no response split at `index`."""
    kept = view[index:]
    if _tool_ids(kept, "tool_result", "tool_use_id") - _tool_ids(kept, "tool_use", "id"):
        return False
    kept_ids = {e.message_id for e in kept if e.message_id is not None}
    return not any(e.message_id in kept_ids for e in view[:index] if e.message_id is not None)


def _start_after_server_compaction(
    view: Sequence[Entry], block_at: int, first_open: int
) -> int | None:
    """The first view index after the record holding the latest server compaction block, and
    not past `first_open` (the notes must cover what is dropped), where the kept part keeps
    every tool call with its result; None when there is none."""
    for index in range(block_at + 1, first_open + 1):
        if api_invariants_hold(view, index):
            return index
    return None


def plan_messages_to_keep(
    entries: Sequence[Entry], view: Sequence[Entry], updated_through: str | None, policy: Policy
) -> int | str:
    """The view index where kept messages begin, or the reason none can be chosen (pure)."""
    floor = first_message_index(view)
    first_open = first_unsummarized_index(view, updated_through)
    index = calculate_messages_to_keep_index(
        view,
        first_open,
        floor=floor,
        min_tokens=policy.session_memory_keep_min_tokens,
        min_text_messages=policy.session_memory_keep_min_text_messages,
        max_tokens=policy.session_memory_keep_max_tokens,
    )
    index = adjust_index_to_preserve_api_invariants(view, index, floor=floor)
    run_start = contiguous_tail_start(entries, view)
    if index < run_start:
        if run_start > first_open:
            return (
                "the messages the notes do not cover reach into a segment kept by an earlier "
                "compaction, which cannot be relinked as one run"
            )
        index = adjust_index_to_preserve_api_invariants(view, run_start, floor=run_start)
    block_at = server_compaction_record(view)
    if block_at is not None and index <= block_at:
        # The server drops everything before its latest compaction block, our notes summary
        # included: keep only records after the block (server_blocks.py, the unit rule).
        after = _start_after_server_compaction(view, block_at, first_open)
        if after is None:
            return (
                "no start after the latest server compaction keeps every tool call with its "
                "result and loses nothing the notes do not cover"
            )
        index = after
    if not api_invariants_hold(view, index):
        return "no start keeps every tool call with its result"
    kept = view[index:]
    if kept and (kept[0].uuid is None or kept[-1].uuid is None):
        return "the messages to keep have no uuids to relink them by"
    return index


def build_session_memory_result(
    entries: Sequence[Entry],
    view: Sequence[Entry],
    keep_index: int,
    notes_summary: str,
    *,
    pre_tokens: int,
    transcript_path: str | None = None,
    attachments: Sequence[dict[str, Any]] = (),
    skipped_attachments: Sequence[str] = (),
    hook_texts: Sequence[str] = (),
    boundary_metadata: dict[str, Any] | None = None,
) -> CompactionResult:
    """The compaction that replaces `view[:keep_index]` by the notes (pure, nothing written)."""
    floor = first_message_index(view)
    kept = list(view[keep_index:])
    summarized = view[floor:keep_index]
    summary_entry = Entry.user(
        summary_message_text(
            notes_summary,
            transcript_path=transcript_path,
            messages_preserved=bool(kept),
            automatic=True,
        ),
        is_compact_summary=True,
        is_visible_in_transcript_only=True,
    )
    boundary = create_compact_boundary(
        "auto",
        pre_tokens,
        logical_parent_uuid=next((e.uuid for e in reversed(entries) if e.uuid), None),
        messages_summarized=sum(1 for e in summarized if e.type in ("user", "assistant")),
        pre_compact_discovered_tools=discovered_tools(view),
        extra_metadata={**(boundary_metadata or {}), "sessionMemory": True},
    )
    if kept:
        boundary.compact_metadata["preservedSegment"] = {
            "headUuid": kept[0].uuid,
            "anchorUuid": summary_entry.uuid,
            "tailUuid": kept[-1].uuid,
        }
    summary_entry.data["parentUuid"] = boundary.uuid
    result = CompactionResult(
        boundary=boundary,
        summary_messages=[summary_entry],
        messages_to_keep=kept,
        attachments=[Entry.attachment_record(dict(payload)) for payload in attachments],
        hook_results=[Entry.user(text, is_meta=True) for text in hook_texts],
        pre_tokens=pre_tokens,
        post_tokens=0,
        summary_tokens=rough_token_count(notes_summary),
        summary_text=notes_summary,
        usage=None,
        request={},
        attempts=0,
        used_fallback=False,
        summarizer=QUERY_SOURCE,
        skipped_attachments=list(skipped_attachments),
    )
    result.post_tokens = estimate_messages_tokens(normalize_messages(result.view()))
    return result


async def try_session_memory_compaction(
    context: CompactionContext,
    memory: NotesState,
    *,
    max_post_tokens: int | None = None,
) -> CompactionResult | None:
    """A compaction built from the notes, or None to fall through to a summary call (also
    when the result would hold more than `max_post_tokens`, default under the threshold).

    `context` is what the conversation looks like now (`Session.compaction_context()`)."""
    policy = context.policy
    sink = context.events

    def skip(reason: str) -> None:
        emit(sink, SessionMemoryCompactionSkipped(reason))

    if not policy.session_memory_enabled:
        skip("session memory is disabled")
        return None
    if not await memory.wait_for_update(policy.session_memory_wait_seconds):
        emit(sink, SessionMemoryWaitTimedOut(policy.session_memory_wait_seconds))
    notes = context.read_notes()
    if notes is None:
        skip("there are no notes yet")
        return None
    if notes_are_empty(notes):
        skip("the notes are still the empty template")
        return None
    entries = context.entries
    view = list(context.view)
    threshold = context.autocompact_threshold
    # Keep limits are in real tokens: the length estimates they are counted on are scaled by
    # the session's calibration (length/4 undercounts code and JSON 1.5-2x).
    calibration = context.calibration or 1.0
    policy = policy.with_changes(
        session_memory_keep_min_tokens=round(policy.session_memory_keep_min_tokens / calibration),
        session_memory_keep_max_tokens=round(policy.session_memory_keep_max_tokens / calibration),
    )
    updated_through = memory.updated_through
    plan = plan_messages_to_keep(entries, view, updated_through, policy)
    if isinstance(plan, str):
        skip(plan)
        return None
    if context.estimate_request_tokens(normalize_messages(view[plan:])) >= threshold:
        # The kept part alone would be over the threshold: keep only what the notes do not
        # cover (the minimum that loses nothing) before giving up on a free compaction.
        lean = plan_messages_to_keep(
            entries,
            view,
            updated_through,
            policy.with_changes(
                session_memory_keep_min_tokens=0, session_memory_keep_min_text_messages=0
            ),
        )
        if not isinstance(lean, str):
            plan = lean
    summary, _ = truncate_notes_for_compact(
        notes,
        max_section_chars=policy.session_memory_compact_section_chars,
        notes_path=context.notes_path,
    )
    summarized = view[first_message_index(view) : plan]
    replaced = sum(entry_tokens(e) for e in summarized)
    verdict = check_summary(
        summary,
        replaced,
        kind="notes",
        lean_tokens=lambda: lean_summary_tokens(normalize_messages(summarized)),
        min_tokens=policy.summary_floor_min_tokens,
    )
    if not verdict.ok:
        emit(
            sink,
            SummaryRejected(
                summarizer=QUERY_SOURCE,
                reason=verdict.reason,
                summary_tokens=verdict.tokens,
                floor=verdict.floor,
                missing_sections=verdict.missing_sections,
            ),
        )
        skip(f"the notes would make an implausible summary: {verdict.reason}")
        return None
    attachments: list[dict[str, Any]] = []
    skipped: list[str] = []
    rehydrate = context.rehydrator() if memory.rehydrate else None
    if rehydrate is not None:
        attachments, skipped = rehydrate(list(view[plan:]))
    pre_tokens = context.tokens
    metadata = {**context.boundary_metadata, "notesUpdatedThrough": updated_through}
    result = build_session_memory_result(
        entries,
        view,
        plan,
        summary,
        pre_tokens=pre_tokens,
        transcript_path=context.transcript_path,
        attachments=attachments,
        skipped_attachments=skipped,
        boundary_metadata=metadata,
    )
    # In a small window the re-injected files would bring on the next compaction at once.
    drop_attachments_to_fit(result, context.post_fit())
    # What the next request will carry: system prompt and tools included, the length
    # estimate calibrated on this session's reported usage (length/4 undercounts code).
    result.post_tokens = context.estimate_request_tokens(normalize_messages(result.view()))
    if result.post_tokens >= threshold:
        skip(f"the context would still hold {result.post_tokens:,} tokens (>= {threshold:,})")
        return None
    if max_post_tokens is not None and result.post_tokens > max_post_tokens:
        skip(
            f"the context would still hold {result.post_tokens:,} tokens "
            f"(> {max_post_tokens:,} for a compaction before the threshold)"
        )
        return None
    hooks = context.hooks
    hook_texts: list[str] = []
    if hooks is not None:
        outcome = await hooks.arun_pre_compact("auto", None)
        if outcome.blocked:
            skip(f"a PreCompact hook blocked it: {outcome.block_reason}")
            return None
        hook_texts = list(await hooks.arun_session_start("compact"))
        if hook_texts:
            result = build_session_memory_result(
                entries,
                view,
                plan,
                summary,
                pre_tokens=pre_tokens,
                transcript_path=context.transcript_path,
                attachments=attachments,
                skipped_attachments=skipped,
                hook_texts=hook_texts,
                boundary_metadata=metadata,
            )
    emit(sink, CompactionStarted(trigger="auto", pre_tokens=pre_tokens, partial=None))
    if hooks is not None:
        await hooks.arun_post_compact("auto", summary)
    logger.info(
        "auto compaction: %d -> %d tokens, summary from the session notes",
        pre_tokens,
        result.post_tokens,
    )
    emit(
        sink,
        CompactionFinished(
            trigger="auto",
            pre_tokens=pre_tokens,
            post_tokens=result.post_tokens,
            summary_tokens=result.summary_tokens,
            summarizer=QUERY_SOURCE,
        ),
    )
    return result


__all__ = [
    "NotesState",
    "adjust_index_to_preserve_api_invariants",
    "api_invariants_hold",
    "build_session_memory_result",
    "calculate_messages_to_keep_index",
    "first_unsummarized_index",
    "has_text_blocks",
    "plan_messages_to_keep",
    "try_session_memory_compaction",
]
