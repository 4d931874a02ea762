"""The shortcuts a compaction's own work takes over a long conversation give what the long
way gives: the receipt's counts read in one walk of the blocks, the facts ledger skipping the
sorting of tool-result-only records, the summary request's rewrites (media, server
compactions) skipped when no message holds such a block."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.conversation import _as_sent_for_summary, strip_images_and_documents
from unbounded.compaction.facts import extract_facts
from unbounded.compaction.server_blocks import (
    compaction_blocks_as_text,
    from_last_server_compaction,
)
from unbounded.model.entries import SYNTHETIC_MODEL, Entry
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.receipts import compaction_receipt
from unbounded.tokens.estimate import entry_tokens, tool_result_tokens

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}


def _user(content: Any, **extra: Any) -> Entry:
    return Entry({"type": "user", "message": {"role": "user", "content": content}, **extra})


def _assistant(content: Any, model: str = "claude-sonnet-4-6", **extra: Any) -> Entry:
    message = {"role": "assistant", "content": content, "model": model, "id": "msg_1"}
    return Entry({"type": "assistant", "message": message, **extra})


def _call(tool_id: str, name: str = "Read", **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


def _result(tool_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def records() -> list[Entry]:
    """Every shape of record a receipt counts, or does not."""
    return [
        _user("Refactor the parser, please."),
        _assistant([{"type": "text", "text": "Reading it."}, _call("t1", file_path="/a.py")]),
        _user([_result("t1", "def parse():\n    return 1\n" * 30)]),
        _assistant(
            [
                {"type": "thinking", "thinking": "the tests next", "signature": "s"},
                _call("t2", "Bash", command="pytest -q"),
                _call("t3", file_path="/b.py"),
            ]
        ),
        _user(
            [
                _result("t2", [{"type": "text", "text": "1 failed"}, IMAGE], is_error=True),
                _result("t3", ""),
                {"type": "text", "text": "and keep the old names"},
                IMAGE,
            ]
        ),
        _assistant(
            [{"type": "text", "text": "API error"}], SYNTHETIC_MODEL, isApiErrorMessage=True
        ),
        Entry({"type": "attachment", "attachment": {"type": "todo", "content": []}}),
        Entry({"type": "system", "subtype": "informational", "content": "note"}),
        _user({"unexpected": "shape"}),
        _user([_result("t4", "x" * 401), "a stray string"]),
        # Not a list: its results listed, its tokens not counted.
        _user((_result("t5", "y" * 40), {"type": "text", "text": "z" * 40})),
    ]


def test_a_compaction_receipt_counts_what_each_record_adds_and_each_result() -> None:
    entries = records()
    receipt = compaction_receipt(
        entries,
        index=TranscriptIndex().update(entries),
        summary_text="",
        summarizer="m",
        already_cleared={"t3"},
    )
    assert receipt["tokens"] == sum(entry_tokens(entry) for entry in entries)
    assert receipt["messages"] == sum(1 for e in entries if e.type in ("user", "assistant"))
    results = [
        block
        for entry in entries
        if entry.type == "user" and not isinstance(entry.content, str)
        for block in entry.content
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert [item["tokens"] for item in receipt["toolResults"]] == [
        tool_result_tokens(block) for block in results
    ]
    assert [item.get("alreadyCleared", False) for item in receipt["toolResults"]] == [
        False,
        False,
        True,
        False,
        False,
    ]


def test_the_facts_take_a_request_from_a_record_of_results_and_text_but_not_results_alone() -> None:
    entries = records()
    facts = extract_facts(entries)
    assert facts.latest_request == "and keep the old names"
    assert facts.files_read == ("/a.py", "/b.py")
    assert facts.commands == ("pytest -q",)
    assert [error.text for error in facts.errors] == ["1 failed"]
    # Tool results alone are no request: the latest stays the user's first message.
    facts = extract_facts([*entries[:4], _user([_result("t2", "ok"), _result("t3", "ok")])])
    assert facts.latest_request == "Refactor the parser, please."
    # Results and text: the text is a request.
    said = _user([_result("t2", "ok"), {"type": "text", "text": "now the docs"}])
    assert extract_facts([*entries[:4], said]).latest_request == "now the docs"
    # Results and media without text are no request either.
    media = _user([_result("t2", "ok"), IMAGE])
    assert extract_facts([*entries[:4], media]).latest_request == "Refactor the parser, please."
    # A results-only record marked as meta still has its error results read.
    meta = _user([_result("t2", "boom", is_error=True)], isMeta=True)
    assert [error.text for error in extract_facts([*entries[:4], meta]).errors] == ["boom"]


def _long_way(messages: list[Any]) -> list[Any]:
    return compaction_blocks_as_text(
        strip_images_and_documents(from_last_server_compaction(messages))
    )


def test_a_summary_request_rewrites_media_and_server_compactions_wherever_they_are() -> None:
    text = {"role": "user", "content": "hello"}
    answer = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    cases = [
        [text, answer],
        [text, {"role": "user", "content": [IMAGE]}],
        [text, {"role": "user", "content": [_result("t1", [IMAGE])]}],
        [text, {"role": "user", "content": [_result("t1", [_result("t0", [IMAGE])])]}],
        [
            text,
            {"role": "assistant", "content": [{"type": "compaction", "content": "before"}]},
            {"role": "user", "content": "go on"},
        ],
        [text, {"role": "user", "content": [_result("t1", [{"type": "text", "text": "ok"}])]}],
    ]
    for messages in cases:
        sent = _as_sent_for_summary(list(messages))
        assert sent == _long_way(list(messages))
        assert sent is not messages
    assert "[image]" in str(_as_sent_for_summary(cases[2]))
    assert "[image]" in str(_as_sent_for_summary(cases[3]))
    assert "before" in str(_as_sent_for_summary(cases[4]))
