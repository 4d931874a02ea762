"""A drop-in around the official Anthropic client: the caller's code does not change.

    client = wrap(anthropic.Anthropic(), session_folder="~/.myagent/session-1")
    reply = client.messages.create(model=..., max_tokens=..., system=..., tools=...,
                                   messages=messages)          # a plain SDK `Message`

Every `messages.create(...)` / `messages.stream(...)` call runs the unbounded pipeline of one
`Session`:

1. **What is new.** The caller may keep sending the whole conversation (the usual SDK
   pattern) or only the new messages; both work. Messages are compared by content with the
   conversation the session holds (cache markers, `None` fields and SDK objects versus dicts
   make no difference; an echoed assistant reply also matches with its thinking left out),
   and only what the session does not hold yet is appended: the known prefix of a full
   list, the part after an overlap (a sliding window), or everything when nothing is known.
   A list that starts like the known conversation and then differs (an edited or rewound
   history) is refused with a `ConfigError`: the transcript is append-only. A list that
   ends where the conversation ended before its last reply (the whole list, or a window of
   two messages or more) asks again: the last reply is discarded (`LastReplyDiscarded`) and
   a new one requested. `history="full"` or `"new"` fixes the reading for callers that
   always do one thing. Only the messages a call adds to the previous call's list are
   read (the repeated ones are recognised as the same objects, or equal ones): a message
   dict edited in place after it was sent is not seen; send a new dict to change one.
   **Side calls.** A call that does not continue the conversation (a title, a classifier,
   a judge) goes to the SDK exactly as given, and nothing is recorded (`SideCallPassed`):
   one with a different `system`; one that shares no message with the conversation when
   the caller has been sending whole histories, or when its model or tools differ; one
   that would leave the last reply's tool calls unanswered.
2. **Cache-safe parameters.** `model`, `system`, `tools`, `thinking` and `max_tokens` become
   the session's `SessionConfig` (what the compaction fork repeats to share the prompt
   cache). Changing one after a request went out is allowed, and emits `CacheParamsChanged`
   because it re-writes the cache. Every other keyword (`temperature`, `tool_choice`,
   `metadata`, `stop_sequences`, `extra_headers`, `timeout`…) is passed to the SDK as given.
3. **The request** is `Session.prepare()`'s: auto-compaction, microcompaction, cache
   breakpoints. It goes out through the caller's own client.
4. **The reply** is recorded (its usage anchors the token count) and returned unchanged: the
   SDK's `Message`, the SDK's event stream (`stream=True`), or the SDK's `MessageStream` from
   `messages.stream(...)`. A streamed reply is recorded once it is complete.
5. **Prompt too long**: one reactive compaction, then the call is retried once; a second
   refusal reaches the caller as the SDK's own exception, like every other API error.

**Recall.** When the caller's tools are in use the request also offers the session's `recall`
tool (`Policy.recall_enabled`). A non-streamed reply that calls only `recall` is answered
here and the model asked again (at most `MAX_RECALL_ROUNDS` times), so the caller receives
the reply that follows; those rounds stay in the transcript (marked `isRecallRound`) and the
caller never has to send them back. A `recall` call the caller does see (in a streamed reply,
or beside its own tool calls) may be left unanswered or answered with anything: the wrapper
puts the session's answer in the caller's next tool results.

Compaction summaries come from the same client and model by default (the cache-sharing fork,
falling back to the offline extractive summarizer after repeated failures); pass
`summarizer="extractive"` or any `Provider` to change that. One wrapped client is one
conversation: calls on it are sequential, like the turns of a conversation. Everything else
on the client (`models`, `beta`, `messages.count_tokens`…) is the SDK's, untouched;
`close()` (or `with` / `async with`) releases the session folder's lock and the SDK client.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import orjson

from unbounded.blocking import BlockingRunner
from unbounded.catalog import ModelTable, load_model_table
from unbounded.errors import ConfigError
from unbounded.events import Event, EventSink, emit
from unbounded.integrations._support import as_session, compact_after_prompt_too_long
from unbounded.model.entries import Entry
from unbounded.model.prefix import shared_prefix_length
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy, compute_thresholds
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.providers.base import ModelResponse, PromptTooLongError, Provider
from unbounded.recall.schema import RECALL_TOOL_NAME
from unbounded.session import Session, SessionConfig, SessionStatus, SyncSession

if TYPE_CHECKING:
    import anthropic
    from anthropic.lib.streaming import AsyncMessageStream, MessageStream
    from anthropic.types import Message

HistoryMode = Literal["auto", "full", "new"]
"""How `messages=` is read: detected (auto), always the whole conversation, or only new ones."""

SummarizerChoice = Literal["client", "extractive"]
"""`client`: the wrapped client and the session's model; `extractive`: offline, no model."""

CACHE_SAFE_PARAMETERS = ("model", "system", "tools", "thinking", "max_tokens")
"""Keywords that key the prompt cache: they go into the session's `SessionConfig`."""
RECALL_ROUND_FIELD = "isRecallRound"
"""Marks the records of a recall round the wrapper answered itself (never sent back by the
caller, so left out when the caller's messages are matched against the transcript)."""
MAX_RECALL_ROUNDS = 3
"""Recall-only replies answered in a row before the reply goes to the caller as it is."""


@dataclass(frozen=True, slots=True)
class CacheParamsChanged(Event):
    """A cache-safe parameter changed after a request went out: the prompt cache is re-written."""

    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SideCallPassed(Event):
    """A call that does not continue the conversation (a title, a classifier, a judge) went to
    the SDK as given: nothing recorded, nothing compacted."""

    reason: str
    messages: int


@dataclass(frozen=True, slots=True)
class LastReplyDiscarded(Event):
    """The caller asked again with the list that preceded the last reply (regenerate, or a
    retry after a crash): that reply left the conversation and a new one is asked for."""

    message_id: str | None


# --------------------------------------------------------------------------- content matching


_BLOCK_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "tool_use": ("id", "name", "input"),
    "server_tool_use": ("id", "name", "input"),
    "tool_result": ("tool_use_id", "content", "is_error"),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "image": ("source",),
    "document": ("source",),
}


def _plain(value: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON-ready data; other values unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return value


def _block_dict(block: Any) -> dict[str, Any]:
    data = _plain(block)
    if isinstance(data, str):
        return {"type": "text", "text": data}
    if not isinstance(data, Mapping):
        raise ConfigError(f"a content block must be a dict or an SDK block, not {type(block)}")
    return dict(data)


def stored_content(content: Any) -> str | list[dict[str, Any]]:
    """Message content as the session stores it: plain dicts, caller cache markers removed."""
    if isinstance(content, str):
        return content
    if content is None:
        return []
    blocks: list[dict[str, Any]] = []
    for block in content:
        data = {k: v for k, v in _block_dict(block).items() if k != "cache_control"}
        if data.get("type") == "tool_result" and isinstance(data.get("content"), list):
            data["content"] = [
                {k: v for k, v in _block_dict(b).items() if k != "cache_control"}
                for b in data["content"]
            ]
        blocks.append(data)
    return blocks


def _canonical_block(block: Any) -> dict[str, Any]:
    data = _block_dict(block)
    kind = data.get("type")
    keys = _BLOCK_KEYS.get(str(kind))
    if keys is None:
        return {k: v for k, v in data.items() if k != "cache_control" and v is not None}
    out: dict[str, Any] = {"type": kind}
    for key in keys:
        value = data.get(key)
        if value is None or (key == "is_error" and value is False):
            continue
        if key == "content":
            value = _canonical_content(value)
        out[key] = value
    return out


def _canonical_content(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_canonical_block(b) for b in content or []]


def _canonical_system(system: Any) -> list[dict[str, Any]]:
    """A system prompt for comparison: text blocks, cache markers and None fields left out."""
    if system is None:
        return []
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return [_canonical_block(b) for b in system]


def _canonical_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "cache_control"} for t in tools]


def _digest(value: Any) -> str:
    try:
        text = orjson.dumps(value, option=_DIGEST_OPTIONS, default=str)
    except TypeError:  # what orjson refuses (an integer over 64 bits): the slow encoder
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        ).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()


_DIGEST_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


@dataclass(frozen=True, slots=True)
class MessagePrint:
    """A message's identity for prefix detection: role, exact content, and (for replies) the
    text and tool calls alone, so an echo without its thinking blocks still matches."""

    role: str
    exact: str
    loose: str

    def matches(self, other: MessagePrint) -> bool:
        """The same message, allowing an assistant echo that left thinking out."""
        if self.role != other.role:
            return False
        return self.exact == other.exact or (self.role == "assistant" and self.loose == other.loose)


def message_print(
    role: str, content: Any, recall_ids: frozenset[str] | set[str] = frozenset()
) -> MessagePrint:
    """The print of one message (any content shape the SDK accepts). Calls of `recall` and
    the results of the `recall_ids` are left out: the wrapper answers them, so the caller's
    copy and the transcript may differ there."""
    return _print_of_canonical(role, _canonical_content(content), recall_ids)


def _print_of_canonical(
    role: str, canonical: list[dict[str, Any]], recall_ids: frozenset[str] | set[str]
) -> MessagePrint:
    """`message_print` of content already canonicalised (`_canonical_content`)."""
    blocks = [
        b
        for b in canonical
        if not (b["type"] == "tool_use" and b.get("name") == RECALL_TOOL_NAME)
        and not (b["type"] == "tool_result" and b.get("tool_use_id") in recall_ids)
    ]
    loose = [
        ("text", str(b.get("text", "")).strip())
        if b["type"] == "text"
        else ("tool_use", str(b.get("id")))
        for b in blocks
        if b["type"] in ("text", "tool_use")
    ]
    return MessagePrint(role, _digest([role, blocks]), _digest([role, loose]))


def _message_fields(message: Any) -> tuple[str, Any]:
    data = _plain(message)
    if not isinstance(data, Mapping) or data.get("role") not in ("user", "assistant"):
        raise ConfigError(
            "every message must be a dict with role 'user' or 'assistant' and a content"
        )
    content = data.get("content")
    if isinstance(content, list):  # SDK blocks dumped once here, not again by each reader
        content = [_plain(block) for block in content]
    return str(data["role"]), content


def conversation_prints(entries: Sequence[Entry]) -> list[MessagePrint]:
    """Prints of the messages a caller sent or received, from a session's transcript.

    Records the pipeline wrote itself (compaction boundaries and summaries, attachments, meta
    messages, recall rounds it answered) are not the caller's and are left out; consecutive
    lines of one response are one message.
    """
    recall_ids = recall_call_ids(entries)
    prints: list[MessagePrint] = []
    last_id: str | None = None
    last_blocks: list[Any] = []
    for entry in entries:
        if entry.type not in ("user", "assistant") or entry.is_sidechain:
            last_id = None
            continue
        if entry.is_compact_summary or entry.is_meta or entry.is_visible_in_transcript_only:
            last_id = None
            continue
        if entry.is_synthetic_api_error or entry.data.get(RECALL_ROUND_FIELD):
            continue
        if entry.type == "assistant":
            message_id = entry.message_id
            content = entry.content
            blocks = [content] if isinstance(content, str) else list(content)
            if message_id is not None and message_id == last_id and prints:
                last_blocks = [*last_blocks, *blocks]
                prints[-1] = message_print("assistant", last_blocks)
                continue
            last_id, last_blocks = message_id, blocks
            prints.append(message_print("assistant", blocks))
            continue
        last_id = None
        prints.append(message_print("user", entry.content, recall_ids))
    return prints


def recall_call_ids(entries: Sequence[Entry]) -> set[str]:
    """Ids of the `recall` calls in these records."""
    return {
        str(block.get("id"))
        for entry in entries
        if entry.type == "assistant" and isinstance(entry.content, list)
        for block in entry.content
        if block.get("type") == "tool_use" and block.get("name") == RECALL_TOOL_NAME
    }


@dataclass(frozen=True, slots=True)
class Continuation:
    """How a caller's `messages` relate to the recorded conversation."""

    start: int
    """Index of the first message the session does not hold yet."""
    prints: list[MessagePrint]
    relation: Literal["continues", "window", "retry", "unrelated", "new"]
    """`continues`: starts with the whole conversation; `window`: starts with its last
    messages; `retry`: the conversation minus its last reply (ask again); `unrelated`: shares
    no message with it; `new`: the caller said every message is new (`history="new"`)."""


def _recall_calls(fields: Sequence[tuple[str, Any]]) -> set[str]:
    """Ids of the `recall` calls in these messages."""
    ids: set[str] = set()
    for role, content in fields:
        if role == "assistant" and not isinstance(content, str):
            ids |= _recall_calls_in(_canonical_content(content))
    return ids


def _recall_calls_in(canonical: list[dict[str, Any]]) -> set[str]:
    """Ids of the `recall` calls among canonical blocks."""
    return {
        str(block.get("id"))
        for block in canonical
        if block["type"] == "tool_use" and block.get("name") == RECALL_TOOL_NAME
    }


def new_messages(
    messages: Sequence[Any],
    known: Sequence[MessagePrint],
    mode: HistoryMode = "auto",
    recall_ids: frozenset[str] | set[str] = frozenset(),
    *,
    prints: list[MessagePrint] | None = None,
    verified: int = 0,
) -> Continuation:
    """How a caller's list continues the known conversation (see `Continuation`).

    Raises ConfigError when the list rewrites the known conversation (starts like it, then
    differs), or, with `history="full"`, when it does not start with it. Results of the
    `recall_ids` (and of recall calls in the list) are left out of the comparison. `prints`:
    the messages' prints when the caller has them already; `verified`: how many of them are
    known to match the known conversation's first prints (checked by an earlier call).
    """
    if prints is None:
        fields = [_message_fields(m) for m in messages]
        ids = set(recall_ids) | _recall_calls(fields)
        prints = [message_print(role, content, ids) for role, content in fields]
    if mode == "new":
        return Continuation(0, prints, "new")
    count = len(known)
    if not count:
        return Continuation(0, prints, "continues")
    if len(prints) >= count and all(
        prints[i].matches(known[i]) for i in range(min(verified, count), count)
    ):
        return Continuation(count, prints, "continues")
    if _is_retry(prints, known, full=True):
        return Continuation(len(prints), prints, "retry")
    if mode == "full":
        if prints and prints[0].matches(known[0]):
            raise ConfigError(_divergence(prints, known))
        return Continuation(0, prints, "unrelated")
    for overlap in range(min(len(prints), count), 0, -1):
        start = count - overlap
        if all(prints[j].matches(known[start + j]) for j in range(overlap)):
            return Continuation(overlap, prints, "window")
    if _is_retry(prints, known, full=False):
        return Continuation(len(prints), prints, "retry")
    if len(prints) > 1 and prints[0].matches(known[0]):
        raise ConfigError(_divergence(prints, known))
    return Continuation(0, prints, "unrelated")


def _is_retry(prints: Sequence[MessagePrint], known: Sequence[MessagePrint], *, full: bool) -> bool:
    """The list ends where the conversation ended before its last reply: the whole of it
    (`full`), or a window of at least two messages (one repeated prompt alone is a new
    message: users do say "yes" twice)."""
    count, size = len(known), len(prints)
    if not prints or known[-1].role != "assistant" or size > count - 1:
        return False
    if full and size != count - 1:
        return False
    if not full and size < 2:
        return False
    start = count - 1 - size
    return all(prints[j].matches(known[start + j]) for j in range(size))


def _divergence(prints: Sequence[MessagePrint], known: Sequence[MessagePrint]) -> str:
    index = next(
        (i for i in range(min(len(prints), len(known))) if not prints[i].matches(known[i])),
        min(len(prints), len(known)),
    )
    where = (
        f"messages[{index}] differs from the conversation this session recorded"
        if index < len(prints)
        else f"messages ends after {len(prints)} messages, before the recorded conversation"
    )
    return (
        f"{where} ({len(known)} messages): the session's transcript is append-only, so an "
        "edited or rewound history cannot continue it. Start a new session, or send only the "
        "new messages (wrap(..., history='new'))"
    )


# --------------------------------------------------------------------------- caller cache markers


def _marker_ttl(block: Any) -> str | None:
    if block is None:
        return None
    # A dict's marker read in place; anything else as `_block_dict` reads it (SDK blocks dumped).
    marker = (block if isinstance(block, Mapping) else _block_dict(block)).get("cache_control")
    if not isinstance(marker, Mapping):
        return None
    return "1h" if marker.get("ttl") == "1h" else "5m"


def _message_markers(messages: Sequence[Any]) -> list[str]:
    """The TTLs of the cache markers a caller put on message blocks."""
    found: list[str] = []
    for message in messages:
        data = _plain(message)
        content = data.get("content") if isinstance(data, Mapping) else None
        if isinstance(content, str) or not content:
            continue
        for block in content:
            ttl = _marker_ttl(block)
            if ttl is not None:
                found.append(ttl)
    return found


def _longest_ttl(ttls: Sequence[str]) -> str | None:
    if not ttls:
        return None
    return "1h" if "1h" in ttls else "5m"


def _with_ttl(marker: Mapping[str, Any], ttl: str) -> dict[str, Any]:
    out = {k: v for k, v in marker.items() if k != "ttl"}
    if ttl == "1h":
        out["ttl"] = "1h"
    return out


def honor_caller_markers(
    request: ProviderRequest,
    system: Any,
    tools: Sequence[Mapping[str, Any]],
    messages_ttl: str | None,
    *,
    marked_messages: Sequence[int] | None = None,
) -> ProviderRequest:
    """The prepared request with the caller's cache settings put back (see the module doc).

    `marked_messages`: the only messages that can carry a marker (the plan's), when known;
    otherwise every message is looked at.

    A system block the caller marked keeps the caller's marker as given (TTL and scope); the
    tools marker takes the longest TTL the caller put on a tool, the message markers the
    longest one put on a message. The planner already kept the request within the API's 4
    markers (the caller's system markers count among them). Last, the API's rule that a
    1-hour marker never follows a 5-minute one: markers before the last 1-hour one are raised
    to 1 hour. The request is copied where it changes; the input is untouched.
    """
    body: dict[str, Any] = dict(cast(Mapping[str, Any], request))
    # Every marked block: [where, the block sent, the block to send]; lists are copied below
    # only where a block changes.
    slots: list[list[Any]] = []
    sent_tools = body.get("tools")
    if isinstance(sent_tools, list) and sent_tools:
        last = sent_tools[-1]
        if isinstance(last.get("cache_control"), Mapping):
            wanted = _longest_ttl([t for t in (_marker_ttl(x) for x in tools) if t is not None])
            new = last
            if wanted is not None:
                new = {**last, "cache_control": _with_ttl(last["cache_control"], wanted)}
            slots.append([("tools", len(sent_tools) - 1), last, new])
    sent_system = body.get("system")
    if isinstance(sent_system, list) and sent_system:
        given = system if isinstance(system, list) else []
        for index, block in enumerate(sent_system):
            if not isinstance(block.get("cache_control"), Mapping):
                continue
            own = _block_dict(given[index]).get("cache_control") if index < len(given) else None
            new = {**block, "cache_control": dict(own)} if isinstance(own, Mapping) else block
            slots.append([("system", index), block, new])
    sent_messages = body.get("messages")
    if isinstance(sent_messages, list):
        where = range(len(sent_messages)) if marked_messages is None else sorted(marked_messages)
        for index in where:
            if index >= len(sent_messages):
                continue
            content = sent_messages[index].get("content")
            if not isinstance(content, list):
                continue
            for position, block in enumerate(content):
                if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping):
                    new = block
                    if messages_ttl is not None:
                        marker = _with_ttl(block["cache_control"], messages_ttl)
                        new = {**block, "cache_control": marker}
                    slots.append([("messages", index, position), block, new])
    ttls = [_marker_ttl(slot[2]) for slot in slots]
    if "1h" in ttls:
        last_long = max(i for i, ttl in enumerate(ttls) if ttl == "1h")
        for slot in slots[:last_long]:
            block = slot[2]
            if _marker_ttl(block) != "1h":
                slot[2] = {**block, "cache_control": _with_ttl(block["cache_control"], "1h")}
    _put_back(body, [(slot[0], slot[2]) for slot in slots if slot[2] is not slot[1]])
    return cast(ProviderRequest, body)


def _put_back(body: dict[str, Any], changed: Sequence[tuple[tuple[Any, ...], Any]]) -> None:
    """Write the changed marked blocks into `body`, copying the lists (and messages) on the
    way to each one once: the request `body` was copied from stays as it was."""
    copied: dict[Any, list[Any]] = {}
    for where, block in changed:
        kind = where[0]
        if kind != "messages":
            if kind not in copied:
                copied[kind] = body[kind] = list(body[kind])
            copied[kind][where[1]] = block
            continue
        if "messages" not in copied:
            copied["messages"] = body["messages"] = list(body["messages"])
        messages, index = copied["messages"], where[1]
        if index not in copied:
            message = messages[index]
            copied[index] = list(message["content"])
            messages[index] = {**message, "content": copied[index]}
        copied[index][where[2]] = block


def _same_system(given: Any, system: Any) -> bool:
    """Whether a call's `system` is the config's, as `_canonical_system` compares them (an
    equal value, a str or dicts, is the same without canonicalising either)."""
    return bool(given == system) or _canonical_system(given) == _canonical_system(system)


def _same_config(params: Mapping[str, Any], config: SessionConfig) -> bool:
    """Whether a call's cache-safe parameters are `config`'s as they are: equal values of the
    shapes `_configure` copies unchanged (a str or dicts), with a valid model and max_tokens.
    Then `_configure` would rebuild an equal config: nothing is rebuilt."""
    model, max_tokens = params.get("model"), params.get("max_tokens")
    if not isinstance(model, str) or not model or model != config.model:
        return False
    if max_tokens is None:
        if config.max_tokens is not None:
            return False
    elif type(max_tokens) is not int or max_tokens <= 0 or max_tokens != config.max_tokens:
        return False
    system = params.get("system")
    if system is not None and not isinstance(system, (str, list)):
        return False
    thinking = params.get("thinking")
    if thinking is not None and not isinstance(thinking, dict):
        return False
    tools = params.get("tools") or []
    return (
        isinstance(tools, list)
        and bool(system == config.system)
        and bool(tools == config.tools)
        and bool(thinking == config.thinking)
    )


def _given(value: Any) -> bool:
    """False for None and the SDK's NOT_GIVEN / omit sentinels."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def _final_snapshot(stream: Any) -> Any | None:
    """The complete message a `MessageStream` accumulated, or None when it did not finish."""
    getter = getattr(stream, "_current_snapshot_or_none", None)
    snapshot: Any
    if callable(getter):
        snapshot = getter()
    else:  # pragma: no cover - SDK versions without the private accessor
        try:
            snapshot = stream.current_message_snapshot
        except (AssertionError, AttributeError):
            snapshot = None
    if snapshot is None or getattr(snapshot, "stop_reason", None) is None:
        return None
    return snapshot


# --------------------------------------------------------------------------- the pipeline


class _ReplyEcho:
    """The last reply, read when it was recorded, so that the caller's echo of it (a message
    dict holding the very `content` list of the SDK `Message`) is not dumped and printed again.

    The echo is recognised by identity: the same list holding the same block objects (a block
    edited in place is not seen, as a message dict edited in place is not)."""

    __slots__ = ("blocks", "canonical", "content", "print", "recall_calls", "ttls")

    def __init__(self, content: Any, canonical: list[dict[str, Any]], printed: MessagePrint):
        self.content = content
        self.blocks = tuple(content)
        self.canonical = canonical
        self.print = printed
        self.recall_calls = _recall_calls_in(canonical)
        self.ttls = _sdk_block_ttls(self.blocks)

    def is_echoed_by(self, message: Any) -> bool:
        """Whether `message` is `{"role": "assistant", "content": <this reply's content>}`."""
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            return False
        content = message.get("content")
        if content is not self.content or len(content) != len(self.blocks):
            return False
        return all(a is b for a, b in zip(content, self.blocks, strict=True))

    def print_with(self, recall_ids: frozenset[str] | set[str]) -> MessagePrint:
        """The echo's print made with these recall ids (they only matter for tool results)."""
        if any(b["type"] == "tool_result" for b in self.canonical):
            return _print_of_canonical("assistant", self.canonical, recall_ids)
        return self.print


def _sdk_block_ttls(blocks: Sequence[Any]) -> list[str]:
    """The marker TTLs on a reply's blocks (`_content_ttls`), without dumping the SDK blocks
    (pydantic models) that hold no marker, as a reply's blocks never do."""
    for block in blocks:
        fields = getattr(type(block), "model_fields", None)
        extra = getattr(block, "model_extra", None) if isinstance(fields, dict) else None
        if (
            not isinstance(fields, dict)
            or isinstance(block, Mapping)
            or "cache_control" in fields
            or (extra and "cache_control" in extra)
        ):
            return _content_ttls(list(blocks))
    return []


def _content_ttls(content: Any) -> list[str]:
    """The TTLs of the cache markers on a message content's blocks."""
    if isinstance(content, str) or not content:
        return []
    return [ttl for ttl in map(_marker_ttl, content) if ttl is not None]


class _SeenMessages:
    """The caller's messages of the last call, their prints and marker TTLs, kept so that a
    call that repeats them and adds a few (the usual SDK loop) prints only what it added.

    A message counts as repeated when it is the same object as last time (or an equal
    one), compared at C speed (`shared_prefix_length`): a message dict edited in place after
    it was sent is not seen, as everywhere in the pipeline (send a new dict to change one).
    Each new message is read once (SDK blocks dumped, canonicalised, printed); the echo of
    the last reply is not read at all (`_ReplyEcho`).
    """

    def __init__(self) -> None:
        self.copies: list[Any] = []
        self.prints: list[MessagePrint] = []
        self.markers: list[int] = [0]
        """Cache markers on the first i messages (cumulative), then the same for 1-hour ones."""
        self.long_markers: list[int] = [0]
        self.recall_calls: list[tuple[int, set[str]]] = []
        """(message index, ids) of the messages holding `recall` calls (few)."""
        self.ids: set[str] = set()
        """The recall ids the prints were made with."""
        self.reply: _ReplyEcho | None = None
        """The last recorded reply, whose echo is known without reading it."""
        self._tail_start = 0
        self._tail_fields: list[tuple[str, Any] | None] = []
        """`_message_fields` of the messages read by the last call (None: a reply echo)."""
        self._tail_canonical: list[list[dict[str, Any]]] = []

    def remember_reply(
        self, content: Any, canonical: list[dict[str, Any]], printed: MessagePrint
    ) -> None:
        """The reply just recorded (its SDK content list, canonical blocks and print)."""
        self.reply = _ReplyEcho(content, canonical, printed) if isinstance(content, list) else None

    def fields(self, index: int, message: Any) -> tuple[str, Any]:
        """`_message_fields(message)` of `messages[index]` of the last call, read once."""
        offset = index - self._tail_start
        if 0 <= offset < len(self._tail_fields):
            found = self._tail_fields[offset]
            if found is not None:
                return found
        return _message_fields(message)

    def canonical(self, index: int, message: Any) -> list[dict[str, Any]]:
        """`_canonical_content` of `messages[index]` of the last call, made once."""
        offset = index - self._tail_start
        if 0 <= offset < len(self._tail_canonical):
            return self._tail_canonical[offset]
        return _canonical_content(_message_fields(message)[1])

    def _repeated(self, messages: list[Any]) -> tuple[int, bool]:
        """How many of `messages` open the last call's list (`shared_prefix_length`), and
        whether the kept copy now equals `messages`: it is extended by the new messages and
        compared whole, which copies nothing of the history when the list only grew (the
        usual call). Otherwise the copy is left as it was."""
        kept = self.copies
        size = len(kept)
        if len(messages) >= size:
            kept.extend(messages[size:])
            if kept == messages:
                return size, True
            del kept[size:]
        return shared_prefix_length(messages, kept), False

    def _read_tail(
        self, tail: list[Any]
    ) -> tuple[list[tuple[str, Any] | None], list[list[dict[str, Any]]]]:
        reply = self.reply
        fields = [
            None if reply is not None and reply.is_echoed_by(m) else _message_fields(m)
            for m in tail
        ]
        canonical = [
            _canonical_content(f[1]) if f is not None else cast(_ReplyEcho, reply).canonical
            for f in fields
        ]
        return fields, canonical

    def read(self, messages: list[Any], recall_ids: set[str]) -> int:
        """Bring the kept state to `messages`; returns how many were repeated."""
        size = len(self.copies)
        same, grown = self._repeated(messages)
        try:
            return self._read(messages, recall_ids, same, grown)
        except BaseException:
            del self.copies[size:]  # the kept state stays the last call's
            raise

    def _read(self, messages: list[Any], recall_ids: set[str], same: int, grown: bool) -> int:
        tail = messages[same:]
        fields, canonical = self._read_tail(tail)
        calls = [(i, ids) for i, ids in self.recall_calls if i < same]
        for offset, (field_, blocks) in enumerate(zip(fields, canonical, strict=True)):
            if field_ is None or field_[0] == "assistant":
                found = _recall_calls_in(blocks)
                if found:
                    calls.append((same + offset, found))
        ids = set(recall_ids).union(*(found for _, found in calls))
        if ids != self.ids:  # a print leaves out recall results: made again with the new ids
            same, tail = 0, messages
            fields, canonical = self._read_tail(tail)
        reply = self.reply
        new_prints = [
            _print_of_canonical(f[0], blocks, ids)
            if f is not None
            else cast(_ReplyEcho, reply).print_with(ids)
            for f, blocks in zip(fields, canonical, strict=True)
        ]
        self.recall_calls, self.ids = calls, ids
        self._tail_start, self._tail_fields, self._tail_canonical = same, fields, canonical
        # Cut and extended in place (nothing else holds these lists): the work is the tail.
        markers, long_markers = self.markers, self.long_markers
        del self.prints[same:], markers[same + 1 :], long_markers[same + 1 :]
        self.prints.extend(new_prints)
        for field_ in fields:
            ttls = _content_ttls(field_[1]) if field_ is not None else cast(_ReplyEcho, reply).ttls
            markers.append(markers[-1] + len(ttls))
            long_markers.append(long_markers[-1] + ttls.count("1h"))
        if not grown:
            self.copies = list(messages)
        return same

    @property
    def longest_ttl(self) -> str | None:
        """The longest TTL the caller put on a message block (None: no marker)."""
        if not self.markers[-1]:
            return None
        return "1h" if self.long_markers[-1] else "5m"


class ClientPipeline:
    """The session side of a wrapped client: what is new, the config, recording, PTL."""

    def __init__(
        self,
        client: Any,
        session: Session | None,
        *,
        folder: str | Path | None,
        model: str | None,
        context_window: int | None,
        policy: Policy | None,
        summarizer: Provider | SummarizerChoice | None,
        events: EventSink | None,
        history: HistoryMode,
        session_options: dict[str, Any],
    ) -> None:
        if history not in ("auto", "full", "new"):
            raise ConfigError(f"history must be 'auto', 'full' or 'new', not {history!r}")
        self.client = client
        self.provider = AnthropicProvider(client)
        self.history: HistoryMode = history
        self._folder = Path(folder).expanduser() if folder is not None else None
        self._context_window = context_window
        self._policy = policy
        self._summarizer = summarizer
        self._events = events
        self._options = session_options
        self._model_table: ModelTable | None = session_options.get("model_table")
        self._session: Session | None = None
        self._owns_session = session is None
        self._sent_params: dict[str, Any] | None = None
        self._params_of: tuple[SessionConfig, dict[str, Any]] | None = None
        """A config and its cache-safe parameters (not rebuilt while the config stays)."""
        self._sends_history = False
        """The caller sent messages the session already held: it sends whole histories."""
        self._messages_ttl: str | None = None
        """The longest TTL the caller put on a message block in the last call."""
        self.known: list[MessagePrint] = []
        self.recall_ids: set[str] = set()
        """Ids of the recall calls in the conversation (their results are the wrapper's)."""
        self.runner = BlockingRunner()
        """The event loop the blocking client's calls run the pipeline on."""
        self._seen = _SeenMessages()
        self._verified = 0
        """The caller's first messages known to match `known` (its last call continued it)."""
        if session is not None:
            if summarizer is not None:
                session.summarizer = self._summarizer_provider()
            self._attach(session)
        elif model is not None:
            self._attach(self._open(SessionConfig(model=model, context_window=context_window)))

    # -- the session

    @property
    def session(self) -> Session:
        """The session (opened at the first call when the model was not known before)."""
        if self._session is None:
            raise ConfigError(
                "the session opens at the first messages.create/stream call, which names the "
                "model: pass model=... (or a Session) to wrap() to open it now"
            )
        return self._session

    def _attach(self, session: Session) -> None:
        self._session = session
        self._verified = 0
        self.known = conversation_prints(session.entries)
        self.recall_ids = recall_call_ids(session.entries)

    def _summarizer_provider(self) -> Provider | None:
        choice = self._summarizer
        if choice is None or choice == "client":
            return self.provider
        if choice == "extractive":
            return None  # the session's default: the offline extractive summarizer
        if isinstance(choice, str):
            raise ConfigError(
                f"summarizer must be 'client', 'extractive' or a Provider, not {choice!r}"
            )
        return choice

    def _open(self, config: SessionConfig) -> Session:
        options: dict[str, Any] = {
            "policy": self._policy,
            "summarizer": self._summarizer_provider(),
            "events": self._events,
            **self._options,
        }
        if self._folder is not None:
            return Session.open(self._folder, config, **options)
        return Session(config, **options)

    def _configure(self, params: dict[str, Any]) -> Session:
        """The session for these cache-safe parameters (opened, or its config updated)."""
        model = params.get("model")
        if not isinstance(model, str) or not model:
            raise ConfigError("messages.create/stream needs model= (a model name)")
        max_tokens = params.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
            raise ConfigError(f"max_tokens must be a positive integer, not {max_tokens!r}")
        if self._session is not None and _same_config(params, self._session.config):
            self._check_sent(self._session)
            return self._session
        system = params.get("system")
        if system is not None and not isinstance(system, str):
            system = [_block_dict(b) for b in system]
        tools = [_block_dict(t) for t in params.get("tools") or []]
        thinking = params.get("thinking")
        thinking = dict(_plain(thinking)) if thinking is not None else None
        if self._session is None:
            config = SessionConfig(
                model=model,
                system=system,
                tools=tools,
                thinking=thinking,
                max_tokens=max_tokens,
                context_window=self._context_window,
            )
            self._attach(self._open(config))
        session = self.session
        current = session.config
        wanted = dataclasses.replace(
            current,
            model=model,
            system=system,
            tools=tools,
            thinking=thinking,
            max_tokens=max_tokens,
        )
        if wanted != current:
            if wanted.model != current.model:
                table = self._model_table or load_model_table()
                info = table.get(wanted.model)
                session.model_info = (
                    info.with_window(wanted.context_window) if wanted.context_window else info
                )
                session.thresholds = compute_thresholds(session.model_info, session.policy)
            session.config = wanted
        self._check_sent(session)
        return session

    def _cache_params(self, config: SessionConfig) -> dict[str, Any]:
        """The cache-safe parameters of `config` (made again only when the config changed)."""
        kept = self._params_of
        if kept is None or kept[0] is not config:
            kept = self._params_of = (
                config,
                {name: getattr(config, name) for name in CACHE_SAFE_PARAMETERS},
            )
        return kept[1]

    def _check_sent(self, session: Session) -> None:
        """Emit `CacheParamsChanged` when the config differs from the last request's."""
        sent = self._sent_params
        now = self._cache_params(session.config)
        if sent is not None and sent is not now and sent != now:
            changed = tuple(name for name in CACHE_SAFE_PARAMETERS if sent[name] != now[name])
            emit(session.events_sink(), CacheParamsChanged(changed))

    def begin(self, kwargs: Mapping[str, Any], *, streaming_helper: bool) -> dict[str, Any] | None:
        """Take a call's keywords: configure the session, append what is new, and return the
        keywords to pass through to the SDK unchanged; None for a side call (one that does
        not continue the conversation), which goes to the SDK exactly as given."""
        rest = {key: value for key, value in kwargs.items() if _given(value)}
        if streaming_helper and "stream" in rest:
            raise ConfigError("messages.stream(...) takes no stream= keyword")
        if "messages" not in rest:
            raise ConfigError("messages.create/stream needs messages=")
        given = rest.pop("messages")
        # Only read during this call (`_SeenMessages` keeps its own copy): a list is not copied.
        messages = given if type(given) is list else list(given)
        params = {name: rest.pop(name) for name in CACHE_SAFE_PARAMETERS if name in rest}
        relation: Continuation | None = None
        if (
            self._session is not None
            and self.known
            and not _same_system(params.get("system"), self._session.config.system)
        ):
            self._side_call("a different system prompt", messages)
            return None
        seen = self._seen
        repeated = seen.read(messages, self.recall_ids)
        verified = min(self._verified, repeated)
        self._verified = 0
        if self._session is not None and self.known:
            relation = new_messages(
                messages,
                self.known,
                self.history,
                self.recall_ids,
                prints=seen.prints,
                verified=verified,
            )
            reason = self._side_call_reason(relation, messages, params)
            if reason is not None:
                self._side_call(reason, messages)
                return None
        session = self._configure(params)
        if relation is None:
            relation = new_messages(
                messages,
                self.known,
                self.history,
                self.recall_ids,
                prints=seen.prints,
                verified=verified,
            )
        if relation.relation == "retry":
            removed = session.discard_last_reply()
            self.known = conversation_prints(session.entries)
            discarded = removed[0].message_id if removed else None
            emit(session.events_sink(), LastReplyDiscarded(discarded))
        if relation.start and relation.relation in ("continues", "window", "retry"):
            self._sends_history = True
        fresh = messages[relation.start :]
        if fresh:
            last_role = relation.prints[-1].role
        else:
            current = session.messages
            last_role = current[-1]["role"] if current else ""
        if last_role != "user":
            raise ConfigError(
                "the conversation must end with a user message (a prompt or tool results) "
                "for the model to answer; an assistant prefill is not supported by the wrapper"
            )
        self._messages_ttl = seen.longest_ttl
        printed_fresh = relation.prints[relation.start :]
        for index, (message, printed) in enumerate(
            zip(fresh, printed_fresh, strict=True), start=relation.start
        ):
            role, content = seen.fields(index, message)
            self._append(session, role, content)
            self.known.append(printed)
        if relation.relation == "continues" and len(self.known) == len(messages):
            self._verified = len(messages)  # known ends with this list's prints
        return rest

    def _sink(self) -> EventSink | None:
        return self._session.events_sink() if self._session is not None else self._events

    def _side_call(self, reason: str, messages: Sequence[Any]) -> None:
        emit(self._sink(), SideCallPassed(reason, len(messages)))

    def _side_call_reason(
        self, relation: Continuation, messages: Sequence[Any], params: Mapping[str, Any]
    ) -> str | None:
        """Why a call with the conversation's system prompt still does not continue it (see
        the module docstring), or None when it does."""
        session = self.session
        if relation.relation == "unrelated":
            if self._sends_history:
                return "no message in common with the conversation"
            if params.get("model") != session.config.model:
                return "a different model and no message in common with the conversation"
            tools = [_block_dict(t) for t in params.get("tools") or []]
            if _canonical_tools(tools) != _canonical_tools(session.config.tools):
                return "different tools and no message in common with the conversation"
        pending = [i for i in session.pending_tool_use_ids() if i not in self.recall_ids]
        fresh = messages[relation.start :]
        if pending and relation.relation != "retry" and fresh:
            answered = {
                str(b.get("tool_use_id"))
                for b in self._seen.canonical(relation.start, fresh[0])
                if b.get("type") == "tool_result"
            }
            if not set(pending) <= answered:
                return "it leaves the tool calls of the last reply unanswered"
        return None

    def _append(self, session: Session, role: str, content: Any) -> None:
        stored = stored_content(content)
        if role == "user":
            stored = self._with_recall_answers(session, stored)
        if role == "assistant":
            blocks = [{"type": "text", "text": stored}] if isinstance(stored, str) else stored
            session.append([Entry.assistant(blocks, model=session.config.model)])
        elif (
            isinstance(stored, list)
            and stored
            and all(b.get("type") == "tool_result" for b in stored)
        ):
            session.add_tool_results(stored)
        else:
            session.add_user(stored)

    def _with_recall_answers(
        self, session: Session, stored: str | list[dict[str, Any]]
    ) -> str | list[dict[str, Any]]:
        """The caller's message with the session's answers to the recall calls it leaves
        waiting (unanswered, or answered by the caller with anything)."""
        if not self.recall_ids.intersection(session.pending_tool_use_ids()):
            return stored  # no recall call waits (the usual turn): the history is not copied
        messages = session.messages
        if not messages or messages[-1]["role"] != "assistant":
            return stored
        last = messages[-1]["content"]
        calls: list[Mapping[str, Any]] = [
            b
            for b in (last if isinstance(last, list) else [])
            if b.get("type") == "tool_use" and b.get("id") in self.recall_ids
        ]
        if not calls:
            return stored
        answers = {str(b.get("id")): session.run_recall(b) for b in calls}
        blocks = [{"type": "text", "text": stored}] if isinstance(stored, str) else list(stored)
        kept = [
            b
            for b in blocks
            if not (b.get("type") == "tool_result" and b.get("tool_use_id") in answers)
        ]
        return [*answers.values(), *kept]

    # -- sending

    def call_kwargs(
        self, request: ProviderRequest, method: Callable[..., Any], passthrough: Mapping[str, Any]
    ) -> dict[str, Any]:
        """SDK keywords: the prepared request plus the caller's other keywords; fields this SDK
        version does not name (`temperature` in recent ones) go through `extra_body`."""
        config = self.session.config
        merged: dict[str, Any] = dict(
            honor_caller_markers(
                request,
                config.system,
                config.tools,
                self._messages_ttl,
                marked_messages=self.session.marked_messages,
            )
        )
        merged.update((k, v) for k, v in passthrough.items() if k != "extra_body")
        kwargs = self.provider.request_kwargs(cast(ProviderRequest, merged), method)
        extra = passthrough.get("extra_body")
        if isinstance(extra, Mapping):
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), **extra}
        return kwargs

    def messages_api(self, request: ProviderRequest, sdk: Any) -> Any:
        """`sdk.messages`, or `sdk.beta.messages` when the request carries betas."""
        return sdk.beta.messages if request.get("betas") else sdk.messages

    def is_prompt_too_long(self, error: BaseException) -> bool:
        """Whether an SDK exception is the API refusing the prompt as over the window."""
        return isinstance(self.provider.map_error(error), PromptTooLongError)

    def record(self, message: Any, *, answer_recall: bool = False) -> bool:
        """Record an SDK message (whole or accumulated from a stream) as the reply.

        With `answer_recall`, a reply whose only tool calls are `recall` is answered here as
        a recall round; True then: ask the model again.
        """
        response = self.provider.to_response(message)
        session = self.session
        uses = response.tool_uses
        recalls = [u for u in uses if u.get("name") == RECALL_TOOL_NAME]
        if session.offers_recall:
            self.recall_ids.update(str(u.get("id")) for u in recalls)
        internal = (
            answer_recall and bool(uses) and len(recalls) == len(uses) and session.offers_recall
        )
        if not internal:
            session.record(response)
            canonical = _canonical_content(response.content)
            printed = _print_of_canonical("assistant", canonical, frozenset())
            self.known.append(printed)
            self._seen.remember_reply(getattr(message, "content", None), canonical, printed)
            return False
        self._answer_recall_round(session, response)
        return True

    def record_reply(self, message: Any) -> None:
        """Record a reply the caller receives as it is (a stream's)."""
        self.record(message)

    @staticmethod
    def _answer_recall_round(session: Session, response: ModelResponse) -> None:
        mark = {RECALL_ROUND_FIELD: True}
        session.record(response, extra=mark)
        answers = [session.run_recall(use) for use in response.tool_uses]
        session.append([Entry.user(answers, extra=mark)])

    def close_store(self) -> None:
        """Close the store of a session the wrapper opened from a folder (releases its lock),
        and the blocking client's event loop."""
        self.runner.close()
        if self._owns_session and self._session is not None:
            self._session.close()

    def mark_sent(self) -> None:
        """Remember the cache-safe parameters of the request that just went out."""
        self._sent_params = self._cache_params(self.session.config)


# --------------------------------------------------------------------------- streams


def _accumulator() -> tuple[Callable[..., Any], bool]:
    from anthropic.lib.streaming._messages import accumulate_event

    takes_buffers = "json_bufs" in inspect.signature(accumulate_event).parameters
    return accumulate_event, takes_buffers


class _Accumulated:
    """A reply rebuilt from raw stream events with the SDK's own accumulator."""

    def __init__(self, on_message: Callable[[Any], None]) -> None:
        self._accumulate, self._takes_buffers = _accumulator()
        self._buffers: dict[int, bytes] = {}
        self._snapshot: Any = None
        self._on_message = on_message
        self.recorded = False

    def observe(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if self._snapshot is None and kind != "message_start":
            return
        extra = {"json_bufs": self._buffers} if self._takes_buffers else {}
        self._snapshot = self._accumulate(event=event, current_snapshot=self._snapshot, **extra)
        if kind == "message_stop" and not self.recorded:
            self.recorded = True
            self._on_message(self._snapshot)


class RecordingStream:
    """The SDK's raw event stream (`create(stream=True)`), passed through event by event; the
    reply is recorded when its `message_stop` arrives."""

    def __init__(self, stream: Any, on_message: Callable[[Any], None]) -> None:
        self._stream = stream
        self._accumulated = _Accumulated(on_message)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        event = next(self._stream)
        self._accumulated.observe(event)
        return event

    def __enter__(self) -> RecordingStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the response (the reply is recorded only if it was read to the end)."""
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


class AsyncRecordingStream:
    """`RecordingStream` for the async client."""

    def __init__(self, stream: Any, on_message: Callable[[Any], None]) -> None:
        self._stream = stream
        self._accumulated = _Accumulated(on_message)

    def __aiter__(self) -> AsyncRecordingStream:
        return self

    async def __anext__(self) -> Any:
        event = await self._stream.__anext__()
        self._accumulated.observe(event)
        return event

    async def __aenter__(self) -> AsyncRecordingStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the response (the reply is recorded only if it was read to the end)."""
        await self._stream.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


class StreamManager:
    """What `messages.stream(...)` returns: entering it runs the pipeline and opens the SDK's
    stream (retrying once after a prompt-too-long compaction); leaving it records the reply
    when it was read to the end. A side call opens the SDK's stream as given."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, kwargs: dict[str, Any]) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._kwargs = kwargs
        self._inner: Any = None
        self._stream: Any = None
        self._records = True

    def _open(self, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        request = pipeline.runner.run(pipeline.session.prepare())
        method = pipeline.messages_api(request, self._sdk).stream
        self._inner = method(**pipeline.call_kwargs(request, method, passthrough))
        stream = self._inner.__enter__()
        pipeline.mark_sent()
        return stream

    def __enter__(self) -> MessageStream[Any]:
        pipeline = self._pipeline
        passthrough = pipeline.begin(self._kwargs, streaming_helper=True)
        if passthrough is None:
            self._records = False
            self._inner = self._sdk.messages.stream(**self._kwargs)
            self._stream = self._inner.__enter__()
            return cast("MessageStream[Any]", self._stream)
        try:
            self._stream = self._open(passthrough)
        except Exception as error:
            if not pipeline.is_prompt_too_long(error) or not pipeline.runner.run(
                compact_after_prompt_too_long(pipeline.session, error)
            ):
                raise
            self._stream = self._open(passthrough)
        return cast("MessageStream[Any]", self._stream)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            snapshot = (
                _final_snapshot(self._stream)
                if self._stream is not None and self._records
                else None
            )
            if snapshot is not None:
                self._pipeline.record(snapshot)
        finally:
            if self._inner is not None:
                self._inner.__exit__(exc_type, exc, traceback)


class AsyncStreamManager:
    """`StreamManager` for the async client (`async with client.messages.stream(...)`)."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, kwargs: dict[str, Any]) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._kwargs = kwargs
        self._inner: Any = None
        self._stream: Any = None
        self._records = True

    async def _open(self, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        request = await pipeline.session.prepare()
        method = pipeline.messages_api(request, self._sdk).stream
        self._inner = method(**pipeline.call_kwargs(request, method, passthrough))
        stream = await self._inner.__aenter__()
        pipeline.mark_sent()
        return stream

    async def __aenter__(self) -> AsyncMessageStream[Any]:
        pipeline = self._pipeline
        passthrough = pipeline.begin(self._kwargs, streaming_helper=True)
        if passthrough is None:
            self._records = False
            self._inner = self._sdk.messages.stream(**self._kwargs)
            self._stream = await self._inner.__aenter__()
            return cast("AsyncMessageStream[Any]", self._stream)
        try:
            self._stream = await self._open(passthrough)
        except Exception as error:
            if not pipeline.is_prompt_too_long(error) or not await compact_after_prompt_too_long(
                pipeline.session, error
            ):
                raise
            self._stream = await self._open(passthrough)
        return cast("AsyncMessageStream[Any]", self._stream)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            snapshot = (
                _final_snapshot(self._stream)
                if self._stream is not None and self._records
                else None
            )
            if snapshot is not None:
                self._pipeline.record(snapshot)
        finally:
            if self._inner is not None:
                await self._inner.__aexit__(exc_type, exc, traceback)


# --------------------------------------------------------------------------- the clients

_BYPASSES = {
    "with_streaming_response": (
        "client.messages.with_streaming_response would send the call past the session (not "
        "recorded, not compacted): use client.messages.create(..., stream=True) or "
        "client.messages.stream(...), or client.client.messages for an unmanaged call"
    ),
}


def _refuse_bypass(name: str) -> None:
    reason = _BYPASSES.get(name)
    if reason is not None:
        raise ConfigError(reason)


class Messages:
    """`client.messages` of a wrapped sync client."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, *, raw: bool = False) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._raw = raw

    def _send(self, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        request = pipeline.runner.run(pipeline.session.prepare())
        method = _create_method(pipeline.messages_api(request, self._sdk), self._raw)
        result = method(**pipeline.call_kwargs(request, method, passthrough))
        pipeline.mark_sent()
        return result

    @overload
    def create(self, *, stream: Literal[True], **kwargs: Any) -> RecordingStream: ...

    @overload
    def create(self, *, stream: Literal[False] = False, **kwargs: Any) -> Message: ...

    def create(self, **kwargs: Any) -> Message | RecordingStream:
        """`messages.create` through the pipeline; returns the SDK's `Message` (or stream)."""
        pipeline = self._pipeline
        if self._raw and kwargs.get("stream") is True:
            raise ConfigError(_RAW_STREAM)
        passthrough = pipeline.begin(kwargs, streaming_helper=False)
        if passthrough is None:
            return cast("Message", _create_method(self._sdk.messages, self._raw)(**kwargs))
        result = self._send_or_compact(passthrough)
        if passthrough.get("stream") is True:
            return RecordingStream(result, pipeline.record_reply)
        rounds = 0
        while pipeline.record(
            result.parse() if self._raw else result, answer_recall=rounds < MAX_RECALL_ROUNDS
        ):
            rounds += 1
            result = self._send_or_compact(passthrough)
        return cast("Message", result)

    def _send_or_compact(self, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        try:
            return self._send(passthrough)
        except Exception as error:
            if not pipeline.is_prompt_too_long(error) or not pipeline.runner.run(
                compact_after_prompt_too_long(pipeline.session, error)
            ):
                raise
            return self._send(passthrough)

    def stream(self, **kwargs: Any) -> StreamManager:
        """`messages.stream` through the pipeline: `with client.messages.stream(...) as s:`."""
        if self._raw:
            raise ConfigError(_RAW_STREAM)
        return StreamManager(self._pipeline, self._sdk, dict(kwargs))

    @property
    def with_raw_response(self) -> Messages:
        """`create` through the pipeline, returning the SDK's raw HTTP response (its `parse()`
        is the `Message`, recorded here)."""
        return Messages(self._pipeline, self._sdk, raw=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        _refuse_bypass(name)
        messages = self._sdk.messages
        return getattr(messages.with_raw_response if self._raw else messages, name)


class AsyncMessages:
    """`client.messages` of a wrapped async client."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, *, raw: bool = False) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._raw = raw

    async def _send(self, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        request = await pipeline.session.prepare()
        method = _create_method(pipeline.messages_api(request, self._sdk), self._raw)
        result = await method(**pipeline.call_kwargs(request, method, passthrough))
        pipeline.mark_sent()
        return result

    @overload
    async def create(self, *, stream: Literal[True], **kwargs: Any) -> AsyncRecordingStream: ...

    @overload
    async def create(self, *, stream: Literal[False] = False, **kwargs: Any) -> Message: ...

    async def create(self, **kwargs: Any) -> Message | AsyncRecordingStream:
        """`messages.create` through the pipeline; returns the SDK's `Message` (or stream)."""
        pipeline = self._pipeline
        if self._raw and kwargs.get("stream") is True:
            raise ConfigError(_RAW_STREAM)
        passthrough = pipeline.begin(kwargs, streaming_helper=False)
        if passthrough is None:
            side = _create_method(self._sdk.messages, self._raw)(**kwargs)
            return cast("Message", await side)
        result = await self._send_or_compact(passthrough)
        if passthrough.get("stream") is True:
            return AsyncRecordingStream(result, pipeline.record_reply)
        rounds = 0
        while True:
            message = result
            if self._raw:
                parsed = result.parse()  # a coroutine in recent SDKs, a value in older ones
                message = await parsed if inspect.isawaitable(parsed) else parsed
            if not pipeline.record(message, answer_recall=rounds < MAX_RECALL_ROUNDS):
                return cast("Message", result)
            rounds += 1
            result = await self._send_or_compact(passthrough)

    async def _send_or_compact(self, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        try:
            return await self._send(passthrough)
        except Exception as error:
            if not pipeline.is_prompt_too_long(error) or not await compact_after_prompt_too_long(
                pipeline.session, error
            ):
                raise
            return await self._send(passthrough)

    def stream(self, **kwargs: Any) -> AsyncStreamManager:
        """`messages.stream` through the pipeline: `async with client.messages.stream(...)`."""
        if self._raw:
            raise ConfigError(_RAW_STREAM)
        return AsyncStreamManager(self._pipeline, self._sdk, dict(kwargs))

    @property
    def with_raw_response(self) -> AsyncMessages:
        """`create` through the pipeline, returning the SDK's raw HTTP response."""
        return AsyncMessages(self._pipeline, self._sdk, raw=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        _refuse_bypass(name)
        messages = self._sdk.messages
        return getattr(messages.with_raw_response if self._raw else messages, name)


_RAW_STREAM = (
    "with_raw_response.create(stream=True) and with_raw_response.stream are not supported by "
    "the wrapper: use client.messages.create(..., stream=True) or client.messages.stream(...)"
)


def _create_method(messages_api: Any, raw: bool) -> Any:
    return messages_api.with_raw_response.create if raw else messages_api.create


class _WrappedClient:
    """What both wrapped clients share: the session, its status, the SDK client underneath."""

    _pipeline: ClientPipeline
    _sdk: Any

    @property
    def session(self) -> Session:
        """The unbounded session behind this client."""
        return self._pipeline.session

    @property
    def client(self) -> Any:
        """The SDK client underneath (calls on it bypass the pipeline)."""
        return self._sdk

    def status(self) -> SessionStatus:
        """Tokens, percent left and warning level of the conversation now."""
        return self._pipeline.session.status()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in ("with_raw_response", "with_streaming_response"):
            raise ConfigError(
                f"client.{name} would send calls past the session (not recorded, not "
                "compacted): use client.messages.with_raw_response for a raw response, or "
                "client.client for unmanaged calls"
            )
        return getattr(self._sdk, name)


class UnboundedAnthropic(_WrappedClient):
    """An `anthropic.Anthropic` whose `messages.create/stream` run the unbounded pipeline."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any | None = None) -> None:
        self._pipeline = pipeline
        self._sdk = sdk if sdk is not None else pipeline.client
        self.messages = Messages(pipeline, self._sdk)

    def with_options(self, **options: Any) -> UnboundedAnthropic:
        """The SDK's `with_options` (timeout, retries, headers…) on the same conversation."""
        return UnboundedAnthropic(self._pipeline, self._sdk.with_options(**options))

    def copy(self, **options: Any) -> UnboundedAnthropic:
        """Same as `with_options`."""
        return self.with_options(**options)

    def close(self) -> None:
        """Release the session folder the wrapper opened (its lock) and the SDK client."""
        self._pipeline.close_store()
        self._pipeline.client.close()

    def __enter__(self) -> UnboundedAnthropic:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncUnboundedAnthropic(_WrappedClient):
    """An `anthropic.AsyncAnthropic` whose `messages.create/stream` run the unbounded pipeline."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any | None = None) -> None:
        self._pipeline = pipeline
        self._sdk = sdk if sdk is not None else pipeline.client
        self.messages = AsyncMessages(pipeline, self._sdk)

    def with_options(self, **options: Any) -> AsyncUnboundedAnthropic:
        """The SDK's `with_options` (timeout, retries, headers…) on the same conversation."""
        return AsyncUnboundedAnthropic(self._pipeline, self._sdk.with_options(**options))

    def copy(self, **options: Any) -> AsyncUnboundedAnthropic:
        """Same as `with_options`."""
        return self.with_options(**options)

    async def close(self) -> None:
        """Release the session folder the wrapper opened (its lock) and the SDK client."""
        self._pipeline.close_store()
        await self._pipeline.client.close()

    async def __aenter__(self) -> AsyncUnboundedAnthropic:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


@overload
def wrap(
    client: anthropic.AsyncAnthropic,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> AsyncUnboundedAnthropic: ...


@overload
def wrap(
    client: anthropic.Anthropic,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> UnboundedAnthropic: ...


def wrap(
    client: anthropic.Anthropic | anthropic.AsyncAnthropic,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> UnboundedAnthropic | AsyncUnboundedAnthropic:
    """Wrap an Anthropic SDK client so its `messages.create/stream` run one unbounded session.

    `session` (a Session you built) or `session_folder` (opened, or resumed when it exists;
    without either the session lives in memory). `model`/`context_window` open the session
    now instead of at the first call. `policy`, `events`, `summarizer` (default: the wrapped
    client) and any other `Session` keyword apply to a session the wrapper opens; `summarizer`
    also replaces the summarizer of a session you give. `history`: see the module docstring.
    """
    try:
        import anthropic
    except ImportError:
        raise ConfigError(
            "wrap() needs the anthropic SDK: pip install 'unbounded[anthropic]'"
        ) from None
    if session is not None and session_folder is not None:
        raise ConfigError("give wrap() a session or a session_folder, not both")
    if session is not None and (model is not None or context_window is not None):
        raise ConfigError("model and context_window come from the session you gave wrap()")
    if isinstance(client, anthropic.AsyncAnthropic):
        wrapper: type[UnboundedAnthropic] | type[AsyncUnboundedAnthropic] = AsyncUnboundedAnthropic
    elif isinstance(client, anthropic.Anthropic):
        wrapper = UnboundedAnthropic
    else:
        raise ConfigError(
            f"wrap() takes an anthropic.Anthropic or anthropic.AsyncAnthropic client, "
            f"not {type(client).__name__}"
        )
    pipeline = ClientPipeline(
        client,
        as_session(session) if session is not None else None,
        folder=session_folder,
        model=model,
        context_window=context_window,
        policy=policy,
        summarizer=summarizer,
        events=events,
        history=history,
        session_options=session_options,
    )
    return wrapper(pipeline)


__all__ = [
    "CACHE_SAFE_PARAMETERS",
    "AsyncRecordingStream",
    "AsyncStreamManager",
    "AsyncUnboundedAnthropic",
    "CacheParamsChanged",
    "Continuation",
    "HistoryMode",
    "LastReplyDiscarded",
    "MessagePrint",
    "RecordingStream",
    "SideCallPassed",
    "StreamManager",
    "UnboundedAnthropic",
    "conversation_prints",
    "honor_caller_markers",
    "message_print",
    "new_messages",
    "stored_content",
    "wrap",
]
