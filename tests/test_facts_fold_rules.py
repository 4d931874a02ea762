"""The rules of the facts ledger and of its folds, one test each: the facts a plain message or a
meta record gives, the ledger's limits and cuts, and which path the folds take (`taken_from`,
the records they read, whether the old walk runs), with inputs where the wrong path gives
another ledger than `facts_ledger_for` (a record replaced, a copy evicted, another list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import unbounded.compaction.facts as facts_module
from unbounded.compaction.facts import (
    LEDGER_TITLE,
    Facts,
    PrefixFacts,
    RunningFacts,
    _Collector,
    extract_facts,
    facts_ledger_for,
    render_facts_ledger,
    retention_scores,
    shown_items,
)
from unbounded.model.entries import Entry
from unbounded.tokens.estimate import rough_token_count


def _result(text: str, *, error: bool = False, call: str = "c1") -> Entry:
    block = {"type": "tool_result", "tool_use_id": call, "content": text, "is_error": error}
    return Entry({"type": "user", "message": {"role": "user", "content": [block]}})


def _call(call: str = "c1", command: str = "make") -> Entry:
    block = {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": command}}
    return Entry({"type": "assistant", "message": {"role": "assistant", "content": [block]}})


def _items(head: Sequence[Entry | None]) -> list[Entry]:
    return [entry for entry in head if entry is not None]


def _summary(latest: str, *, entry: bool = False) -> Any:
    text = (
        "This session is being continued from a previous conversation.\n\n"
        f"The user's latest request (verbatim):\n> {latest}\n"
    )
    if entry:
        message = {"role": "user", "content": text}
        return Entry({"type": "user", "isCompactSummary": True, "message": message})
    return {"role": "user", "content": text}


# -- what the records give -------------------------------------------------------------------


def test_a_meta_record_gives_its_error_results_only() -> None:
    blocks = [
        "a bare string",
        {"type": "text", "text": "Always lint.", "is_error": True, "content": "not a result"},
        {"type": "tool_result", "tool_use_id": "c1", "content": "boom", "is_error": True},
    ]
    meta = Entry({"type": "user", "isMeta": True, "message": {"role": "user", "content": blocks}})
    facts = extract_facts([_call(), meta])
    assert [(error.tool, error.text) for error in facts.errors] == [("Bash", "boom")]
    assert facts.user_prompts == ()


def test_a_plain_user_message_is_a_request_and_an_assistant_s_is_not() -> None:
    rule = "Please always run the linter before you commit."
    result = {"type": "tool_result", "tool_use_id": "x", "content": "ok"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": rule},
        {"role": "assistant", "content": "Sure, I will lint first."},
        {"role": "user", "content": [result]},
    ]
    facts = extract_facts(messages)
    assert facts.latest_request == rule
    assert facts.standing == (rule,)


def test_with_no_request_the_latest_summary_s_request_is_carried() -> None:
    for entry in (False, True):
        facts = extract_facts(
            [_summary("first ask", entry=entry), _summary("second ask", entry=entry)]
        )
        assert facts.latest_request == "second ask"


# -- the ledger's limits and cuts --------------------------------------------------------------


def test_shown_items_keep_the_first_and_the_most_recent() -> None:
    assert shown_items(list("abcd"), 2) == ["a", "(2 more)", "d"]
    assert shown_items(list("abcde"), 3) == ["a", "(2 more)", "d", "e"]
    assert shown_items(list("abc"), 1) == ["a", "(2 more)"]


def test_a_user_message_is_shown_up_to_300_characters_and_a_command_up_to_160() -> None:
    facts = Facts(user_prompts=("p" * 300, "q" * 301), commands=("c" * 160, "d" * 161))
    text = render_facts_ledger(facts, 10_000)
    assert f'- "{"p" * 300}"' in text
    assert f'- "{"q" * 300}…"' in text
    assert f"- {'c' * 160}\n" in text
    assert f"- {'d' * 160}…\n" in text and "d" * 161 not in text


def _read_ledger(paths: list[str], keep: int) -> str:
    return f"{LEDGER_TITLE}\nFiles read ({len(paths)}): " + ", ".join(shown_items(paths, keep))


def test_the_default_budget_is_2000_tokens() -> None:
    # One path long enough that the whole ledger is 2,001 tokens: cut at the default.
    pad = 8002 - len(_read_ledger([""], 1))
    whole = _read_ledger(["p" * pad], 1)
    assert rough_token_count(whole) == 2001
    facts = Facts(files_read=("p" * pad,))
    assert render_facts_ledger(facts, 2001) == whole
    assert render_facts_ledger(facts) == _read_ledger(["p" * pad], 0)


def test_a_list_over_budget_is_cut_by_an_eighth_of_it_at_a_time() -> None:
    paths = [f"/repo/src/module_{n:02}.py" for n in range(17)]
    facts = Facts(files_read=tuple(paths))
    tokens = [rough_token_count(_read_ledger(paths, keep)) for keep in range(18)]
    assert tokens == sorted(tokens) and len(set(tokens)) == 18
    # From 17 the first step is 2 ((17 - 1) // 8): 16 is never tried, so 15 is shown.
    assert render_facts_ledger(facts, tokens[16]) == _read_ledger(paths, 15)
    # From 15 the step is 1: 14 is tried, and fits.
    assert render_facts_ledger(facts, tokens[14]) == _read_ledger(paths, 14)
    # Too small a budget for anything: every list is cut to its count.
    assert render_facts_ledger(facts, 1) == _read_ledger(paths, 0)


def test_a_path_kept_whole_counts_even_without_a_base_name() -> None:
    facts = Facts(files_read=("/", "/repo/a.py"))
    assert retention_scores(facts, "we listed / and then a.py")["files_read"] == (2, 2)


# -- RunningFacts ------------------------------------------------------------------------------


class _Odd:
    def __str__(self) -> str:
        raise ValueError("unreadable")


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Entry]:
    read: list[Entry] = []
    real = _Collector.entry

    def entry(self: _Collector, record: Entry) -> None:
        read.append(record)
        real(self, record)

    monkeypatch.setattr(_Collector, "entry", entry)
    return read


def test_a_stopped_running_fold_reads_nothing_more_and_says_it_holds_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    odd = Entry(
        {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": _Odd()}]}}
    )
    view: list[Entry] = [_call(), _result("ok")]
    running = RunningFacts()
    assert running.records == 0
    running.advance(view)
    assert running.records == 2
    view.append(odd)
    running.advance(view)  # it stops there, without raising
    assert running.records == 0
    read = _counting(monkeypatch)
    view.extend([_call("c2"), _result("fine", call="c2")])
    running.advance(view)
    assert read == []
    assert running.records == 0
    assert running.facts_of(view) is None


# -- PrefixFacts: which copy it takes ----------------------------------------------------------


def test_a_fold_takes_nothing_before_it_is_asked() -> None:
    assert PrefixFacts().taken_from == 0


def test_by_default_a_copy_every_256_records_the_latest_8_kept() -> None:
    records: list[Entry | None] = [_call(), _result("boom", error=True)]
    records += [_result("ok")] * 2598
    fold = PrefixFacts()
    fold.advance(records, 10_000)
    # Copies at 256 .. 2560: the latest 8 are 768 .. 2560.
    for length, taken in ((700, 0), (1000, 768), (2599, 2560), (2600, 2600)):
        head = records[:length]
        assert fold.ledger_of(head, records)(_items(head)) == facts_ledger_for(_items(head))
        assert fold.taken_from == taken, length


def test_a_copy_evicted_by_the_keep_limit_is_not_taken() -> None:
    records: list[Entry | None] = [_call(f"c{n}", f"make t{n}") for n in range(10)]
    fold = PrefixFacts(every=2, keep=2)
    fold.advance(records, 100)
    # Copies at 2, 4, 6, 8, 10, the latest 2 kept (and the empty one).
    for length, taken in ((5, 0), (7, 0), (9, 8), (10, 10)):
        head = records[:length]
        ledger = fold.ledger_of(head, records)(_items(head))
        assert ledger == facts_ledger_for(_items(head))
        assert f"make t{length - 1}" in ledger and f"make t{length}" not in ledger
        assert fold.taken_from == taken, length


def test_a_message_never_sent_leaves_the_fold_whole() -> None:
    records: list[Entry | None] = [_call(), _result("boom", error=True), None, _call("c2")]
    records.append(_result("ok", call="c2"))
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    ledger = fold.ledger_of(records, records)(_items(records))
    assert ledger == facts_ledger_for(_items(records))
    assert fold.taken_from == 5  # the fold itself, not its copy at 4


def _spy_on_the_old_walk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = facts_module.facts_ledger_for

    def walked(items: list[Entry], max_tokens: int = 2000) -> str:
        calls.append(len(items))
        return real(items, max_tokens)

    monkeypatch.setattr(facts_module, "facts_ledger_for", walked)
    return calls


def test_the_records_expected_are_folded_and_others_read_the_old_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records: list[Entry | None] = [_call(), None, _result("boom", error=True), _call("c2")]
    records += [_result("ok", call="c2"), _call("c3")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    head = records[:5]
    ledger = fold.ledger_of(head, records)
    assert fold.taken_from == 4
    expected = facts_ledger_for(_items(head))
    walks = _spy_on_the_old_walk(monkeypatch)
    assert ledger(_items(head)) == expected
    assert walks == []  # the copy at 4 and one record after it: no walk
    other = [_call("c9", "rm -rf build"), _result("disk full", error=True, call="c9")]
    assert ledger(other) == facts_ledger_for(other)
    assert "disk full" in ledger(other) and "boom" not in ledger(other)


# -- PrefixFacts: records replaced or differing ------------------------------------------------


def test_an_inert_result_replaced_by_an_error_stops_the_fold() -> None:
    records: list[Entry | None] = [_call(), _result("ok"), _call("c2"), _result("ok", call="c2")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    records[3] = _result("it failed", error=True, call="c2")
    fold.replaced(3, _result("ok", call="c2"), records[3])
    ledger = fold.ledger_of(records, records)(_items(records))
    assert ledger == facts_ledger_for(_items(records))
    assert "it failed" in ledger
    assert fold.taken_from == 2


def test_a_record_replaced_by_none_or_from_none_keeps_the_fold() -> None:
    records: list[Entry | None] = [
        _call(),
        _result("ok"),
        None,
        _call("c2"),
        _result("ok", call="c2"),
    ]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    old = records[1]
    records[1] = None
    fold.replaced(1, old, None)
    records[2] = _result("[cleared]")
    fold.replaced(2, None, records[2])
    ledger = fold.ledger_of(records, records)(_items(records))
    assert ledger == facts_ledger_for(_items(records))
    assert fold.taken_from == 5


def _results(blocks: Any, **fields: Any) -> Entry:
    return Entry({"type": "user", **fields, "message": {"role": "user", "content": blocks}})


def test_records_without_facts_replaced_keep_the_fold() -> None:
    """A meta record of results, one whose message says another role, and one with no blocks
    give nothing: replacing an inert record by one of them keeps the fold."""
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    for new in (
        _results([result], isMeta=True),
        Entry({"type": "user", "message": {"role": "assistant", "content": [result]}}),
        _results([]),
    ):
        records: list[Entry | None] = [_call(), _result("ok"), _call("c2")]
        fold = PrefixFacts(every=2, keep=4)
        fold.advance(records, 100)
        records[1] = new
        fold.replaced(1, _result("ok"), new)
        ledger = fold.ledger_of(records, records)(_items(records))
        assert ledger == facts_ledger_for(_items(records))
        assert fold.taken_from == 3


def test_records_with_facts_or_unreadable_replaced_stop_the_fold() -> None:
    """A summary of results (its empty text is the latest summary), an attachment setting the
    todos, and content that is not a list of blocks are no placeholders of a result."""
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    attachment = Entry(
        {
            "type": "attachment",
            "attachment": {
                "type": "todo",
                "content": [{"content": "ship it", "status": "pending"}],
            },
            "message": {"role": "user", "content": [result]},
        }
    )
    for new in (_results([result], isCompactSummary=True), attachment, _results(7)):
        records: list[Entry | None] = [_summary("first ask", entry=True), _call(), _result("ok")]
        records.append(_call("c2"))
        fold = PrefixFacts(every=2, keep=4)
        fold.advance(records, 100)
        records[2] = new
        fold.replaced(2, _result("ok"), new)
        ledger = fold.ledger_of(records, records)(_items(records))
        assert ledger == facts_ledger_for(_items(records))
        assert fold.taken_from == 2
    assert "first ask" not in facts_ledger_for(
        _items([records[0], _results([result], isCompactSummary=True)])
    )
    assert "ship it" in facts_ledger_for(_items([attachment]))


def test_a_head_differing_by_a_record_with_facts_is_read_whole() -> None:
    records: list[Entry | None] = [_call(), _result("ok"), _call("c2"), _result("ok", call="c2")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    # The compaction's head holds an error where the list holds a plain result.
    head = [records[0], _result("segfault", error=True), *records[2:]]
    ledger = fold.ledger_of(head, records)(_items(head))
    assert ledger == facts_ledger_for(_items(head))
    assert "segfault" in ledger
    assert fold.taken_from == 0


def test_a_head_longer_than_the_list_given_is_read_whole() -> None:
    records: list[Entry | None] = [_call(), _result("ok"), _call("c2"), _result("ok", call="c2")]
    records += [_call("c3"), _result("ok", call="c3")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    head = [*records[:3], _result("segfault", error=True, call="c2"), *records[4:]]
    ledger = fold.ledger_of(head, records[:3])(_items(head))
    assert ledger == facts_ledger_for(_items(head))
    assert "segfault" in ledger
    assert fold.taken_from == 0


# -- PrefixFacts: media replaced in ------------------------------------------------------------


def _image_result(call: str = "c1") -> Entry:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    block = {"type": "tool_result", "tool_use_id": call, "content": [image]}
    return Entry({"type": "user", "message": {"role": "user", "content": [block]}})


def test_media_replaced_in_is_known_from_its_first_position() -> None:
    records: list[Entry | None] = [_call(), _result("ok"), _call("c2"), _result("ok", call="c2")]
    records.append(_call("c3"))
    fold = PrefixFacts()
    fold.advance(records, 10)
    assert fold.rewrites(records[:4], records) is False
    records[3] = _image_result("c2")
    fold.replaced(3, _result("ok", call="c2"), records[3])  # none known before it
    assert fold.rewrites(records[:3], records) is False
    assert fold.rewrites(records[:4], records) is None
    records[1] = _image_result()
    fold.replaced(1, _result("ok"), records[1])
    records[3] = _image_result("c2")
    fold.replaced(3, records[3], records[3])  # a later one: the first stays known
    assert fold.rewrites(records[:2], records) is None
