"""A recorded session as a replay script: what to feed before each recorded API call, the
call's own response, and what to feed after it.

- The main thread is read in file order (`Transcript.main_thread()`).
- A call is a recorded API response: the assistant lines sharing a message id
  (`Transcript.api_calls()`, usage from the last line). A transcript without usage (SWE-agent,
  OpenHands) gets one call per assistant message, with its output estimated.
- Fed: user, assistant and attachment records. Not fed: progress and system records (the API
  never sees them), synthetic API-error messages, recorded compaction boundaries and summaries
  (the replayed policy decides when to compact), and the attachments re-injected right after a
  recorded compaction (the replayed policy re-injects its own).
- Tool results written between the lines of one response (parallel tool calls) are fed right
  after that response, so every tool_use is answered in the next message.
- Times: a request starts at the last record before its response (progress included), never
  before the previous request; the response at its last line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from unbounded.compaction.conversation import REINJECTED_ATTACHMENT_TYPES
from unbounded.model.content import ContentBlock, Usage, usage_prompt_total
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.tokens.estimate import content_tokens


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One recorded model response and when it happened."""

    index: int
    message_id: str
    lines: tuple[int, ...]
    """Main-thread indices of the response's own lines."""
    first: int
    last: int
    usage: Usage | None
    model: str | None
    request_time: float
    """Seconds since the epoch when the request started."""
    response_time: float
    """Seconds since the epoch of the response's last line."""
    content: tuple[ContentBlock, ...]
    """The response's blocks, its lines merged in order."""
    stop_reason: str | None = None

    @property
    def output_tokens(self) -> int:
        """Recorded output tokens, or the estimate of the content when there is no usage."""
        if self.usage is not None:
            return int(self.usage.get("output_tokens") or 0)
        return content_tokens(list(self.content))

    @property
    def recorded_prompt_tokens(self) -> int | None:
        """Input + cache creation + cache read as recorded (None without usage)."""
        return usage_prompt_total(self.usage) if self.usage is not None else None


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """Entries to feed before a call, the call, and entries to feed right after it."""

    before: tuple[Entry, ...]
    call: RecordedCall
    after: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class ReplayScript:
    """A recorded session ready to replay."""

    steps: tuple[ReplayStep, ...]
    model: str | None
    has_usage: bool

    @property
    def calls(self) -> list[RecordedCall]:
        """The recorded calls in order."""
        return [step.call for step in self.steps]


def _blocks(content: Any) -> list[ContentBlock]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [cast(ContentBlock, block) for block in content if isinstance(block, dict)]
    return []


def _time(entry: Entry, fallback: float) -> float:
    moment = entry.time
    return moment.timestamp() if moment is not None else fallback


def _call_groups(main: Sequence[Entry]) -> list[tuple[str, list[int], Usage | None]]:
    """(message id, line indices, usage) of each response, in order.

    With usage in the transcript, a response is the lines of one message id of which at least
    one carries usage (as `Transcript.api_calls()` groups them). Without, each run of
    assistant lines sharing a message id (or each line without one) is a response.
    """
    groups: dict[str, tuple[list[int], Usage | None]] = {}
    order: list[str] = []
    with_usage = any(e.usage is not None and e.message_id for e in main)
    if with_usage:
        for call in _usage_calls(main):
            groups[call[0]] = (call[1], call[2])
            order.append(call[0])
        return [(key, *groups[key]) for key in order]
    for index, entry in enumerate(main):
        if entry.type != "assistant" or entry.is_synthetic_api_error:
            continue
        message_id = entry.message_id
        if message_id is None or (order and order[-1] != message_id and message_id in groups):
            message_id = f"msg_replay_{index}"
        if message_id not in groups:
            groups[message_id] = ([], None)
            order.append(message_id)
        groups[message_id][0].append(index)
    return [(key, *groups[key]) for key in order]


def _usage_calls(main: Sequence[Entry]) -> list[tuple[str, list[int], Usage | None]]:
    calls: dict[str, tuple[list[int], Usage | None]] = {}
    for index, entry in enumerate(main):
        message_id = entry.message_id
        if message_id is None or entry.is_synthetic_api_error:
            continue
        if message_id not in calls:
            calls[message_id] = ([], None)
        lines, usage = calls[message_id]
        lines.append(index)
        calls[message_id] = (lines, entry.usage if entry.usage is not None else usage)
    ordered = sorted(calls.items(), key=lambda item: item[1][0][0])
    return [(key, lines, usage) for key, (lines, usage) in ordered if usage is not None]


def _feedable(entry: Entry) -> bool:
    if entry.type not in ("user", "assistant", "attachment"):
        return False
    return not (entry.is_compact_summary or entry.is_synthetic_api_error)


def build_replay_script(transcript: Transcript) -> ReplayScript:
    """The replay script of a transcript's main thread (see the module docstring)."""
    main = transcript.main_thread()
    groups = _call_groups(main)
    line_owner: dict[int, str] = {}
    for message_id, lines, _ in groups:
        for line in lines:
            line_owner[line] = message_id
    has_usage = any(usage is not None for _, _, usage in groups)

    skip: set[int] = set()
    after_boundary = False
    for index, entry in enumerate(main):
        if entry.is_compact_boundary:
            after_boundary = True
            continue
        if not after_boundary:
            continue
        attachment = entry.attachment if entry.type == "attachment" else None
        if attachment is not None and attachment.get("type") in REINJECTED_ATTACHMENT_TYPES:
            skip.add(index)
        elif entry.type in ("user", "assistant") and not entry.is_compact_summary:
            after_boundary = False

    steps: list[ReplayStep] = []
    position = 0
    previous_request = float("-inf")
    for message_id, lines, usage in groups:
        first, last = lines[0], lines[-1]
        if first < position:
            continue  # overlaps a previous call: cannot be replayed in order
        before = [
            Entry(dict(main[i].data), main[i].line)
            for i in range(position, first)
            if i not in skip and i not in line_owner and _feedable(main[i])
        ]
        after = [
            Entry(dict(main[i].data), main[i].line)
            for i in range(first + 1, last + 1)
            if i not in skip and i not in line_owner and _feedable(main[i])
        ]
        response_time = _time(main[last], previous_request if steps else 0.0)
        start = _time(main[first], response_time)
        if first > 0:
            start = min(start, _time(main[first - 1], start))
        start = max(start, previous_request)
        previous_request = start
        content: list[ContentBlock] = []
        for line in lines:
            content.extend(_blocks(main[line].content))
        message = main[last].message or {}
        steps.append(
            ReplayStep(
                before=tuple(before),
                call=RecordedCall(
                    index=len(steps),
                    message_id=message_id,
                    lines=tuple(lines),
                    first=first,
                    last=last,
                    usage=usage,
                    model=main[last].model,
                    request_time=start,
                    response_time=max(response_time, start),
                    content=tuple(content),
                    stop_reason=message.get("stop_reason"),
                ),
                after=tuple(after),
            )
        )
        position = last + 1
    return ReplayScript(steps=tuple(steps), model=transcript.model, has_usage=has_usage)
