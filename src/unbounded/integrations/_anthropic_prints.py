"""Which of a caller's messages are new: message prints, their comparison with the recorded
conversation (`new_messages`, `Continuation`), and the state kept between calls so that a
call prints only the messages it adds (`SeenMessages`), the echo of the last reply not even
those (`_ReplyEcho`)."""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import orjson

from unbounded.engine import RECALL_ROUND_FIELD
from unbounded.errors import ConfigError
from unbounded.integrations._anthropic_blocks import canonical_content
from unbounded.integrations._anthropic_markers import content_ttls, sdk_block_ttls
from unbounded.model.entries import Entry
from unbounded.model.prefix import shared_prefix_length
from unbounded.recall.schema import RECALL_TOOL_NAME
from unbounded.wire.anthropic import plain_data

HistoryMode = Literal["auto", "full", "new"]
"""How `messages=` is read: detected (auto), always the whole conversation, or only new ones."""


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
    return _print_of_canonical(role, canonical_content(content), recall_ids)


def _print_of_canonical(
    role: str, canonical: list[dict[str, Any]], recall_ids: frozenset[str] | set[str]
) -> MessagePrint:
    """`message_print` of content already canonicalised (`canonical_content`)."""
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
    data = plain_data(message)
    if not isinstance(data, Mapping) or data.get("role") not in ("user", "assistant"):
        raise ConfigError(
            "every message must be a dict with role 'user' or 'assistant' and a content"
        )
    content = data.get("content")
    if isinstance(content, list):  # SDK blocks dumped once here, not again by each reader
        content = [plain_data(block) for block in content]
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
            ids |= _recall_calls_in(canonical_content(content))
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
        if prints and (prints[0].matches(known[0]) or _edited_history(prints, known)):
            raise ConfigError(_divergence(prints, known))
        return Continuation(0, prints, "unrelated")
    for overlap in range(min(len(prints), count), 0, -1):
        start = count - overlap
        if all(prints[j].matches(known[start + j]) for j in range(overlap)):
            return Continuation(overlap, prints, "window")
    if _is_retry(prints, known, full=False):
        return Continuation(len(prints), prints, "retry")
    if len(prints) > 1 and (prints[0].matches(known[0]) or _edited_history(prints, known)):
        raise ConfigError(_divergence(prints, known))
    return Continuation(0, prints, "unrelated")


def _edited_history(prints: Sequence[MessagePrint], known: Sequence[MessagePrint]) -> bool:
    """The list holds the conversation's last reply where the conversation has it, so it is
    that conversation with earlier messages edited (its first one, say), not a side call: a
    model's reply does not recur at the same place by chance."""
    count = len(known)
    return (
        count > 1
        and len(prints) >= count
        and known[-1].role == "assistant"
        and prints[count - 1].matches(known[-1])
    )


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
        self.ttls = sdk_block_ttls(self.blocks)

    def is_echoed_by(self, message: Any) -> bool:
        """Whether `message` is `{"role": "assistant", "content": <this reply's content>}`."""
        if not isinstance(message, dict) and not isinstance(message, Mapping):
            return False
        content = message.get("content")
        if content is not self.content or message.get("role") != "assistant":
            return False
        return len(content) == len(self.blocks) and all(map(operator.is_, content, self.blocks))

    def print_with(self, recall_ids: frozenset[str] | set[str]) -> MessagePrint:
        """The echo's print made with these recall ids (they only matter for tool results)."""
        if any(b["type"] == "tool_result" for b in self.canonical):
            return _print_of_canonical("assistant", self.canonical, recall_ids)
        return self.print


class SeenMessages:
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

    def remember_reply(self, sdk_content: Any, content: Sequence[Any]) -> MessagePrint:
        """Keep the reply just recorded (`sdk_content`: the SDK message's block list, which
        the caller may send back; `content`: the same blocks as plain dicts), and return its
        print. Both read alike (`canonical_content` keeps only what the SDK dump and the
        plain form share), so the echo is printed from the plain blocks, without a dump."""
        canonical = canonical_content(content)
        printed = _print_of_canonical("assistant", canonical, frozenset())
        self.reply = (
            _ReplyEcho(sdk_content, canonical, printed) if isinstance(sdk_content, list) else None
        )
        return printed

    def fields(self, index: int, message: Any) -> tuple[str, Any]:
        """`_message_fields(message)` of `messages[index]` of the last call, read once."""
        offset = index - self._tail_start
        if 0 <= offset < len(self._tail_fields):
            found = self._tail_fields[offset]
            if found is not None:
                return found
        return _message_fields(message)

    def canonical(self, index: int, message: Any) -> list[dict[str, Any]]:
        """`canonical_content` of `messages[index]` of the last call, made once."""
        offset = index - self._tail_start
        if 0 <= offset < len(self._tail_canonical):
            return self._tail_canonical[offset]
        return canonical_content(_message_fields(message)[1])

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
            canonical_content(f[1]) if f is not None else cast(_ReplyEcho, reply).canonical
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
            ttls = content_ttls(field_[1]) if field_ is not None else cast(_ReplyEcho, reply).ttls
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
