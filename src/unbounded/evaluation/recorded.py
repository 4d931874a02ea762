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

The script is planned from what each record is (`RecordShape`: its type, response id, flags,
whether it carries usage), then its steps are made from the records themselves. A loaded
transcript gives both at once (`build_replay_script`); a file read in two passes gives the
shapes from its first pass and reads each step's records again when the step is reached
(`unbounded.evaluation.recording_stream`), so only one step is in memory at a time.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from math import isnan, nan
from typing import Any, Protocol, TypeVar, cast

from unbounded.compaction.conversation import REINJECTED_ATTACHMENT_TYPES
from unbounded.evaluation.planned_calls import IndexMarks, PlannedCall, PlannedCalls
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
    """A recorded session ready to replay.

    `steps` can be iterated (once per replay) and counted, not indexed: a script opened from a
    file reads each step's records again as it is reached. What a replay needs of every call
    at once is kept per call: its request time and response id.
    """

    steps: Collection[ReplayStep]
    model: str | None
    has_usage: bool
    request_times: Sequence[float]
    """Each call's `request_time`, in order."""
    message_ids: Sequence[str]
    """Each call's `message_id`, in order."""


class RecordShape(Protocol):
    """What planning a script reads of a record (an `Entry`, or a file's record summary)."""

    @property
    def type(self) -> str:
        """The record type."""

    @property
    def message_id(self) -> str | None:
        """An assistant record's response id."""

    @property
    def is_synthetic_api_error(self) -> bool:
        """A placeholder for an API error."""

    @property
    def is_compact_boundary(self) -> bool:
        """A compact boundary."""

    @property
    def is_compact_summary(self) -> bool:
        """The summary after a compact boundary."""


Shape = TypeVar("Shape", bound=RecordShape)


@dataclass(frozen=True, slots=True)
class ScriptPlan:
    """The calls of a script in order, and which main-thread records are not fed."""

    calls: PlannedCalls
    not_fed: IndexMarks
    """Response lines and the attachments re-injected after a recorded compaction."""
    has_usage: bool

    def script(self, steps: Collection[ReplayStep], model: str | None) -> ReplayScript:
        """The script whose steps are `steps` (made by `replay_steps` from this plan)."""
        return ReplayScript(
            steps=steps,
            model=model,
            has_usage=self.has_usage,
            request_times=self.calls.request_times,
            message_ids=self.calls.message_ids,
        )


def _blocks(content: Any) -> list[ContentBlock]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [cast(ContentBlock, block) for block in content if isinstance(block, dict)]
    return []


def _time(entry: Entry, fallback: float) -> float:
    moment = entry.time
    return moment.timestamp() if moment is not None else fallback


def _known(moment: float, fallback: float) -> float:
    """A time read with `_time(entry, nan)`, or the fallback when the record had none."""
    return fallback if isnan(moment) else moment


_Group = tuple[str, "array[int]", int | None]
"""A response's message id, its lines' main-thread indices, and the line of its usage."""


def _call_groups(shapes: Sequence[Shape], has_usage: Callable[[Shape], bool]) -> list[_Group]:
    """(message id, line indices, line of its usage) of each response, in order.

    With usage in the transcript, a response is the lines of one message id of which at least
    one carries usage (as `Transcript.api_calls()` groups them). Without, each run of
    assistant lines sharing a message id (or each line without one) is a response.
    """
    if any(has_usage(shape) and shape.message_id for shape in shapes):
        return _usage_calls(shapes, has_usage)
    groups: dict[str, array[int]] = {}
    order: list[str] = []
    for index, shape in enumerate(shapes):
        if shape.type != "assistant" or shape.is_synthetic_api_error:
            continue
        message_id = shape.message_id
        if message_id is None or (order and order[-1] != message_id and message_id in groups):
            message_id = f"msg_replay_{index}"
        if message_id not in groups:
            groups[message_id] = array("q")
            order.append(message_id)
        groups[message_id].append(index)
    return [(key, groups[key], None) for key in order]


def _usage_calls(shapes: Sequence[Shape], has_usage: Callable[[Shape], bool]) -> list[_Group]:
    # Each call's lines as an array: a list of int objects held 250 bytes a call while the
    # whole thread was planned.
    calls: dict[str, tuple[array[int], int | None]] = {}
    for index, shape in enumerate(shapes):
        message_id = shape.message_id
        if message_id is None or shape.is_synthetic_api_error:
            continue
        if message_id not in calls:
            calls[message_id] = (array("q"), None)
        lines, usage_line = calls[message_id]
        lines.append(index)
        calls[message_id] = (lines, index if has_usage(shape) else usage_line)
    ordered = sorted(calls.items(), key=lambda item: item[1][0][0])
    return [(key, lines, line) for key, (lines, line) in ordered if line is not None]


def _feedable(entry: Entry) -> bool:
    if entry.type not in ("user", "assistant", "attachment"):
        return False
    return not (entry.is_compact_summary or entry.is_synthetic_api_error)


def _call_times(
    calls: Sequence[_Group],
    read: Callable[[Iterable[int]], Iterator[Entry]],
) -> Iterator[tuple[float, float, float]]:
    """Per call (in order, none overlapping the one before), the times of the record before
    it (nan when it is the first record), of its first line and of its last line (nan when a
    record has none), each record read once, in order, and let go once timed: the record
    before a call is often a large tool result, and a dict of every call's times held half a
    kilobyte a call."""

    def places() -> Iterator[int]:
        # Calls do not overlap, so these indices only grow: each is read once, in order.
        last = -1
        for _, lines, _ in calls:
            for index in (lines[0] - 1, lines[0], lines[-1]):
                if index > last:
                    last = index
                    yield index

    records = zip(places(), read(places()), strict=True)
    times: dict[int, float] = {}
    for _, lines, _ in calls:
        first, last = lines[0], lines[-1]
        while last not in times:
            index, entry = next(records)
            times[index] = _time(entry, nan)
        yield times.get(first - 1, nan), times[first], times[last]
        times = {last: times[last]}  # the next call's record before may be this one's last


def plan_script(
    shapes: Sequence[Shape],
    has_usage: Callable[[Shape], bool],
    read: Callable[[Iterable[int]], Iterator[Entry]],
) -> ScriptPlan:
    """Plan the script of a main thread from its records' shapes; `read` gives the records at
    these main-thread indices (ascending), for the few whose content decides (attachments
    after a boundary) and those whose times place the calls."""
    groups = _call_groups(shapes, has_usage)
    not_fed = IndexMarks(len(shapes), (line for _, lines, _ in groups for line in lines))
    after_boundary = False
    attachments: list[int] = []
    for index, shape in enumerate(shapes):
        if shape.is_compact_boundary:
            after_boundary = True
            continue
        if not after_boundary:
            continue
        if shape.type == "attachment":
            attachments.append(index)
        elif shape.type in ("user", "assistant") and not shape.is_compact_summary:
            after_boundary = False
    for index, entry in zip(attachments, read(attachments), strict=True):
        attachment = entry.attachment
        if attachment is not None and attachment.get("type") in REINJECTED_ATTACHMENT_TYPES:
            not_fed.add(index)

    kept: list[_Group] = []
    position = 0
    for group in groups:
        lines = group[1]
        if lines[0] < position:
            continue  # overlaps a previous call: cannot be replayed in order
        kept.append(group)
        position = lines[-1] + 1
    calls = PlannedCalls()
    previous_request = float("-inf")
    timed = _call_times(kept, read)
    for (message_id, lines, usage_line), (before, first_time, last_time) in zip(
        kept, timed, strict=True
    ):
        first = lines[0]
        response_time = _known(last_time, previous_request if calls else 0.0)
        start = _known(first_time, response_time)
        if first > 0:
            start = min(start, _known(before, start))
        start = max(start, previous_request)
        previous_request = start
        calls.append(
            PlannedCall(message_id, tuple(lines), usage_line, start, max(response_time, start))
        )
    has = any(line is not None for _, _, line in groups)
    return ScriptPlan(calls, not_fed, has)


def replay_steps(
    plan: ScriptPlan, read: Callable[[int, int], Sequence[Entry]]
) -> Iterator[ReplayStep]:
    """The steps of a plan, each made when reached; `read(start, end)` gives the main-thread
    records from index start up to end (excluded)."""
    position = 0
    for number, planned in enumerate(plan.calls):
        first, last = planned.lines[0], planned.lines[-1]
        records = _Span(read(position, last + 1), position)
        content: list[ContentBlock] = []
        for line in planned.lines:
            content.extend(_blocks(records[line].content))
        final = records[last]
        message = final.message or {}
        usage = records[planned.usage_line].usage if planned.usage_line is not None else None
        yield ReplayStep(
            before=records.fed(position, first, plan.not_fed),
            call=RecordedCall(
                index=number,
                message_id=planned.message_id,
                lines=planned.lines,
                first=first,
                last=last,
                usage=usage,
                model=final.model,
                request_time=planned.request_time,
                response_time=planned.response_time,
                content=tuple(content),
                stop_reason=message.get("stop_reason"),
            ),
            after=records.fed(first + 1, last + 1, plan.not_fed),
        )
        position = last + 1


class _Span:
    """Main-thread records read from index `origin` on, indexed by main-thread index."""

    def __init__(self, records: Sequence[Entry], origin: int) -> None:
        self._records = records
        self._origin = origin

    def __getitem__(self, index: int) -> Entry:
        return self._records[index - self._origin]

    def fed(self, start: int, end: int, not_fed: IndexMarks) -> tuple[Entry, ...]:
        """Copies of the records from start to end (excluded) a replay feeds."""
        return tuple(
            Entry(dict(self[i].data), self[i].line)
            for i in range(start, end)
            if i not in not_fed and _feedable(self[i])
        )


def _has_usage(entry: Entry) -> bool:
    return entry.usage is not None


def build_replay_script(transcript: Transcript) -> ReplayScript:
    """The replay script of a transcript's main thread (see the module docstring)."""
    main = transcript.main_thread()
    plan = plan_script(main, _has_usage, lambda indices: (main[i] for i in indices))
    steps = tuple(replay_steps(plan, lambda start, end: main[start:end]))
    return plan.script(steps, transcript.model)
