"""Entries -> API messages (seed 003 "message flattening", seed 002 `WZ`), and request validation.

Normalization, in order, for each entry:

- progress and system records, and synthetic API-error messages, are dropped;
- a user record is merged into the previous message when that is a user message too;
- an assistant record is merged into an earlier assistant message with the same response id,
  walking back over messages that hold only tool results (Claude Code writes one response as
  several lines, and parallel tool calls interleave their results between them);
- an attachment becomes user content and joins the previous user message;
- whitespace-only text blocks are dropped (the API rejects them) and an empty message
  contributes nothing.

When user content is merged, tool_result blocks are kept before any other block, because the
API requires them first in the message that answers tool calls. At the end, a trailing
assistant message that holds only thinking is left out.

Repairs, so that a damaged or unusual transcript still yields a request the API accepts
(Claude Code does the same before it sends): a tool call whose result never came (a process
killed while the tool ran, an interrupt) gets a synthetic error result in the next user
message; a tool result that answers no call of the message before is turned into text (or
dropped when it repeats a result already given); a tool call whose id repeats an earlier
call's, or has characters the API refuses, is renamed, and its results with it
(`model/tool_ids.py`); a message whose tool results follow other content (text written
before them) gets its results moved first; two responses in a row are joined into one
assistant message; a conversation that starts with the assistant (a sub-agent file whose
prompt was not written) gets a placeholder user message first. A tool call at the very end
is left alone: its result may still come. Each repair is listed in
`MessageNormalizer.repairs`. A list that ends with an assistant message (a prefill) has the
whitespace at its end removed, which the API also refuses.

`MessageNormalizer` does this incrementally: appending an entry touches only the tail, so a
turn costs O(new content), not O(history).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from unbounded.errors import InvalidRequestError
from unbounded.model.attachments import attachment_to_content
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.prefix import shared_prefix_length_own
from unbounded.model.tool_ids import TOOL_USE_ID, ToolCallNames, name_results

# How many of the latest list-changing versions `first_changed_since` remembers: a reader
# that skips more than this compares instead.
_EDITS_KEPT = 256

_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})

INTERRUPTED_RESULT_TEXT = (
    "Interrupted: this tool call has no result (the session was stopped or interrupted "
    "before the tool finished). Run it again if its result is still needed."
)
"""The content of the synthetic error result given to a tool call that was never answered."""
MISSING_START_TEXT = "[The start of this conversation is not in the transcript.]"
"""The placeholder user message put before a conversation that starts with the assistant."""

RepairKind = Literal[
    "missing-tool-result", "orphan-tool-result", "duplicate-tool-use", "joined-responses",
    "missing-first-user", "tool-result-order",
]


@dataclass(frozen=True, slots=True)
class Repair:
    """One repair the normalizer made so the request stays valid."""

    kind: RepairKind
    index: int
    """Index of the message repaired, in the repaired list."""
    tool_use_ids: tuple[str, ...] = ()


def interrupted_result(tool_use_id: str) -> dict[str, Any]:
    """The synthetic error result for a tool call that never got one."""
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "is_error": True,
        "content": INTERRUPTED_RESULT_TEXT,
    }


def _tool_use_ids(blocks: list[dict[str, Any]]) -> list[str]:
    return [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]


def _tool_result_ids(blocks: list[dict[str, Any]]) -> list[str]:
    return [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]


def _content_ids(content: Any, kind: str, key: str) -> list[str]:
    """`key` of each `kind` block of a message's content (`_tool_use_ids` /
    `_tool_result_ids` of its `_blocks`, without the copy: a string holds no such block)."""
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == kind]


def _result_as_text(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        parts = [
            str(item.get("text", "")) if item.get("type") == "text" else f"[{item.get('type')}]"
            for item in content
            if isinstance(item, dict)
        ]
        text = "\n".join(parts)
    else:
        text = str(content or "")
    label = "error result" if block.get("is_error") else "result"
    return {
        "type": "text",
        "text": f"[Tool {label} for {block.get('tool_use_id')}, whose call is not in this "
        f"conversation]\n{text}".rstrip(),
    }


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _is_blank_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _results_first(content: Any) -> bool:
    """Whether no tool_result block of a user message follows another block (the API reads
    a message's answers from its beginning)."""
    if isinstance(content, str):
        return True
    other = False
    for block in content:
        if not isinstance(block, dict):  # not a block: `_sendable` drops it
            continue
        if block.get("type") != "tool_result":
            other = True
        elif other:
            return False
    return True


def _sendable(content: Any) -> Any:
    """Content without whitespace-only text blocks, which the API rejects ("\n\n" lines
    Claude Code writes while streaming); None when nothing is left."""
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, list) and content:
        # The common case, checked without building the lists below: every block a dict and
        # none a blank text, so the content is sent as it is.
        for block in content:
            if not isinstance(block, dict) or _is_blank_text(block):
                break
        else:
            return content
    blocks = _blocks(content)
    kept = [b for b in blocks if not _is_blank_text(b)]
    if not kept:
        return None
    return kept if len(kept) != len(blocks) or not isinstance(content, list) else content


def is_tool_result_only(content: Any) -> bool:
    """Whether a message content is tool results and nothing else (where one response's lines
    may continue after it under the same id)."""
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _merge_user_content(first: Any, second: Any) -> Any:
    """Join two user contents, tool results first (stable otherwise)."""
    blocks = _blocks(first) + _blocks(second)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results and len(results) != len(blocks):
        blocks = results + [b for b in blocks if b.get("type") != "tool_result"]
    return blocks


class MessageNormalizer:
    """Builds the API message list from entries, one entry at a time."""

    __slots__ = (
        "_cache",
        "_edits",
        "_forgotten",
        "_joined",
        "_messages",
        "_names",
        "_renames",
        "_reply",
        "_reply_id",
        "_suspects",
        "_version",
    )

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._messages: list[dict[str, Any]] = []
        # The last assistant message and its response id: a record merges into it alone
        # (the walk back stops there), so no earlier id is kept.
        self._reply = -1
        self._reply_id: str | None = None
        # The name of every tool call (a repeated id renamed, model/tool_ids.py), and for each
        # assistant message that has calls, (id, name) of each in block order, while a repair
        # may still read it (`_forget_settled_calls`).
        self._names = ToolCallNames()
        self._renames: dict[int, list[tuple[str, str]]] = {}
        # Messages that may need a repair (checked when the list is read), and repaired
        # copies cached by the identity of the message they were made from.
        self._suspects: set[int] = set()
        self._cache: dict[int, tuple[dict[str, Any], dict[str, Any], tuple[Repair, ...]]] = {}
        self._joined: list[int] = []
        self._version = 0
        # (version, lowest index of the list that version changed) of the latest versions
        # that changed it: what `first_changed_since` answers from without comparing lists.
        self._edits: deque[tuple[int, int]] = deque(maxlen=_EDITS_KEPT)
        self._forgotten = 0
        """The latest version whose edit was forgotten: earlier ones are not answered."""
        self.extend(entries)

    def extend(self, entries: Iterable[Entry]) -> None:
        """Append several entries in order."""
        for entry in entries:
            self.append(entry)

    @property
    def version(self) -> int:
        """How many entries and messages were appended: equal versions, equal `messages`."""
        return self._version

    def first_changed_since(self, version: int) -> int | None:
        """A lower bound on the first index of `messages` that may differ from what it was at
        `version` (every message before it is the same object), or None when `version` is
        too old to tell (compare the lists then)."""
        if not self._forgotten <= version <= self._version:
            return None  # a version to come, or edits after it were forgotten
        edits = self._edits
        lowest = len(self._messages)
        for changed_in, index in reversed(edits):
            if changed_in <= version:
                break
            lowest = min(lowest, index)
        if self._messages and self._messages[0]["role"] == "assistant":
            return 0  # the list read opens with a user message made anew at each read
        # The one before a change may change with it: a repair of a message reads the calls
        # of the message before it, and the message that was last may have been stripped
        # or left out.
        return max(0, lowest - 1)

    def _changed(self, index: int) -> None:
        """Note that this version replaced or appended the message at `index`."""
        edits = self._edits
        if edits and edits[-1][0] == self._version:
            if index < edits[-1][1]:
                edits[-1] = (self._version, index)
        else:
            if len(edits) == edits.maxlen:
                self._forgotten = edits[0][0]
            edits.append((self._version, index))

    def append(self, entry: Entry) -> None:
        """Add one entry to the view."""
        self._version += 1
        kind = entry.type
        if kind == "user":
            self._add_user(entry.content)
        elif kind == "assistant":
            if not entry.is_synthetic_api_error:
                self._add_assistant(entry.content, entry.message_id)
        elif kind == "attachment":
            attachment = entry.attachment
            if attachment is not None:
                self._add_user(attachment_to_content(attachment))
        # progress, system and metadata records never reach the API.

    def append_message(self, message: MessageParam | dict[str, Any]) -> None:
        """Add a plain API message (role + content), merging like an entry would."""
        self._version += 1
        if message.get("role") == "assistant":
            self._add_assistant(message.get("content"), None, merge_adjacent=True)
        else:
            self._add_user(message.get("content"))

    def _add_user(self, content: Any) -> None:
        content = _sendable(content)
        if content is None:
            return
        messages = self._messages
        if messages and messages[-1]["role"] == "user":
            last = messages[-1]
            messages[-1] = {
                "role": "user",
                "content": _merge_user_content(last["content"], content),
            }
        else:
            messages.append({"role": "user", "content": content})
        self._changed(len(messages) - 1)
        self._check_answers(len(messages) - 1)

    def _add_assistant(
        self, content: Any, message_id: str | None, *, merge_adjacent: bool = False
    ) -> None:
        content = _sendable(content)
        if content is None:
            return
        blocks = _blocks(content)
        messages = self._messages
        if message_id is not None and not merge_adjacent:
            for index in range(len(messages) - 1, -1, -1):
                candidate = messages[index]
                if candidate["role"] == "assistant":
                    if self._reply_id == message_id:
                        self._merge_assistant(index, blocks)
                        return
                    break
                if not is_tool_result_only(candidate["content"]):
                    break
        if messages and messages[-1]["role"] == "assistant":
            # Plain message lists have no response ids: a run of assistant turns is one turn.
            # Two different responses in a row (a lost user line) are joined the same way.
            if not merge_adjacent:
                self._joined.append(len(messages) - 1)
            self._merge_assistant(len(messages) - 1, blocks)
            return
        messages.append({"role": "assistant", "content": content})
        self._changed(len(messages) - 1)
        self._forget_settled_calls(self._reply)
        self._reply, self._reply_id = len(messages) - 1, message_id
        self._names.new_reply()
        self._note_calls(len(messages) - 1, _tool_use_ids(blocks))

    def _merge_assistant(self, index: int, blocks: list[dict[str, Any]]) -> None:
        messages = self._messages
        messages[index] = {
            "role": "assistant",
            "content": _blocks(messages[index]["content"]) + blocks,
        }
        self._changed(index)
        self._note_calls(index, _tool_use_ids(blocks))
        if index + 1 < len(messages):
            self._check_answers(index + 1)

    def _forget_settled_calls(self, index: int) -> None:
        """Drop the calls noted for assistant message `index` once a later assistant message
        came: nothing merges into it or answers it any more, so only a repair of it or of
        the message after it reads them again, and both are marked by now if ever (a marked
        assistant message marks the one after it)."""
        if index >= 0 and index + 1 not in self._suspects:
            self._renames.pop(index, None)

    def _note_calls(self, index: int, ids: list[str]) -> None:
        if not ids:
            return
        named = self._renames.setdefault(index, [])
        for tool_id in ids:
            name = self._names.call(tool_id)
            named.append((tool_id, name))
            if name != tool_id:
                self._suspects.add(index)
                if index + 1 < len(self._messages):  # its answers change with it
                    self._suspects.add(index + 1)

    def _check_answers(self, index: int) -> None:
        """Mark user message `index` when it does not answer exactly the calls before it."""
        messages = self._messages
        if index - 1 in self._suspects and messages[index - 1]["role"] == "assistant":
            self._suspects.add(index)  # the calls it answers are being repaired
            return
        results = _content_ids(messages[index]["content"], "tool_result", "tool_use_id")
        calls: list[str] = []
        if index > 0 and messages[index - 1]["role"] == "assistant":
            calls = _content_ids(messages[index - 1]["content"], "tool_use", "id")
        if (
            set(calls) - set(results)
            or set(results) - set(calls)
            or len(results) != len(set(results))
            or (results and not _results_first(messages[index]["content"]))
        ):
            self._suspects.add(index)
        else:
            self._suspects.discard(index)

    @property
    def repairs(self) -> list[Repair]:
        """The repairs the current message list needs (see the module docstring)."""
        if not (self._suspects or self._joined) and (
            not self._messages or self._messages[0]["role"] != "assistant"
        ):
            return []  # nothing to repair: no copy of the list to find that out
        return self._repaired()[1]

    def _repaired(self) -> tuple[list[dict[str, Any]], list[Repair]]:
        messages: list[dict[str, Any]] = list(self._messages)
        repairs: list[Repair] = [
            Repair("joined-responses", index) for index in self._joined if index < len(messages)
        ]
        for index in sorted(self._suspects):
            if index >= len(messages):
                continue
            source = messages[index]
            cached = self._cache.get(index)
            if cached is not None and cached[0] is source:
                fixed, done = cached[1], cached[2]
            else:
                fixed, done = self._repair(index, messages)
                self._cache[index] = (source, fixed, done)
            messages[index] = fixed
            repairs.extend(done)
        if messages and messages[0]["role"] == "assistant":
            messages.insert(0, {"role": "user", "content": MISSING_START_TEXT})
            repairs = [Repair(r.kind, r.index + 1, r.tool_use_ids) for r in repairs]
            repairs.insert(0, Repair("missing-first-user", 0))
        return messages, repairs

    def _repair(
        self, index: int, messages: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], tuple[Repair, ...]]:
        message = messages[index]
        blocks = _blocks(message["content"])
        if message["role"] == "assistant":
            names = iter(self._renames.get(index, ()))
            renamed_blocks: list[dict[str, Any]] = []
            renamed: list[str] = []
            for block in blocks:
                if block.get("type") == "tool_use":
                    tool_id, name = next(names, (str(block.get("id")), str(block.get("id"))))
                    if name != tool_id:
                        block = {**block, "id": name}
                        renamed.append(tool_id)
                renamed_blocks.append(block)
            if not renamed:
                return message, ()
            return {"role": "assistant", "content": renamed_blocks}, (
                Repair("duplicate-tool-use", index, tuple(renamed)),
            )
        named: list[tuple[str, str]] = []
        if index > 0 and messages[index - 1]["role"] == "assistant":
            named = self._renames.get(index - 1, [])
        calls = [name for _, name in named]
        blocks = name_results(blocks, named)
        answered: set[str] = set()
        results: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        orphans: list[str] = []
        for block in blocks:
            if block.get("type") != "tool_result":
                others.append(block)
                continue
            tool_id = str(block.get("tool_use_id"))
            if tool_id in calls and tool_id not in answered:
                answered.add(tool_id)
                results.append(block)
            elif tool_id in answered:
                orphans.append(tool_id)  # a repeat of a result already given: dropped
            else:
                orphans.append(tool_id)
                others.insert(0, _result_as_text(block))
        missing = [tool_id for tool_id in calls if tool_id not in answered]
        done: list[Repair] = []
        if missing:
            results = [*results, *(interrupted_result(i) for i in missing)]
            done.append(Repair("missing-tool-result", index, tuple(missing)))
        if orphans:
            done.append(Repair("orphan-tool-result", index, tuple(orphans)))
        if results and not _results_first(message["content"]):
            ordered = tuple(str(b.get("tool_use_id")) for b in results)
            done.append(Repair("tool-result-order", index, ordered))
        content = results + others
        if not content:
            content = [{"type": "text", "text": "[An orphaned tool result was removed.]"}]
        return {"role": "user", "content": content}, tuple(done)

    @property
    def messages(self) -> list[MessageParam]:
        """The API messages so far, repaired (a trailing thinking-only assistant message left
        out)."""
        if self._suspects or self._joined or (
            self._messages and self._messages[0]["role"] == "assistant"
        ):
            messages = self._repaired()[0]
        else:
            messages = list(self._messages)
        if messages and _thinking_only(messages[-1]):
            messages = messages[:-1]
        if (
            messages
            and messages[-1]["role"] == "assistant"
            and _ends_with_whitespace(messages[-1]["content"])
        ):
            messages = [*messages[:-1], _stripped_end(messages[-1])]
        return cast(list[MessageParam], messages)

    def borrowed_messages(self) -> list[MessageParam]:
        """`messages` without the copy when nothing needs repairing or trimming: the view's
        own list, to be read before the next append and never edited or kept."""
        # A copy touches every message's reference count: at thousands of messages that is a
        # large share of a turn, for a list a caller such as microcompaction only reads.
        kept = self._messages
        if self._suspects or self._joined or (kept and kept[0]["role"] == "assistant"):
            return self.messages
        last = kept[-1] if kept else None
        if last is not None and (
            _thinking_only(last)
            or (last["role"] == "assistant" and _ends_with_whitespace(last["content"]))
        ):
            return self.messages
        return cast(list[MessageParam], kept)

    def last(self) -> MessageParam | None:
        """The last of `messages`, without copying the list (None when there is none)."""
        if self._suspects or self._joined or (
            self._messages and self._messages[0]["role"] == "assistant"
        ):
            repaired = self.messages
            return repaired[-1] if repaired else None
        kept = self._messages
        last = kept[-1] if kept else None
        if last is not None and _thinking_only(last):
            last = kept[-2] if len(kept) > 1 else None
        if last is not None and last["role"] == "assistant" and _ends_with_whitespace(
            last["content"]
        ):
            last = _stripped_end(last)
        return cast(MessageParam, last)

    def replace_settled(self, old: object, new: object, index: int) -> bool:
        """Hold `new` in place of message `old`, the caller's settled form of it (the same
        message, packed: `caching/husks.py`), when `old` is this view's own message at `index`
        of `messages` (or of the list before a missing first user message is put back), needs
        no repair and is not one of the last two (which an append may still merge into or
        read). Whether it was replaced. The version stays: `messages` means the same."""
        kept = self._messages
        for at in (index, index - 1):
            if 0 <= at < len(kept) - 2 and kept[at] is old:
                if at in self._suspects:
                    return False
                kept[at] = cast(dict[str, Any], new)
                return True
        return False

    def __len__(self) -> int:
        return len(self._messages)


def _thinking_only(message: Mapping[str, Any]) -> bool:
    """An assistant message of thinking blocks alone (left out while its text is to come)."""
    if message["role"] != "assistant":
        return False
    blocks = _blocks(message["content"])
    return bool(blocks) and all(b.get("type") in _THINKING_TYPES for b in blocks)


def normalize_messages(entries: Iterable[Entry]) -> list[MessageParam]:
    """The API message list for these entries (see the module docstring for the rules)."""
    return MessageNormalizer(entries).messages


def normalize_plain_messages(
    messages: Iterable[MessageParam | dict[str, Any]],
) -> list[MessageParam]:
    """Normalize a plain Anthropic message list: merge same-role runs, drop empty messages."""
    normalizer = MessageNormalizer()
    for message in messages:
        normalizer.append_message(message)
    return normalizer.messages


def validate_request(messages: Sequence[MessageParam | dict[str, Any]]) -> None:
    """Raise InvalidRequestError if the Anthropic Messages API would reject these messages.

    Rules checked, each named in the error with the index of the offending message:
    `non-empty` (at least one message), `role` (user or assistant), `first-message-user`,
    `alternation` (roles alternate), `empty-content` (no empty content, no empty or
    whitespace-only text block), `duplicate-tool-use-id`, `invalid-tool-use-id` (letters,
    digits, `_` and `-` only), `tool-use-unanswered` (every tool_use is answered by a
    tool_result in the next message, which must be a user message), `orphan-tool-result`
    (every tool_result answers a tool_use of the message just before),
    `duplicate-tool-result` (one result per tool_use), `tool-result-order` (tool_result
    blocks come before any other block), `tool-use-in-user-message`, `trailing-whitespace`
    (a request that ends with an assistant message may not end it with whitespace) and
    `invalid-block` (a content item that is not an object, a tool_use input that is not one).
    """
    if not messages:
        raise InvalidRequestError("non-empty", None, "a request needs at least one message")
    seen_tool_ids: set[str] = set()
    previous_tool_ids: set[str] = set()
    previous_role: str | None = None
    for index, message in enumerate(messages):
        previous_tool_ids = _check_message(
            index, message, seen_tool_ids, previous_tool_ids, previous_role
        )
        previous_role = message.get("role")
    _check_end(messages, previous_tool_ids, previous_role)


def _check_message(
    index: int,
    message: MessageParam | dict[str, Any],
    seen_tool_ids: set[str],
    previous_tool_ids: set[str],
    previous_role: str | None,
) -> set[str]:
    """`validate_request`'s rules for one message, given what came before it (its tool_use
    ids are added to `seen_tool_ids`); returns the ids the next message must answer."""
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise InvalidRequestError(
            "role", index, f"role must be user or assistant, not {role!r}"
        )
    if index == 0 and role != "user":
        raise InvalidRequestError(
            "first-message-user", 0, "the first message must be a user message"
        )
    if role == previous_role:
        raise InvalidRequestError(
            "alternation", index, f"two {role} messages in a row (messages must alternate)"
        )
    content = message.get("content")
    if isinstance(content, list) and not all(isinstance(b, dict) for b in content):
        raise InvalidRequestError(
            "invalid-block", index, "every content block must be an object"
        )
    blocks = _blocks(content)
    if not blocks:
        raise InvalidRequestError("empty-content", index, "message content is empty")
    tool_ids: set[str] = set()
    answered: set[str] = set()
    seen_other = False
    for position, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text" and not str(block.get("text", "")).strip():
            raise InvalidRequestError(
                "empty-content", index, f"text block {position} is empty or whitespace only"
            )
        if kind == "tool_use":
            if role != "assistant":
                raise InvalidRequestError(
                    "tool-use-in-user-message",
                    index,
                    "tool_use blocks belong in assistant messages",
                )
            tool_id = str(block.get("id"))
            if tool_id in seen_tool_ids:
                raise InvalidRequestError(
                    "duplicate-tool-use-id", index, f"tool_use id {tool_id} appears twice"
                )
            if not isinstance(block.get("id"), str) or not TOOL_USE_ID.fullmatch(tool_id):
                raise InvalidRequestError(
                    "invalid-tool-use-id",
                    index,
                    f"tool_use id {tool_id[:80]!r} must be letters, digits, _ or - only",
                )
            if not isinstance(block.get("input"), dict):
                raise InvalidRequestError(
                    "invalid-block", index, f"the input of tool_use {tool_id} is not an object"
                )
            seen_tool_ids.add(tool_id)
            tool_ids.add(tool_id)
        elif kind == "tool_result":
            tool_use_id = str(block.get("tool_use_id"))
            if role != "user":
                raise InvalidRequestError(
                    "orphan-tool-result", index, "tool_result blocks belong in user messages"
                )
            if tool_use_id not in previous_tool_ids:
                raise InvalidRequestError(
                    "orphan-tool-result",
                    index,
                    f"tool_result {tool_use_id} answers no tool_use in the previous message",
                )
            if seen_other:
                raise InvalidRequestError(
                    "tool-result-order",
                    index,
                    f"tool_result {tool_use_id} follows other content; tool results go first",
                )
            if tool_use_id in answered:
                raise InvalidRequestError(
                    "duplicate-tool-result",
                    index,
                    f"tool_use {tool_use_id} has two tool_result blocks (one is allowed)",
                )
            answered.add(tool_use_id)
        else:
            seen_other = True
    if previous_tool_ids - answered:
        missing = ", ".join(sorted(previous_tool_ids - answered))
        raise InvalidRequestError(
            "tool-use-unanswered",
            index - 1,
            f"tool_use {missing} has no tool_result in the next message",
        )
    return tool_ids if role == "assistant" else set()


def _check_end(
    messages: Sequence[MessageParam | dict[str, Any]],
    previous_tool_ids: set[str],
    previous_role: str | None,
) -> None:
    """`validate_request`'s rules for the end of the request."""
    if previous_tool_ids:
        missing = ", ".join(sorted(previous_tool_ids))
        raise InvalidRequestError(
            "tool-use-unanswered",
            len(messages) - 1,
            f"tool_use {missing} has no tool_result (the request ends after it)",
        )
    if previous_role == "assistant" and _ends_with_whitespace(messages[-1].get("content")):
        raise InvalidRequestError(
            "trailing-whitespace",
            len(messages) - 1,
            "the final assistant message (a prefill) ends with whitespace",
        )




class RequestValidator:
    """`validate_request` for successive requests that grow: a request that begins with the
    messages of the last one it passed (the same objects, as a session's view hands them on)
    is checked from its first new message, so a long run checks each message once rather
    than once per call. A message changed in place is not seen again: the messages handed
    in must be replaced, not edited, when they change (as `MessageNormalizer` does)."""

    def __init__(self) -> None:
        self._messages: list[Any] = []
        """The messages of the last request passed (this validator's own list)."""
        self._expected: list[set[str]] = []
        """After each of them, the tool_use ids the next message must answer."""
        self._seen: set[str] = set()

    def check(self, messages: Sequence[MessageParam | dict[str, Any]]) -> None:
        """Raise InvalidRequestError as `validate_request` does for these messages."""
        if not messages:
            raise InvalidRequestError("non-empty", None, "a request needs at least one message")
        same = shared_prefix_length_own(messages, self._messages)
        for expected in self._expected[same:]:
            self._seen -= expected  # the tool_use ids of the assistant messages taken away
        del self._messages[same:]
        del self._expected[same:]
        try:
            previous = self._expected[-1] if same else set()
            role = self._messages[-1].get("role") if same else None
            for index in range(same, len(messages)):
                message = messages[index]
                previous = _check_message(index, message, self._seen, previous, role)
                role = message.get("role")
                self._messages.append(message)
                self._expected.append(previous)
            _check_end(messages, previous, role)
        except InvalidRequestError:
            self._messages, self._expected, self._seen = [], [], set()
            raise


def _stripped_end(message: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant message whose last text block has its trailing whitespace removed (the
    API refuses a request that ends so)."""
    blocks = _blocks(message["content"])
    text = str(blocks[-1].get("text", "")).rstrip()
    return {"role": "assistant", "content": [*blocks[:-1], {**blocks[-1], "text": text}]}


def _ends_with_whitespace(content: Any) -> bool:
    """Whether content's last block is text ending with whitespace."""
    blocks = _blocks(content)
    if not blocks or blocks[-1].get("type") != "text":
        return False
    text = str(blocks[-1].get("text", ""))
    return text != text.rstrip()
