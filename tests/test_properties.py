"""Property tests: normalization, validation and token counting on generated agent transcripts.

The main strategy writes valid Claude-Code-style conversations: each API response is several
assistant lines sharing one message id, with tool results either after the last line or
interleaved between the lines, plus attachments, progress/system records and synthetic API
errors. Every property below is one the module docstrings promise.
"""

from __future__ import annotations

import copy
import itertools
import pprint
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.errors import InvalidRequestError
from unbounded.model.attachments import attachment_to_content
from unbounded.model.content import usage_context_total
from unbounded.model.entries import Entry
from unbounded.model.normalize import (
    INTERRUPTED_RESULT_TEXT,
    MISSING_START_TEXT,
    MessageNormalizer,
    normalize_messages,
    normalize_plain_messages,
    validate_request,
)
from unbounded.tokens.estimate import (
    ContextCounter,
    entry_tokens,
    pad_estimate,
    token_count_with_estimation,
)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- pools ----------------------------------------------------------------------------------

NONBLANK = [
    "a",
    "Hello, world.",
    "  padded on both sides  ",
    "line one\nline two\n",
    "\tindented",
    "é accents à la carte",
    "日本語のテキスト",
    "emoji 🙂 and more",
    "x" * 37,
    "long " * 90,
]
BLANK = ["\n\n", " ", "\n", "\t \n"]
COMMANDS = ["ls", "", "grep -rn 'é' .", "cat 日本.txt", "echo " + "y" * 120]
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}
USAGES: list[dict[str, Any]] = [
    {"input_tokens": 3, "output_tokens": 12},
    {
        "input_tokens": 10,
        "cache_creation_input_tokens": 1_200,
        "cache_read_input_tokens": 48_000,
        "output_tokens": 450,
    },
    {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    },
    {"input_tokens": 90_000, "cache_creation_input_tokens": None, "output_tokens": 7},
]
ATTACHMENTS: list[dict[str, Any]] = [
    {"type": "todo", "content": [{"content": "write tests", "status": "pending"}]},
    {"type": "todo", "content": []},
    {"type": "text", "content": "hook said hello"},
    {"type": "file", "filename": "/src/a.py", "content": "print('日本')\n" * 5},
    {"type": "brand_new_kind", "value": "é"},
    {"type": "plan_file_reference"},  # renders to nothing
]

nonblank_text = st.sampled_from(NONBLANK)
blank_text = st.sampled_from(BLANK)


def text_block(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


class Choices:
    """Small choices read from one drawn integer (mixed radix).

    Hypothesis pays tens of microseconds per draw; a conversation makes hundreds of small
    choices, so structure (turns, responses, tool calls) is drawn directly and the details of
    each response come from one drawn byte string. Bytes shrink towards 0, i.e. every choice
    towards its first option (no extra record, no thinking line, the first pool entry).
    """

    def __init__(self, value: int) -> None:
        self.value = value

    def take(self, options: int) -> int:
        self.value, choice = divmod(self.value, options)
        return choice

    def pick(self, pool: list[Any]) -> Any:
        return pool[self.take(len(pool))]

    def chance(self, numerator: int, denominator: int) -> bool:
        return self.take(denominator) >= denominator - numerator  # False at 0


CHOICE_BITS = st.binary(min_size=40, max_size=40).map(lambda raw: int.from_bytes(raw, "little"))


# -- the conversation strategy --------------------------------------------------------------


@dataclass
class Conversation:
    """Generated entries plus what the generator knows about them."""

    entries: list[Entry] = field(default_factory=list)
    call_points: list[int] = field(default_factory=list)
    """Prefix lengths that end right before an assistant response starts (API-call points)."""
    responses: list[list[str]] = field(default_factory=list)
    """The tool_use ids of every response, in line order."""

    def __repr__(self) -> str:
        rows: list[tuple[Any, ...]] = []
        for entry in self.entries:
            data = entry.data
            if entry.type in ("user", "assistant"):
                message = data["message"]
                extra = {k: message[k] for k in ("id", "usage") if k in message}
                rows.append((entry.type, extra, message["content"]))
            elif entry.type == "attachment":
                rows.append(("attachment", data["attachment"]))
            else:
                rows.append((entry.type,))
        return f"Conversation(call_points={self.call_points!r},\n{pprint.pformat(rows)})"


def _noise(kind: int, serial: int) -> Entry:
    if kind == 0:
        return Entry({"type": "progress", "uuid": f"p{serial}", "data": {"type": "bash_progress"}})
    if kind == 1:
        return Entry({"type": "system", "subtype": "local_command", "content": "ls", "uuid": "s"})
    if kind == 2:
        return Entry({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}})
    return Entry.assistant(
        [text_block("API Error: 529 Overloaded")],
        message_id=f"msg_err_{serial}",
        model="<synthetic>",
        extra={"isApiErrorMessage": True},
    )


def _prompt(choices: Choices) -> Any:
    if choices.chance(1, 2):
        return choices.pick(NONBLANK)
    blocks = [text_block(choices.pick(NONBLANK))]
    for _ in range(choices.take(3)):
        kind = choices.take(3)
        if kind == 0:
            blocks.append(text_block(choices.pick(NONBLANK)))
        elif kind == 1:
            blocks.append(text_block(choices.pick(BLANK)))
        else:
            blocks.append(IMAGE)
    return blocks


def _result_content(choices: Choices) -> Any:
    if choices.chance(1, 2):
        return choices.pick(NONBLANK)
    parts: list[dict[str, Any]] = [text_block(choices.pick(NONBLANK))]
    if choices.chance(1, 2):
        parts.append(IMAGE)
    return parts


@st.composite
def conversations(draw: st.DrawFn, max_turns: int = 3) -> Conversation:
    """A valid conversation as Claude Code writes it (see the module docstring)."""
    conv = Conversation()
    serial = itertools.count()

    def emit(entry: Entry, choices: Choices, *, starts: bool = False, inside: bool = False) -> None:
        # Sometimes a progress/system/metadata record or a synthetic API error first, also
        # between two lines of one response.
        kind = choices.take(16) - 1  # -1 (nothing) at 0
        if 0 <= kind < 4:
            conv.entries.append(_noise(kind, next(serial)))
        if starts:
            conv.call_points.append(len(conv.entries))
        conv.entries.append(entry)

    for _turn in range(draw(st.integers(1, max_turns))):
        choices = Choices(draw(CHOICE_BITS))
        emit(Entry.user(_prompt(choices), is_meta=choices.chance(1, 5)), choices)
        n_responses = draw(st.integers(1, 4))
        for number in range(n_responses):
            # Every response but the last of a turn calls tools (else the turn would end).
            last = number == n_responses - 1
            n_tools = draw(st.integers(0 if last else 1, 3))
            interleaved = draw(st.booleans())
            choices = Choices(draw(CHOICE_BITS))
            message_id = f"msg_{next(serial)}"
            tool_ids = [f"toolu_{next(serial)}" for _ in range(n_tools)]
            # Usage on every line (as Claude Code writes it), growing output tokens, only on
            # the lines after the first, or none at all (other agents' formats).
            usage_mode = choices.pick(["none", "same", "growing", "later"])
            base_usage = choices.pick(USAGES)

            blocks: list[dict[str, Any]] = []
            if choices.chance(1, 2):
                blocks.append(text_block("\n\n"))
            if choices.chance(1, 2):
                thought = choices.pick(NONBLANK)
                blocks.append({"type": "thinking", "thinking": thought, "signature": "s"})
            blocks.append(text_block(choices.pick(NONBLANK)))
            for tool_id in tool_ids:
                command = choices.pick(COMMANDS)
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": "Bash",
                        "input": {"command": command},
                    }
                )
            results = {
                t: Entry.user(
                    [{"type": "tool_result", "tool_use_id": t, "content": _result_content(choices)}]
                )
                for t in tool_ids
            }
            for index, block in enumerate(blocks):
                usage = None
                if usage_mode != "none" and (usage_mode != "later" or index > 0):
                    usage = dict(base_usage)
                    if usage_mode == "growing":
                        usage["output_tokens"] += 7 * index
                line = Entry.assistant([block], message_id=message_id, usage=usage)
                emit(line, choices, starts=index == 0, inside=index > 0)
                if interleaved and block["type"] == "tool_use":
                    emit(results[block["id"]], choices, inside=True)
            if not interleaved:
                for result in results.values():
                    if choices.chance(1, 5):
                        # An attachment written before a result: the merge must put the
                        # tool results first again.
                        emit(Entry.attachment_record(choices.pick(ATTACHMENTS)), choices)
                    emit(result, choices)
            if tool_ids:
                for _ in range(choices.take(3)):
                    emit(Entry.attachment_record(choices.pick(ATTACHMENTS)), choices)
            conv.responses.append(tool_ids)
    if draw(st.integers(0, 3)) == 0:
        conv.entries.append(_noise(draw(st.integers(0, 3)), next(serial)))
    return conv


# -- helpers --------------------------------------------------------------------------------


def _chars(content: Any) -> int:
    """Characters of text the model reads: non-blank text, thinking and tool-result text
    (trailing whitespace aside: a request that ends with the assistant has it removed)."""
    if isinstance(content, str):
        return len(content.rstrip())
    total = 0
    for block in content if isinstance(content, list) else []:
        kind = block.get("type")
        if kind == "text":
            total += len(block["text"].rstrip())
        elif kind == "thinking":
            total += len(block["thinking"])
        elif kind == "tool_result":
            total += _chars(block.get("content", ""))
    return total


def _entry_content(entry: Entry) -> Any:
    """What an entry contributes to the request, before normalization (None: nothing)."""
    if entry.type in ("user", "assistant") and not entry.is_synthetic_api_error:
        return entry.content
    if entry.type == "attachment" and entry.attachment is not None:
        return attachment_to_content(entry.attachment)
    return None


def _contributes(entry: Entry) -> bool:
    content = _entry_content(entry)
    if content is None:
        return False
    if isinstance(content, str):
        return bool(content.strip())
    return any(not (b.get("type") == "text" and not b.get("text", "").strip()) for b in content)


def _trailing_thinking_chars(entries: list[Entry]) -> int:
    """Characters of the trailing thinking-only assistant message normalization leaves out."""
    for entry in reversed(entries):
        if not _contributes(entry):
            continue
        if entry.type != "assistant" or isinstance(entry.content, str):
            return 0
        kept = [b for b in entry.content if not (b["type"] == "text" and not b["text"].strip())]
        return _chars(kept) if all(b["type"] == "thinking" for b in kept) else 0
    return 0


def _oracle_count(entries: list[Entry]) -> int:
    """token_count_with_estimation written straight from the module docstring."""
    with_usage = [i for i, e in enumerate(entries) if e.usage is not None]
    if not with_usage:
        return pad_estimate(sum(entry_tokens(e) for e in entries))
    last = with_usage[-1]
    anchor_id = entries[last].message_id
    first = min(
        i for i, e in enumerate(entries) if e.type == "assistant" and e.message_id == anchor_id
    )
    after = sum(entry_tokens(e) for e in entries[first + 1 :] if e.message_id != anchor_id)
    return usage_context_total(entries[last].usage or {}) + pad_estimate(after)


def _roles(messages: list[Any]) -> list[str]:
    return [m["role"] for m in messages]


# -- properties on valid conversations ------------------------------------------------------


@SETTINGS
@given(conversations())
def test_valid_in_valid_out(conv: Conversation) -> None:
    validate_request(normalize_messages(conv.entries))
    for point in conv.call_points:
        if point:
            validate_request(normalize_messages(conv.entries[:point]))


@SETTINGS
@given(conversations())
def test_api_call_points_end_with_a_user_message(conv: Conversation) -> None:
    for point in conv.call_points:
        messages = normalize_messages(conv.entries[:point])
        assert not messages or messages[-1]["role"] == "user"


@SETTINGS
@given(conversations())
def test_normalization_is_idempotent(conv: Conversation) -> None:
    for end in [*conv.call_points, len(conv.entries)]:
        messages = normalize_messages(conv.entries[:end])
        assert normalize_plain_messages(messages) == messages


@SETTINGS
@given(conversations(max_turns=2))  # quadratic: recomputed at every prefix
def test_incremental_normalizer_equals_batch_at_every_prefix(conv: Conversation) -> None:
    normalizer = MessageNormalizer()
    for count, entry in enumerate(conv.entries, start=1):
        normalizer.append(entry)
        messages = normalize_messages(conv.entries[:count])
        assert normalizer.messages == messages
        assert normalizer.last() == (messages[-1] if messages else None)  # no copy, same answer
    assert MessageNormalizer(conv.entries).messages == normalize_messages(conv.entries)


@SETTINGS
@given(conversations(max_turns=2))  # quadratic: recomputed at every prefix
def test_incremental_counter_equals_batch_and_docstring_at_every_prefix(
    conv: Conversation,
) -> None:
    counter = ContextCounter()
    for count, entry in enumerate(conv.entries, start=1):
        counter.append(entry)
        prefix = conv.entries[:count]
        assert counter.total == token_count_with_estimation(prefix) == _oracle_count(prefix)
        assert counter.entries_seen == count


@SETTINGS
@given(conversations())
def test_count_is_monotone_while_no_new_usage_arrives(conv: Conversation) -> None:
    counter = ContextCounter()
    previous = counter.total
    for entry in conv.entries:
        counter.append(entry)
        if entry.usage is None:
            assert counter.total >= previous
        previous = counter.total


@SETTINGS
@given(conversations())
def test_every_tool_use_appears_once_and_is_answered_next(conv: Conversation) -> None:
    messages = normalize_messages(conv.entries)
    used = Counter(
        b["id"]
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    )
    assert set(used) == {t for tools in conv.responses for t in tools}
    assert all(n == 1 for n in used.values())
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or not isinstance(message["content"], list):
            continue
        ids = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
        if not ids:
            continue
        answer = messages[index + 1]
        assert answer["role"] == "user"
        answered = {b["tool_use_id"] for b in answer["content"] if b["type"] == "tool_result"}
        assert ids <= answered


@SETTINGS
@given(conversations())
def test_each_response_becomes_one_assistant_message(conv: Conversation) -> None:
    messages = normalize_messages(conv.entries)
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert len(assistants) == len(conv.responses)
    for message, tool_ids in zip(assistants, conv.responses, strict=True):
        assert [b["id"] for b in message["content"] if b["type"] == "tool_use"] == tool_ids


@SETTINGS
@given(conversations(max_turns=2))  # quadratic: recomputed at every prefix
def test_text_characters_are_preserved(conv: Conversation) -> None:
    for end in range(len(conv.entries) + 1):
        prefix = conv.entries[:end]
        expected = sum(_chars(_entry_content(e)) for e in prefix if _entry_content(e) is not None)
        expected -= _trailing_thinking_chars(prefix)
        got = sum(_chars(_without_repairs(m["content"])) for m in normalize_messages(prefix))
        assert got == expected


def _without_repairs(content: Any) -> Any:
    """Content minus what the normalizer adds to keep a cut-off prefix valid."""
    if content == MISSING_START_TEXT:
        return ""
    if isinstance(content, list):
        return [b for b in content if not (b.get("type") == "tool_result" and b.get("content") == INTERRUPTED_RESULT_TEXT)]
    return content


@SETTINGS
@given(conversations(max_turns=2))
def test_entries_are_not_mutated(conv: Conversation) -> None:
    before = copy.deepcopy([e.data for e in conv.entries])
    normalize_plain_messages(normalize_messages(conv.entries))
    token_count_with_estimation(conv.entries)
    assert [e.data for e in conv.entries] == before


# -- validation and plain normalization on arbitrary message lists -------------------------

RULES = {
    "non-empty",
    "role",
    "first-message-user",
    "alternation",
    "empty-content",
    "duplicate-tool-use-id",
    "tool-use-unanswered",
    "orphan-tool-result",
    "tool-result-order",
    "tool-use-in-user-message",
    "invalid-block",
    "invalid-tool-use-id",
    "duplicate-tool-result",
    "trailing-whitespace",
}

_TOOL_IDS = st.sampled_from(["t1", "t2", "t3"])
_GOOD_BLOCKS = st.one_of(
    st.builds(text_block, nonblank_text),
    st.builds(lambda i: {"type": "tool_use", "id": i, "name": "Bash", "input": {}}, _TOOL_IDS),
    st.builds(lambda i: {"type": "tool_result", "tool_use_id": i, "content": "ok"}, _TOOL_IDS),
    st.just({"type": "thinking", "thinking": "hm", "signature": "s"}),
    st.just(IMAGE),
)
_BAD_BLOCKS = st.one_of(
    st.builds(text_block, st.one_of(blank_text, st.just(""))),
    st.sampled_from([{"type": "text"}, {"type": "tool_use"}, {"type": "tool_result"}, {}]),
    st.sampled_from(["not a block", None, 3]),
)
_CONTENT = st.one_of(
    nonblank_text,
    st.lists(_GOOD_BLOCKS, min_size=1, max_size=4),
    st.lists(st.one_of(_GOOD_BLOCKS, _BAD_BLOCKS), max_size=4),
    st.sampled_from(["", " \n", None, 7]),
)
# Roles alternate unless overridden, so that valid lists are common enough to check.
_ROLE_OVERRIDE = st.sampled_from([None] * 16 + ["user", "assistant", "system", "", "(missing)"])


@st.composite
def plain_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages = []
    for index in range(draw(st.integers(0, 6))):
        override = draw(_ROLE_OVERRIDE)
        role = ("user", "assistant")[index % 2] if override is None else override
        message: dict[str, Any] = {"content": draw(_CONTENT)}
        if role != "(missing)":
            message["role"] = role
        messages.append(message)
    return messages


def _dict_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _assert_api_rules_hold(messages: list[dict[str, Any]]) -> None:
    """The documented rules, checked independently of validate_request."""
    roles = _roles(messages)
    assert roles and roles[0] == "user"
    assert set(roles) <= {"user", "assistant"}
    assert all(a != b for a, b in itertools.pairwise(roles))
    tool_use_ids: list[str] = []
    previous_uses: set[str] = set()
    for message in messages:
        content = message["content"]
        assert not isinstance(content, list) or all(isinstance(b, dict) for b in content)
        blocks = _dict_blocks(content)
        assert blocks
        if message["role"] == "user":
            assert not any(b.get("type") == "tool_use" for b in blocks)
        assert all(str(b.get("text", "")).strip() for b in blocks if b.get("type") == "text")
        uses = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
        assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in uses)
        assert all(isinstance(b.get("input"), dict) for b in blocks if b.get("type") == "tool_use")
        results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
        assert len(results) == len(set(results))
        kinds = [b.get("type") == "tool_result" for b in blocks]
        assert kinds == sorted(kinds, reverse=True)  # tool results first
        assert set(results) <= previous_uses
        assert previous_uses <= set(results)
        if results:
            assert message["role"] == "user"
        tool_use_ids += [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        previous_uses = uses if message["role"] == "assistant" else set()
    assert not previous_uses
    assert len(tool_use_ids) == len(set(tool_use_ids))
    last = _dict_blocks(messages[-1]["content"])
    if messages[-1]["role"] == "assistant" and last[-1].get("type") == "text":
        assert last[-1]["text"] == last[-1]["text"].rstrip()


@SETTINGS
@given(plain_messages())
def test_validate_passes_or_raises_invalid_request(messages: list[dict[str, Any]]) -> None:
    try:
        validate_request(messages)
    except InvalidRequestError as exc:
        assert exc.rule in RULES
        assert exc.index is None or 0 <= exc.index < len(messages)
        where = "messages" if exc.index is None else f"messages[{exc.index}]"
        assert str(exc).startswith(f"{where}: {exc.rule}: ")
        return
    _assert_api_rules_hold(messages)


@SETTINGS
@given(plain_messages())
def test_plain_normalization_merges_runs_and_drops_empties(messages: list[dict[str, Any]]) -> None:
    messages = [m for m in messages if m.get("role") in ("user", "assistant")]
    normalized = normalize_plain_messages(messages)
    roles = _roles(normalized)
    assert all(a != b for a, b in itertools.pairwise(roles))
    for message in normalized:
        blocks = _dict_blocks(message["content"])
        assert blocks
        assert all(str(b.get("text", "")).strip() for b in blocks if b.get("type") == "text")
    assert normalize_plain_messages(normalized) == normalized
