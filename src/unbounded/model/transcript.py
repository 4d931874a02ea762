"""A loaded transcript: its entries, the main thread, sub-agent threads and recorded API calls."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from unbounded.model.content import Usage, usage_context_total, usage_prompt_total
from unbounded.model.entries import SYNTHETIC_MODEL, Entry, messages_after_compact_boundary
from unbounded.model.thread import ThreadOrder, ThreadReport, file_order_thread, rebuild_thread


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One recorded model response: the lines that share its message id, and its usage.

    `first` and `last` index the main thread. Claude Code writes one response as several
    assistant lines whose usage repeats (output grows as it streams), so `usage` is the last
    line's.
    """

    message_id: str
    first: int
    last: int
    usage: Usage
    model: str | None
    timestamp: str | None

    @property
    def context_tokens(self) -> int:
        """Input + cache creation + cache read + output."""
        return usage_context_total(self.usage)

    @property
    def prompt_tokens(self) -> int:
        """Input + cache creation + cache read: what the request itself held."""
        return usage_prompt_total(self.usage)


CallPlace = Literal["thread", "branch", "side"]
"""Where a billed call sits: on the main thread; on a branch the thread does not follow (a
rewind, another session); or outside the conversation (an agent's own summary call recorded
in the same file, as Codex records its compaction's)."""


@dataclass(frozen=True, slots=True)
class BilledCall:
    """One response the API billed, wherever it sits in the file (one per response id)."""

    message_id: str
    usage: Usage
    """The usage of its last line in the file (Claude Code repeats it on every line)."""
    model: str | None
    timestamp: str | None
    """The time of its first line."""
    line: int | None
    """The file line of its first line."""
    place: CallPlace
    uuid: str | None = None
    """The uuid of its last line (the leaf that rebuilds a branch call's own conversation)."""


@dataclass(slots=True)
class Transcript:
    """Entries read from one file, in file order, with what the reader noticed on the way."""

    entries: list[Entry]
    format: str
    path: Path | None = None
    warnings: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    thread_order: ThreadOrder = "thread"
    """How `main_thread()` is taken: rebuilt from parent links, or in file order (debugging)."""
    _thread_cache: tuple[int, int, str, list[Entry], ThreadReport] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def records(self) -> int:
        """How many records were read."""
        return len(self.entries)

    @property
    def is_subagent_file(self) -> bool:
        """Every conversation record is a sidechain: a sub-agent's own transcript file."""
        conversation = [e for e in self.entries if e.is_conversation]
        return bool(conversation) and all(e.is_sidechain for e in conversation)

    def main_thread(self) -> list[Entry]:
        """Conversation records of the main agent's current thread, in file order.

        The thread is rebuilt from parent links (`unbounded.model.thread`): rewound branches,
        history a resume wrote again, and other sessions' records are left out, while the
        side branches of parallel tool calls and progress records are kept. Inline sub-agent
        records (`isSidechain`, Claude Code 1.0.x) are left out, unless the whole file is a
        sub-agent's. With `thread_order="file"` every conversation record is taken in file
        order instead.
        """
        return list(self._thread()[0])

    def thread_report(self) -> ThreadReport:
        """What rebuilding the thread left out (empty in file order)."""
        return self._thread()[1]

    def _thread(self) -> tuple[list[Entry], ThreadReport]:
        key = (id(self.entries), len(self.entries), self.thread_order)
        cached = self._thread_cache
        if cached is not None and cached[:3] == key:
            return cached[3], cached[4]
        keep_sidechains = self.is_subagent_file
        if self.thread_order == "file":
            thread = file_order_thread(self.entries, include_sidechains=keep_sidechains)
            report = ThreadReport()
        else:
            leaves = [
                str(e.data["leafUuid"])
                for e in self.entries
                if e.type == "summary" and isinstance(e.data.get("leafUuid"), str)
            ]
            thread, report = rebuild_thread(
                self.entries, include_sidechains=keep_sidechains, summary_leaves=leaves
            )
        self._thread_cache = (*key, thread, report)
        return thread, report

    def branch_thread(self, leaf_uuid: str) -> list[Entry]:
        """The conversation that ends at a record (the thread rebuild's rules, with that
        record as the leaf): what a call on a left-out branch sent."""
        thread, _ = rebuild_thread(
            self.entries, include_sidechains=self.is_subagent_file, leaf_uuid=leaf_uuid
        )
        return thread

    def sidechains(self) -> dict[str, list[Entry]]:
        """Inline sub-agent conversations, keyed by the uuid of each one's first record."""
        if self.is_subagent_file:
            return {}
        roots: dict[str, list[Entry]] = {}
        owner: dict[str, str] = {}
        for entry in self.entries:
            if not (entry.is_conversation and entry.is_sidechain) or entry.uuid is None:
                continue
            parent = entry.parent_uuid
            root = owner.get(parent) if parent is not None else None
            if root is None:
                root = entry.uuid
                roots[root] = []
            owner[entry.uuid] = root
            roots[root].append(entry)
        return roots

    def boundaries(self) -> list[Entry]:
        """Compact boundaries of the main thread, oldest first."""
        return [e for e in self.main_thread() if e.is_compact_boundary]

    def view_entries(self) -> list[Entry]:
        """Main-thread entries from the last compact boundary on: what the model sees next."""
        return messages_after_compact_boundary(self.main_thread())

    def api_calls(self) -> list[ApiCall]:
        """Recorded model responses of the main thread, in order."""
        return api_calls(self.main_thread())

    def billed_calls(self) -> list[BilledCall]:
        """Every response the API billed for the main agent, in file order: each response id
        with usage once, on the thread or on a branch the thread does not follow (a rewound
        branch was paid for too), and the agent's own side calls the file records
        (`meta["side_calls"]`: Codex's compaction summaries). Synthetic messages are never
        billed; a sub-agent's inline records (1.0.x `isSidechain`) are its own
        (`subagent_calls`)."""
        thread_ids = {call.message_id for call in self.api_calls()}
        calls = responses_billed(
            self.entries, sidechains=self.is_subagent_file, thread_ids=thread_ids
        )
        for side in self.meta.get("side_calls") or ():
            usage = side.get("usage") if isinstance(side, dict) else None
            if not isinstance(usage, dict):
                continue
            line = side.get("line")
            calls.append(
                BilledCall(
                    message_id=f"side_call_{line}_{len(calls)}",
                    usage=usage,  # type: ignore[arg-type]
                    model=side.get("model"),
                    timestamp=side.get("timestamp"),
                    line=line if isinstance(line, int) else None,
                    place="side",
                )
            )
        # File order; a side call the file gives no line (an SDK condenser's) goes last.
        return sorted(calls, key=lambda call: (call.line is None, call.line or 0))

    def subagent_calls(self) -> list[BilledCall]:
        """Billed responses of inline sub-agents (1.0.x `isSidechain` records), apart from the
        main agent's; none in a sub-agent's own file (those are `billed_calls`)."""
        if self.is_subagent_file:
            return []
        sidechain = [e for e in self.entries if e.is_sidechain]
        return responses_billed(sidechain, sidechains=True, thread_ids=set())

    def models(self) -> dict[str, int]:
        """Recorded calls per model, the main model (most calls) first.

        Ties go to the model of the later call. Without recorded usage, each real assistant
        response (one message id) counts as a call.
        """
        calls = self.api_calls()
        if calls:
            named = [(call.message_id, call.model) for call in calls]
        else:
            named = [
                (entry.message_id or entry.uuid or str(position), entry.model)
                for position, entry in enumerate(self.main_thread())
                if entry.type == "assistant" and not entry.is_synthetic_api_error
            ]
        return calls_per_model(named)

    @property
    def unknown_record_types(self) -> dict[str, int]:
        """Record types the reader does not know, with how many records of each, in the order
        first met: kept as they are (and written back), otherwise passed over."""
        value = self.meta.get("unknown_record_types")
        return dict(value) if isinstance(value, dict) else {}

    @property
    def provider(self) -> str | None:
        """The API family the recording called when its format makes it certain (`anthropic`
        for Claude Code, `openai` for a Codex rollout on OpenAI), else None."""
        value = self.meta.get("provider")
        return value if isinstance(value, str) else None

    @property
    def reported_window(self) -> int | None:
        """The context window the agent itself reported for its model (a Codex rollout's
        `model_context_window`), if the file records one."""
        value = self.meta.get("model_context_window")
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    @property
    def model(self) -> str | None:
        """The main model: the one that made the most recorded calls (see `models`)."""
        for name in self.models():
            return name
        return None


def api_calls(entries: Sequence[Entry]) -> list[ApiCall]:
    """Group assistant lines by message id into recorded API calls (usage from the last line)."""
    return indexed_api_calls(enumerate(entries))


def indexed_api_calls(entries: Iterable[tuple[int, Entry]]) -> list[ApiCall]:
    """`api_calls` of a thread given as (index, record) pairs in order: the records without
    usage may be left out (a file read again by offset reads only those with usage)."""
    calls: dict[str, ApiCall] = {}
    for index, entry, message_id, usage in response_lines(entries):
        previous = calls.get(message_id)
        calls[message_id] = ApiCall(
            message_id=message_id,
            first=previous.first if previous else index,
            last=index,
            usage=usage,
            model=entry.model,
            timestamp=previous.timestamp if previous else entry.timestamp,
        )
    return sorted(calls.values(), key=lambda call: call.first)


def response_lines(
    entries: Iterable[tuple[int, Entry]],
) -> Iterator[tuple[int, Entry, str, Usage]]:
    """(index, record, response id, usage) of the records that carry both: the lines a
    recorded call is made of."""
    for index, entry in entries:
        usage = entry.usage
        message_id = entry.message_id
        if usage is not None and message_id is not None:
            yield index, entry, message_id, usage


def billed_lines(
    entries: Iterable[Entry], *, sidechains: bool
) -> Iterator[tuple[Entry, str, Usage]]:
    """(record, response id, usage) of the lines `responses_billed` takes, in order."""
    kept = (e for e in entries if sidechains or not e.is_sidechain)
    for _, entry, message_id, usage in response_lines(enumerate(kept)):
        yield entry, message_id, usage


def responses_billed(
    entries: Iterable[Entry], *, sidechains: bool, thread_ids: Collection[str]
) -> list[BilledCall]:
    """Each response id with usage once, in the order first met (see `Transcript.billed_calls`);
    `sidechains` takes every record, else only those that are not `isSidechain`."""
    calls: dict[str, BilledCall] = {}
    for entry, message_id, usage in billed_lines(entries, sidechains=sidechains):
        first = calls.get(message_id)
        calls[message_id] = BilledCall(
            message_id=message_id,
            usage=usage,
            model=entry.model,
            timestamp=first.timestamp if first else entry.timestamp,
            line=first.line if first else entry.line,
            place="thread" if message_id in thread_ids else "branch",
            uuid=entry.uuid,
        )
    return list(calls.values())


def calls_per_model(named: Sequence[tuple[str, str | None]]) -> dict[str, int]:
    """(response id, model) pairs in order -> calls per model, the main model (most calls)
    first, ties to the model of the later call; a response id counts once, synthetic and
    unnamed models not at all."""
    counts: dict[str, int] = {}
    last_seen: dict[str, int] = {}
    seen: set[str] = set()
    for position, (response_id, model) in enumerate(named):
        if not model or model == SYNTHETIC_MODEL or response_id in seen:
            continue
        seen.add(response_id)
        counts[model] = counts.get(model, 0) + 1
        last_seen[model] = position
    order = sorted(counts, key=lambda name: (-counts[name], -last_seen[name]))
    return {name: counts[name] for name in order}
