"""Facts taken from a conversation deterministically, a ledger of them, and the retention score.

A summary written by a model keeps what the model chose to keep. The facts below are read
from the transcript's structure instead, so they can be checked against any summary
(`retention_scores`, the definitions of ../shared/RETENTION.md) and appended to one as a
"Facts ledger" (`render_facts_ledger`, switched by `Policy.facts_ledger`; the orchestrator
does the appending).

| fact            | taken from                                                               |
|-----------------|--------------------------------------------------------------------------|
| user prompts    | user text that is not a tool result, not `isMeta` / `isCompactSummary`   |
|                 | (when entries are given), and does not start with `<command-`,          |
|                 | `<local-command`, `[Request interrupted` or `<system-reminder>`          |
| files modified  | `file_write_paths` of tool calls (Edit, Write, MultiEdit, NotebookEdit,  |
|                 | an editor's create / str_replace / insert, every file of an apply_patch, |
|                 | a shell here-document's target: `cat > f << EOF`)                        |
| files read      | `file_read_paths` of tool calls (Read, an editor's view…, a shell read:  |
|                 | `cat f`, `sed -n 'a,bp' f`, `nl -ba f`, `head`, `tail`, `less`)          |
| errors          | text of tool results marked `is_error`, with the name of the tool        |
| commands        | `shell_command` of tool calls (Bash and equivalents)                     |
| open todos      | the latest todo list (TodoWrite input or a `todo` attachment): the       |
|                 | items not completed                                                      |
| standing,       | the user's standing instructions and latest request                      |
| latest request  | (`compaction.carried`), with those a previous summary among the records  |
|                 | carries (its blocks are read back; so are the user messages it lists)    |

Each list keeps the first occurrence of a fact and drops later duplicates (RETENTION.md:
"each fact is counted once per session"). Prompts, errors and commands are compared after
normalization (whitespace collapsed, trimmed, lower-cased); paths as written.

Input is Anthropic-shaped messages (`{"role", "content"}`), transcript entries, or both
mixed. With plain messages nothing says a user text was meta, so it is counted as a prompt
(pass entries when they are available); a previous summary is recognised by its opening
words (`compaction.prompts.is_previous_summary`). In a plain message, each text
block is a prompt of its own (normalization merges consecutive user records into one
message); in an entry, the record's text blocks together are one prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not
from typing import Any

from unbounded.compaction.carried import (
    carried_latest,
    carried_standing,
    carried_user_messages,
    render_latest,
    render_standing,
    standing_instructions,
)
from unbounded.compaction.prompts import is_previous_summary
from unbounded.compaction.read_mark import ReadMark
from unbounded.compaction.view_folds import holds_rewritten_block
from unbounded.model.entries import Entry
from unbounded.model.tools import file_read_paths, file_write_paths, shell_command
from unbounded.model.user_messages import classify_message_texts, classify_user_entry
from unbounded.tokens.estimate import rough_token_count

PROMPT_EXCLUDED_PREFIXES: tuple[str, ...] = (
    "<command-",
    "<local-command",
    "[Request interrupted",
    "<system-reminder>",
)
"""User texts starting with one of these are not prompts the user typed."""

TASK_LIST_TOOLS = frozenset(
    {"TodoWrite", "todo_write", "todowrite", "update_todos", "task_tracker"}
)
"""Tools whose input is the whole current todo list."""
_TASK_LIST_KEYS = ("todos", "task_list", "items")
_DONE_STATUSES = frozenset({"completed", "complete", "done", "cancelled", "canceled"})

PROMPT_SCORE_CHARS = 80
"""A prompt is kept when its first 80 normalized characters appear (RETENTION.md)."""
ERROR_SCORE_CHARS = 50
"""An error is kept when its first 50 normalized characters appear."""
COMMAND_SCORE_CHARS = 40
"""A command is kept when its first 40 normalized characters appear."""

FACT_KINDS: tuple[str, ...] = (
    "user_prompts",
    "files_modified",
    "files_read",
    "errors",
    "commands",
)
"""The fact kinds `retention_scores` reports, in RETENTION.md's order."""

_WHITESPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Collapse every run of whitespace to one space, trim, lower-case (RETENTION.md)."""
    return _WHITESPACE.sub(" ", text).strip().lower()


def collapse_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and trim, keeping the case."""
    return _WHITESPACE.sub(" ", text).strip()


def clip(text: str, max_chars: int, *, ellipsis: str = "…") -> str:
    """`text` with whitespace collapsed, cut to `max_chars` characters plus an ellipsis.

    The cut is not right-stripped: the first `max_chars` normalized characters stay a
    substring of the result even when they end with a space (what RETENTION.md probes).
    """
    # Only the start is needed: collapse a prefix that grows until it is long enough, so a
    # huge text costs O(max_chars), not O(len(text)).
    window = max(256, 2 * max_chars)
    while True:
        flat = collapse_whitespace(text[:window])
        if window >= len(text):
            return flat if len(flat) <= max_chars else flat[: max(0, max_chars)] + ellipsis
        if len(flat) > max_chars:
            return flat[: max(0, max_chars)] + ellipsis
        window *= 4


@dataclass(frozen=True, slots=True)
class ErrorFact:
    """A tool result marked as an error: the tool that failed and the result's text."""

    tool: str
    text: str


@dataclass(frozen=True, slots=True)
class Facts:
    """What a conversation did, read from its structure; each list in first-seen order."""

    user_prompts: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    files_read: tuple[str, ...] = ()
    errors: tuple[ErrorFact, ...] = ()
    commands: tuple[str, ...] = ()
    open_todos: tuple[dict[str, Any], ...] = ()
    tool_counts: tuple[tuple[str, int], ...] = field(default=())
    """How often each tool was called, in first-call order."""
    standing: tuple[str, ...] = ()
    """The user's standing instructions, verbatim (`compaction.carried`), earlier summaries'
    included."""
    latest_request: str | None = None
    """The user's latest request (a previous summary's when no request followed it)."""
    carried_messages: tuple[str, ...] = ()
    """The user messages earlier summaries in the conversation list."""

    def counts(self) -> dict[str, int]:
        """How many facts of each kind (FACT_KINDS plus open_todos)."""
        return {
            "user_prompts": len(self.user_prompts),
            "files_modified": len(self.files_modified),
            "files_read": len(self.files_read),
            "errors": len(self.errors),
            "commands": len(self.commands),
            "open_todos": len(self.open_todos),
        }


def text_of(content: Any) -> str:
    """The text of message or tool-result content (a string or text blocks), joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return "\n".join(part for part in parts if part)
    return ""


def is_prompt_text(text: str) -> bool:
    """Whether a user text is something the user typed (not a command echo or a reminder)."""
    stripped = text.lstrip()
    if not stripped:
        return False
    return not stripped.startswith(PROMPT_EXCLUDED_PREFIXES)


def open_todo_items(todos: Any) -> tuple[dict[str, Any], ...]:
    """The items of a todo list that are not completed (dicts; bare strings become items)."""
    if not isinstance(todos, list):
        return ()
    items: list[dict[str, Any]] = []
    for item in todos:
        if isinstance(item, str):
            items.append({"content": item, "status": "pending"})
        elif isinstance(item, dict):
            status = str(item.get("status", "pending")).lower()
            if status not in _DONE_STATUSES:
                items.append(dict(item))
    return tuple(items)


def todo_list_from_tool(block: Mapping[str, Any]) -> list[Any] | None:
    """The todo list a TodoWrite-like tool_use sets, or None for other tools."""
    if block.get("name") not in TASK_LIST_TOOLS:
        return None
    tool_input = block.get("input")
    if not isinstance(tool_input, Mapping):
        return None
    for key in _TASK_LIST_KEYS:
        value = tool_input.get(key)
        if isinstance(value, list):
            return value
    return None


def _without_text(content: Any) -> bool:
    """Whether a user message's content is a list without a text block (tool results, media):
    no request, as `classify_user_content` would tell."""
    return isinstance(content, list) and not any(
        isinstance(block, dict) and block.get("type") == "text" for block in content
    )


class _Collector:
    """Accumulates facts in order, deduplicating as it goes."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.modified: list[str] = []
        self.read: list[str] = []
        self.errors: list[ErrorFact] = []
        self.commands: list[str] = []
        self.todos: list[Any] | None = None
        self.tool_names: dict[str, str] = {}
        self.tool_counts: dict[str, int] = {}
        self.requests: list[str] = []
        self.summaries: list[str] = []
        self._seen: dict[str, set[str]] = {
            "prompt": set(),
            "modified": set(),
            "read": set(),
            "error": set(),
            "command": set(),
        }

    def _add(self, kind: str, key: str, target: list[Any], value: Any) -> None:
        seen = self._seen[kind]
        if key and key not in seen:
            seen.add(key)
            target.append(value)

    def prompt(self, text: str) -> None:
        if is_prompt_text(text):
            self._add("prompt", normalize_text(text), self.prompts, text.strip())

    def tool_use(self, block: Mapping[str, Any]) -> None:
        name = str(block.get("name", ""))
        tool_id = block.get("id")
        if isinstance(tool_id, str):
            self.tool_names[tool_id] = name
        if name:
            self.tool_counts[name] = self.tool_counts.get(name, 0) + 1
        for written in file_write_paths(block):
            self._add("modified", written, self.modified, written)
        for read in file_read_paths(block):
            self._add("read", read, self.read, read)
        command = shell_command(block)
        if command:
            self._add("command", normalize_text(command), self.commands, command.strip())
        todos = todo_list_from_tool(block)
        if todos is not None:
            self.todos = todos

    def tool_result(self, block: Mapping[str, Any]) -> None:
        if not block.get("is_error"):
            return
        text = text_of(block.get("content")).strip()
        if not text:
            return
        tool = self.tool_names.get(str(block.get("tool_use_id", "")), "tool")
        self._add("error", normalize_text(text), self.errors, ErrorFact(tool=tool, text=text))

    def content(self, role: str | None, content: Any, *, one_prompt: bool) -> None:
        if isinstance(content, str):
            if role == "user" and is_previous_summary(content):
                self.summaries.append(content)
            elif role == "user":
                self.prompt(content)
            return
        if not isinstance(content, list):
            return
        texts: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use" and role == "assistant":
                self.tool_use(block)
            elif kind == "tool_result":
                self.tool_result(block)
            elif kind == "text" and role == "user":
                text = str(block.get("text", ""))
                if is_previous_summary(text):
                    self.summaries.append(text)
                else:
                    texts.append(text)
        if one_prompt:
            kept = [text for text in texts if is_prompt_text(text)]
            if kept:
                self.prompt("\n".join(kept))
        else:
            for text in texts:
                self.prompt(text)

    def entry(self, entry: Entry) -> None:
        kind = entry.type
        if kind == "attachment":
            attachment = entry.attachment or {}
            if attachment.get("type") == "todo" and isinstance(attachment.get("content"), list):
                self.todos = attachment["content"]
            return
        if kind != "user" and kind != "assistant":
            return
        role = entry.role or kind
        content = entry.content
        summary = entry.is_compact_summary
        if summary:
            self.summaries.append(text_of(content))
        elif role == "user" and not _without_text(content):
            # A record without text (tool results: most user records of an agent's loop) is
            # no request (`classify_user_entry`): not sorted one by one.
            request = classify_user_entry(entry).request
            if request:
                self.requests.append(request)
        if role == "user" and (summary or entry.is_meta):
            # Meta and summary messages are not prompts, but tool results in them still count.
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        self.tool_result(block)
            return
        self.content(role, content, one_prompt=True)

    def copy(self) -> _Collector:
        """A collector holding what this one holds, folded further without changing it (the
        facts and keys are immutable; only the containers are copied)."""
        other = _Collector.__new__(_Collector)
        for name, value in vars(self).items():
            setattr(other, name, value.copy() if isinstance(value, list | dict) else value)
        other._seen = {kind: seen.copy() for kind, seen in self._seen.items()}
        other.todos = self.todos  # (replaced, never changed in place)
        return other

    def message(self, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        if role == "user":
            for sorted_text in classify_message_texts(message.get("content")):
                if sorted_text.request and not is_previous_summary(sorted_text.request):
                    self.requests.append(sorted_text.request)
        self.content(
            role if isinstance(role, str) else None, message.get("content"), one_prompt=False
        )

    def facts(self) -> Facts:
        carried_rules = [rule for text in self.summaries for rule in carried_standing(text)]
        latest = self.requests[-1] if self.requests else None
        if latest is None and self.summaries:
            latest = carried_latest(self.summaries[-1])
        carried_messages = [m for text in self.summaries for m in carried_user_messages(text)]
        return Facts(
            user_prompts=tuple(self.prompts),
            files_modified=tuple(self.modified),
            files_read=tuple(self.read),
            errors=tuple(self.errors),
            commands=tuple(self.commands),
            open_todos=open_todo_items(self.todos),
            tool_counts=tuple(self.tool_counts.items()),
            standing=tuple(standing_instructions(self.requests, carried_rules)),
            latest_request=latest,
            carried_messages=tuple(dict.fromkeys(carried_messages)),
        )


def extract_facts(items: Iterable[Entry | Mapping[str, Any]]) -> Facts:
    """Facts of a conversation given as transcript entries, plain messages, or both."""
    collector = _Collector()
    for item in items:
        if isinstance(item, Entry):
            collector.entry(item)
        elif isinstance(item, Mapping):
            collector.message(item)
    return collector.facts()


# -- the ledger ------------------------------------------------------------------------------

LEDGER_TITLE = "Facts ledger (read from the transcript, not written by a model):"
DEFAULT_LEDGER_TOKENS = 2_000
"""Default token budget of `render_facts_ledger`."""
LEDGER_PROMPT_CHARS = 300
"""Each user message is shown up to this many characters (whitespace collapsed)."""
LEDGER_LINE_CHARS = 160
"""Commands, errors and todos are shown up to this many characters."""


def _todo_line(item: Mapping[str, Any]) -> str:
    text = item.get("content") or item.get("title") or item.get("description") or ""
    return f"[{item.get('status', 'pending')}] {clip(str(text), LEDGER_LINE_CHARS)}"


def _ledger_sections(facts: Facts, prompt_chars: int) -> list[tuple[str, list[str], bool]]:
    """(title, items, inline) for each non-empty list; inline lists are comma-separated."""
    sections: list[tuple[str, list[str], bool]] = [
        ("Files modified", list(facts.files_modified), True),
        ("Files read", list(facts.files_read), True),
        ("Commands run", [clip(c, LEDGER_LINE_CHARS) for c in facts.commands], False),
        (
            "Errors",
            [f"[{e.tool}] {clip(e.text, LEDGER_LINE_CHARS)}" for e in facts.errors],
            False,
        ),
        ("Open todos", [_todo_line(item) for item in facts.open_todos], False),
        (
            "User messages",
            [
                f'"{clip(p, max(prompt_chars, PROMPT_SCORE_CHARS))}"'
                for p in dict.fromkeys([*facts.carried_messages, *facts.user_prompts])
            ],
            False,
        ),
    ]
    return [section for section in sections if section[1]]


def shown_items(items: Sequence[str], keep: int) -> list[str]:
    """`keep` items: the first one and the most recent ones, with "(N more)" where cut."""
    if keep >= len(items):
        return list(items)
    if keep <= 0:
        return [f"({len(items)} more)"]
    hidden = len(items) - keep
    tail = list(items[len(items) - (keep - 1) :]) if keep > 1 else []
    return [items[0], f"({hidden} more)", *tail]


def _render_ledger(
    carried: list[str], sections: list[tuple[str, list[str], bool]], keeps: list[int]
) -> str:
    lines = [LEDGER_TITLE, *carried]
    for (title, items, inline), keep in zip(sections, keeps, strict=True):
        shown = shown_items(items, keep)
        if inline:
            lines.append(f"{title} ({len(items)}): " + ", ".join(shown))
        else:
            lines.append(f"{title} ({len(items)}):")
            lines.extend(f"- {item}" for item in shown)
    return "\n".join(lines)


def render_facts_ledger(
    facts: Facts,
    max_tokens: int = DEFAULT_LEDGER_TOKENS,
    *,
    prompt_chars: int = LEDGER_PROMPT_CHARS,
) -> str:
    """A compact "Facts ledger" text within `max_tokens` ("" when there are no facts).

    It opens with the user's standing instructions and latest request, verbatim
    (`compaction.carried`): these are never cut. Over budget, the longest list shown loses
    one item at a time (ties: files read, commands, files modified, errors, todos, user
    messages, in that order), keeping its first item and its most recent ones and saying
    "(N more)" where it was cut. Deterministic.
    """
    carried = [*render_standing(facts.standing), *render_latest(facts.latest_request)]
    sections = _ledger_sections(facts, prompt_chars)
    if not sections and not carried:
        return ""
    keeps = [len(items) for _, items, _ in sections]
    text = _render_ledger(carried, sections, keeps)
    while rough_token_count(text) > max_tokens and any(keep > 0 for keep in keeps):
        longest = max(range(len(keeps)), key=lambda i: (keeps[i], -i))
        # Cut big lists in large steps so a huge ledger does not take thousands of renders.
        step = max(1, (keeps[longest] - 1) // 8)
        keeps[longest] = max(0, keeps[longest] - step)
        text = _render_ledger(carried, sections, keeps)
    return text


def facts_ledger_for(
    items: Iterable[Entry | Mapping[str, Any]], max_tokens: int = DEFAULT_LEDGER_TOKENS
) -> str:
    """The ledger of the summarized entries or messages (the orchestrator's `facts_ledger`)."""
    return render_facts_ledger(extract_facts(items), max_tokens)


class RunningFacts:
    """`extract_facts` of a session's view, folded as the view grows, so the compacting call
    renders the ledger from what is already folded instead of reading every record again.

    It keeps what the fold keeps (the facts found so far, with the normalized keys that drop
    repeats, and each tool call's id and name) and the view it folds. A view that is not the
    one last grown (a compaction, a rewind, a load) starts the fold over; a record the fold
    cannot take stops it until then, and the ledger is read the old way."""

    def __init__(self) -> None:
        self._collector = _Collector()
        self._mark = ReadMark()
        self._view: Sequence[Entry] = ()
        self._count = 0
        self._stopped = False

    @property
    def records(self) -> int:
        """How many records of the view are folded (0 while none is)."""
        return 0 if self._stopped else self._count

    def advance(self, view: Sequence[Entry]) -> None:
        """Fold the records appended to `view` since the last call."""
        restart, start, end = self._mark.span(view)
        if restart:
            self._collector, self._stopped = _Collector(), False
        self._view, self._count = view, end
        if self._stopped:
            return
        collector = self._collector
        for position in range(start, end):
            try:
                collector.entry(view[position])
            except Exception:  # the old fold meets it at the compaction, and decides there
                self._stopped = True
                return

    def facts_of(self, items: Sequence[Entry | Mapping[str, Any]]) -> Facts | None:
        """`extract_facts(items)` when `items` are the records folded, one for one (None
        otherwise: the caller reads them)."""
        count = self._count
        if self._stopped or len(items) != count:
            return None
        # The same records, or equal ones (the facts read only a record's data): a view
        # derived again copies the records a partial compaction kept, without their usage.
        # A list compares each pair by identity first, so the usual case costs no reading.
        if list(items) != list(self._view[:count]):
            return None
        return self._collector.facts()

    def ledger(
        self,
        view: Sequence[Entry],
        items: list[Entry],
        max_tokens: int = DEFAULT_LEDGER_TOKENS,
    ) -> str:
        """`facts_ledger_for(items, max_tokens)`, from the fold when `items` are the records
        of `view` (the session's, brought up to date first)."""
        self.advance(view)
        facts = self.facts_of(items)
        if facts is None:
            return facts_ledger_for(items, max_tokens)
        return render_facts_ledger(facts, max_tokens)


def _inert(entry: Entry | None) -> bool:
    """Whether `_Collector.entry` finds nothing in this record: none, or a user record of tool
    results none of which is an error (the results an agent's loop gets, and their placeholders
    once cleared), but a summary (even without text it is the latest summary)."""
    if entry is None:
        return True
    if entry.type != "user" or entry.is_compact_summary:
        return False
    # Its role or `isMeta` changes nothing: no text, so no request or prompt either way.
    content = entry.content
    if not isinstance(content, list):
        return False
    return all(
        isinstance(block, dict) and block.get("type") == "tool_result" and not block.get("is_error")
        for block in content
    )


class PrefixFacts:
    """`extract_facts` of the prefixes of a list of records that grows (a LangChain
    middleware's view: `None` for a message never sent), folded as it grows, with a copy of
    the fold kept every `every` records (the latest `keep` of them, and the empty one), so
    the facts of a prefix a little shorter than the list (what a compaction summarizes, its
    kept tail left out) are the nearest copy plus the few records after it.

    A record replaced after it was folded (a result cleared: its placeholder) changes nothing
    when both are `_inert`; otherwise the fold stops at it (copies after it dropped) until
    `reset`, and the facts are read from the copy before it."""

    def __init__(self, every: int = 256, keep: int = 8) -> None:
        self._every = every
        self._keep = keep
        self._collector = _Collector()
        self._count = 0
        self._stopped = False
        self._copies: list[tuple[int, _Collector]] = [(0, _Collector())]
        """(records folded, the fold then): the empty one first, always kept."""
        self._rewritten_at: int | None = None
        """The first position whose record (as folded, or as replaced since) holds a block a
        summary request rewrites (`holds_rewritten_block`); None: none."""
        self.taken_from = 0
        """Where the last `ledger_of` took the fold from (0: it reads every record)."""

    @property
    def count(self) -> int:
        """How many records of the list are folded."""
        return self._count

    def reset(self) -> None:
        """Another list: fold it from its first record."""
        self._collector = _Collector()
        self._count = 0
        self._stopped = False
        self._copies = [(0, _Collector())]
        self._rewritten_at = None

    def advance(self, records: Sequence[Entry | None], limit: int) -> None:
        """Fold the next records of the list, at most `limit` of them (a long list is caught
        up over a few calls)."""
        end = min(len(records), self._count + limit)
        every = self._every
        for position in range(self._count, end):
            record = records[position]
            if self._rewritten_at is None and record is not None:
                self._rewritten_at = position if _may_be_rewritten(record) else None
            if not self._stopped and record is not None:
                try:
                    self._collector.entry(record)
                except Exception:  # the facts of a prefix holding it are read the old way
                    self._stop(position)
            self._count = position + 1
            if not self._stopped and self._count % every == 0:
                self._copies.append((self._count, self._collector.copy()))
                if len(self._copies) > self._keep + 1:
                    del self._copies[1]

    def replaced(self, position: int, old: Entry | None, new: Entry | None) -> None:
        """The record at `position`, folded as `old` when it was folded, is now `new`."""
        if position < self._count and not (_inert(old) and _inert(new)):
            self._stop(position)
        if position < self._count and new is not None and _may_be_rewritten(new):
            at = self._rewritten_at
            self._rewritten_at = position if at is None else min(at, position)

    def rewrites(
        self, head: Sequence[Entry | None], records: Sequence[Entry | None]
    ) -> bool | None:
        """False when no record of `head` (the first records of the list as a compaction
        holds them: `records`, the list as it is now, but for some replaced since) holds a
        block a summary request rewrites; None when that is not known (not folded that far,
        or a record of `head` that is not the list's holds one)."""
        length = len(head)
        at = self._rewritten_at
        if self._count < length or len(records) < length or (at is not None and at < length):
            return None
        differing = compress(range(length), map(is_not, head, records[:length]))
        for position in differing:
            record = head[position]
            if record is not None and _may_be_rewritten(record):
                return None
        return False

    def _stop(self, position: int) -> None:
        """The fold is not what the list's records give from `position` on."""
        self._stopped = True
        self._copies = [(at, copied) for at, copied in self._copies if at <= position]

    def ledger_of(
        self, head: Sequence[Entry | None], records: Sequence[Entry | None]
    ) -> Callable[[list[Entry]], str]:
        """The facts ledger (`facts_ledger_for`) of the records `head` holds, for a caller that
        gives it `[e for e in head if e is not None]`: from the latest fold not past `head`
        whose records are those of `head` (`records`: the list as it is now, from which
        `head` may differ only by inert records), plus `head`'s records after it. Another
        list given is read the old way."""
        length = len(head)
        start, collector = next((at, c) for at, c in reversed(self._copies) if at <= length)
        if not self._stopped and start < self._count <= length:
            start, collector = self._count, self._collector
        if start and not _same_records(head, records, start):
            start, collector = self._copies[0]
        self.taken_from = start
        base = collector.copy()
        rest = [entry for entry in head[start:] if entry is not None]
        expected = [entry for entry in head if entry is not None] if start else rest

        def ledger(items: list[Entry], max_tokens: int = DEFAULT_LEDGER_TOKENS) -> str:
            if items != expected:
                return facts_ledger_for(items, max_tokens)
            folded = base.copy()  # (asked twice, it folds the rest again from the copy)
            for entry in rest:
                folded.entry(entry)
            return render_facts_ledger(folded.facts(), max_tokens)

        return ledger


def _may_be_rewritten(record: Entry) -> bool:
    """`holds_rewritten_block` of the record's content (True when reading it fails: the
    summary request's rewrites then run and decide)."""
    try:
        return holds_rewritten_block(record.content)
    except Exception:
        return True


def _same_records(
    head: Sequence[Entry | None], records: Sequence[Entry | None], count: int
) -> bool:
    """The first `count` of `head` are those of `records`, but for inert ones on both sides
    (found at C speed: only the differing positions are read)."""
    if len(records) < count:
        return False
    differing = compress(range(count), map(is_not, head[:count], records[:count]))
    return all(_inert(head[at]) and _inert(records[at]) for at in differing)


# -- retention scoring (RETENTION.md) --------------------------------------------------------


def _path_kept(path: str, kept: str) -> bool:
    normalized = normalize_text(path)
    if normalized and normalized in kept:
        return True
    basename = normalize_text(path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1])
    return bool(basename) and basename in kept


def retention_scores(facts: Facts, kept_text: str) -> dict[str, tuple[int, int]]:
    """(kept, total) per fact kind: how many facts the kept text still shows (RETENTION.md)."""
    kept = normalize_text(kept_text)

    def count(values: Iterable[str], chars: int | None) -> tuple[int, int]:
        total = hits = 0
        for value in values:
            total += 1
            probe = normalize_text(value)
            if chars is not None:
                probe = probe[:chars]
            if probe in kept:
                hits += 1
        return hits, total

    prompts = count(facts.user_prompts, PROMPT_SCORE_CHARS)
    modified = (sum(_path_kept(p, kept) for p in facts.files_modified), len(facts.files_modified))
    read = (sum(_path_kept(p, kept) for p in facts.files_read), len(facts.files_read))
    errors = count((e.text for e in facts.errors), ERROR_SCORE_CHARS)
    commands = count(facts.commands, COMMAND_SCORE_CHARS)
    return {
        "user_prompts": prompts,
        "files_modified": modified,
        "files_read": read,
        "errors": errors,
        "commands": commands,
    }


def add_scores(
    total: Mapping[str, tuple[int, int]], more: Mapping[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """Corpus score: numerators and denominators added kind by kind."""
    keys = list(dict.fromkeys([*total, *more]))
    return {
        key: (
            total.get(key, (0, 0))[0] + more.get(key, (0, 0))[0],
            total.get(key, (0, 0))[1] + more.get(key, (0, 0))[1],
        )
        for key in keys
    }


def score_fraction(score: tuple[int, int]) -> float:
    """kept / total, 1.0 when there was nothing to keep."""
    kept, total = score
    return kept / total if total else 1.0


# -- compaction points of a recorded transcript ----------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionPoint:
    """A recorded compaction: the records it summarized and the summary text it wrote."""

    boundary_index: int
    """Index of the compact boundary in the main thread."""
    before: list[Entry]
    """Main-thread records summarized: from the previous boundary (or the start) up to it."""
    recorded_summary: str
    """Text of the `isCompactSummary` message(s) right after the boundary ("" when absent)."""


def compaction_points(main_thread: Sequence[Entry]) -> list[CompactionPoint]:
    """Each compact boundary of a main thread, with the records before it and its summary.

    `before` starts at the previous boundary, because that is what a summarizer was given at
    that point (the view after the last boundary, previous summary included).
    """
    points: list[CompactionPoint] = []
    start = 0
    for index, entry in enumerate(main_thread):
        if not entry.is_compact_boundary:
            continue
        summary_parts: list[str] = []
        for later in main_thread[index + 1 :]:
            if later.is_compact_summary:
                summary_parts.append(text_of(later.content))
            elif later.type in ("user", "assistant"):
                break
        points.append(
            CompactionPoint(
                boundary_index=index,
                before=list(main_thread[start:index]),
                recorded_summary="\n".join(summary_parts),
            )
        )
        start = index
    return points
