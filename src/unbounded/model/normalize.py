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

`MessageNormalizer` does this incrementally: appending an entry touches only the tail, so a
turn costs O(new content), not O(history).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from unbounded.errors import InvalidRequestError
from unbounded.model.attachments import attachment_to_content
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry

_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _is_blank_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _sendable(content: Any) -> Any:
    """Content without whitespace-only text blocks, which the API rejects ("\n\n" lines
    Claude Code writes while streaming); None when nothing is left."""
    if isinstance(content, str):
        return content if content.strip() else None
    blocks = _blocks(content)
    kept = [b for b in blocks if not _is_blank_text(b)]
    if not kept:
        return None
    return kept if len(kept) != len(blocks) or not isinstance(content, list) else content


def _is_tool_result_only(content: Any) -> bool:
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

    __slots__ = ("_ids", "_messages")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._messages: list[dict[str, Any]] = []
        # Response id of each assistant message (None for user messages), for merging.
        self._ids: list[str | None] = []
        self.extend(entries)

    def extend(self, entries: Iterable[Entry]) -> None:
        """Append several entries in order."""
        for entry in entries:
            self.append(entry)

    def append(self, entry: Entry) -> None:
        """Add one entry to the view."""
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
            return
        messages.append({"role": "user", "content": content})
        self._ids.append(None)

    def _add_assistant(
        self, content: Any, message_id: str | None, *, merge_adjacent: bool = False
    ) -> None:
        content = _sendable(content)
        if content is None:
            return
        blocks = _blocks(content)
        messages = self._messages
        if merge_adjacent and messages and messages[-1]["role"] == "assistant":
            # Plain message lists have no response ids: a run of assistant turns is one turn.
            merged = _blocks(messages[-1]["content"]) + blocks
            messages[-1] = {"role": "assistant", "content": merged}
            return
        if message_id is not None:
            for index in range(len(messages) - 1, -1, -1):
                candidate = messages[index]
                if candidate["role"] == "assistant":
                    if self._ids[index] == message_id:
                        merged = _blocks(candidate["content"]) + blocks
                        messages[index] = {"role": "assistant", "content": merged}
                        return
                    break
                if not _is_tool_result_only(candidate["content"]):
                    break
        messages.append({"role": "assistant", "content": content})
        self._ids.append(message_id)

    @property
    def messages(self) -> list[MessageParam]:
        """The API messages so far (a trailing thinking-only assistant message left out)."""
        messages = self._messages
        if messages and messages[-1]["role"] == "assistant":
            blocks = _blocks(messages[-1]["content"])
            if blocks and all(b.get("type") in _THINKING_TYPES for b in blocks):
                return cast(list[MessageParam], messages[:-1])
        return cast(list[MessageParam], list(messages))

    def __len__(self) -> int:
        return len(self._messages)


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
    whitespace-only text block), `duplicate-tool-use-id`, `tool-use-unanswered` (every
    tool_use is answered by a tool_result in the next message, which must be a user message),
    `orphan-tool-result` (every tool_result answers a tool_use of the message just before)
    `tool-result-order` (tool_result blocks come before any other block),
    `tool-use-in-user-message` and `invalid-block` (a content item that is not an object).
    """
    if not messages:
        raise InvalidRequestError("non-empty", None, "a request needs at least one message")
    seen_tool_ids: set[str] = set()
    previous_tool_ids: set[str] = set()
    previous_role: str | None = None
    for index, message in enumerate(messages):
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
        previous_tool_ids = tool_ids if role == "assistant" else set()
        previous_role = role
    if previous_tool_ids:
        missing = ", ".join(sorted(previous_tool_ids))
        raise InvalidRequestError(
            "tool-use-unanswered",
            len(messages) - 1,
            f"tool_use {missing} has no tool_result (the request ends after it)",
        )
