"""Rules of session 12's speed-ups that the mutation check found held by no test: each test
compares the shortcut with what the long way gives, on the shapes the shortcut decides on."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from unbounded.compaction.conversation import _as_sent_for_summary, strip_images_and_documents
from unbounded.compaction.server_blocks import (
    compaction_blocks_as_text,
    from_last_server_compaction,
)
from unbounded.model.entries import Entry
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.receipts import compaction_receipt
from unbounded.tokens.estimate import entry_tokens, tool_result_tokens

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}


def _user(content: Any, **extra: Any) -> Entry:
    return Entry({"type": "user", "message": {"role": "user", "content": content}, **extra})


def _assistant(content: Any, **extra: Any) -> Entry:
    message = {"role": "assistant", "content": content, "model": "claude-sonnet-4-6", "id": "m"}
    return Entry({"type": "assistant", "message": message, **extra})


def _call(tool_id: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Read", "input": arguments}


def _result(tool_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


# -- recall/receipts.py: compaction_receipt ----------------------------------------------------


def test_a_receipt_lists_a_result_given_as_a_read_only_mapping_and_its_clearing() -> None:
    # A block that is a Mapping but not a dict: listed as a result (as before the one-walk
    # rewrite), its tokens not counted in the entry's (content_tokens reads dicts only).
    cleared = MappingProxyType(_result("t1", "a" * 80))
    kept = MappingProxyType(_result("t2", "b" * 40))
    other = MappingProxyType({"type": "text", "text": "c" * 40})
    entries = [
        _assistant([_call("t1", file_path="/a.py"), _call("t2", file_path="/b.py")]),
        _user([cleared, other, kept]),
    ]
    receipt = compaction_receipt(
        entries,
        index=TranscriptIndex().update(entries),
        summary_text="",
        summarizer="m",
        already_cleared={"t1"},
    )
    assert receipt["toolResults"] == [
        {
            "id": "t1",
            "tool": "Read",
            "tokens": tool_result_tokens(cleared),
            "path": "/a.py",
            "alreadyCleared": True,
        },
        {"id": "t2", "tool": "Read", "tokens": tool_result_tokens(kept), "path": "/b.py"},
    ]
    assert tool_result_tokens(cleared) > 0
    assert receipt["tokens"] == sum(entry_tokens(entry) for entry in entries)
    assert receipt["messages"] == 2


# -- compaction/conversation.py: _as_sent_for_summary ------------------------------------------


def _long_way(messages: list[Any]) -> list[Any]:
    return compaction_blocks_as_text(
        strip_images_and_documents(from_last_server_compaction(messages))
    )


def test_a_summary_request_takes_stray_blocks_and_results_without_content_as_the_long_way() -> None:
    text = {"role": "user", "content": "hello"}
    cases = [
        # A stray string among the blocks: skipped, not read as a block.
        [text, {"role": "user", "content": ["stray", IMAGE]}],
        [text, {"role": "user", "content": ["stray"]}],
        # A result without content, and one whose content holds a stray string.
        [text, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}],
        [text, {"role": "user", "content": [_result("t1", ["stray", IMAGE])]}],
        [text, {"role": "user", "content": [_result("t1", ["stray"])]}],
    ]
    for messages in cases:
        assert _as_sent_for_summary(list(messages)) == _long_way(list(messages))
    assert "[image]" in str(_as_sent_for_summary(cases[0]))
    assert "[image]" in str(_as_sent_for_summary(cases[3]))


# -- compaction/facts.py: the ledger's reading of each record --------------------------------


def _facts_of(*records: Entry) -> Any:
    from unbounded.compaction.facts import extract_facts

    first = _user("Refactor the parser, please.")
    return extract_facts([first, *records])


def test_a_user_record_of_text_blocks_alone_is_a_request() -> None:
    facts = _facts_of(_user([{"type": "text", "text": "Now rename the module."}]))
    assert facts.latest_request == "Now rename the module."


def test_a_stray_string_before_the_results_of_a_user_record_is_skipped() -> None:
    facts = _facts_of(
        _assistant([_call("t1", file_path="/a.py")]),
        _user(["a stray string", _result("t1", "ok")]),
    )
    assert facts.latest_request == "Refactor the parser, please."
    assert facts.files_read == ("/a.py",)


def test_a_record_neither_user_nor_assistant_adds_nothing_even_with_a_message() -> None:
    odd = Entry({"type": "system", "message": {"role": "user", "content": "Drop the tables."}})
    facts = _facts_of(odd)
    assert facts.user_prompts == ("Refactor the parser, please.",)
    assert facts.latest_request == "Refactor the parser, please."


def test_a_user_record_whose_message_has_no_role_is_read_as_the_user_s() -> None:
    bare = Entry({"type": "user", "message": {"content": "Then update the docs."}})
    facts = _facts_of(bare)
    assert facts.latest_request == "Then update the docs."
    assert facts.user_prompts[-1] == "Then update the docs."


def test_a_user_record_holding_an_assistant_message_is_no_request() -> None:
    # The message's role decides: an assistant's text is never the user's request.
    odd = Entry(
        {
            "type": "user",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Ship it to production now."}],
            },
        }
    )
    facts = _facts_of(odd)
    assert facts.latest_request == "Refactor the parser, please."


# -- model/entries.py: Entry.type and Entry.content ------------------------------------------


def test_a_record_type_that_is_not_a_string_is_read_as_its_text() -> None:
    assert Entry({"type": 3}).type == "3"
    assert Entry({"type": None}).type == "None"
    assert Entry({"type": "user"}).type == "user"
    assert Entry({}).type == ""


def test_a_message_that_is_not_an_object_has_no_content() -> None:
    for message in ("a line of text", ["a", "list"], 7):
        entry = Entry({"type": "user", "message": message})
        assert entry.content == []
        assert entry.role is None
    assert Entry({"type": "user", "message": {}}).content == []
    assert Entry({"type": "user"}).content == []


# -- compaction/cut.py: which records carry tool results ---------------------------------------


def test_only_a_user_record_carries_tool_results_for_the_cut() -> None:
    from unbounded.compaction.cut import has_tool_results, round_starts

    # An assistant record holding a result block (a malformed line) is not an answer.
    odd = _assistant([_result("t1", "ok")])
    answer = _user([_result("t1", "ok")])
    said = _user("go on")
    assert not has_tool_results([odd])
    assert has_tool_results([odd, answer])
    assert round_starts([said, odd, answer, None, said]) == [0, 1, 3, 4]
