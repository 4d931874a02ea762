"""The continuation diagnostics: what the next turns used, what a context holds and lists.

They are diagnostics, never targets: a context cannot raise its score by listing names, since
everything it lists that the agent never used lowers its precision.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import corpus_files
from unbounded import load_transcript
from unbounded.compaction.extractive import extractive_summary
from unbounded.compaction.facts import compaction_points
from unbounded.evaluation.continuation import (
    Counts,
    KnownItems,
    TextIndex,
    after_point,
    code_tokens,
    continuation_scores,
    used_in_turns,
    word_tokens,
)
from unbounded.model.entries import Entry
from unbounded.model.names import identifiers_in
from unbounded.model.normalize import normalize_messages


def test_code_tokens_are_the_parts_of_identifier_shaped_strings() -> None:
    assert code_tokens("call load_config() in app.config then SessionLive, btn-primary, b7636e2 and HTTPServer2") == {
        "load", "config", "session", "live", "primary", "b7636e2", "http", "server2",
    }
    assert code_tokens("plain prose words are not code, nor is main") == set()
    assert code_tokens("x" * 500 + "_long") == set()  # data, not names
    # A context holds a token whether it gives it in code or in prose.
    assert {"header", "parser"} <= word_tokens("the Header parser")
    assert "parse" in word_tokens("parse_header") and "header" in word_tokens("parseHeader")


def entries_for(names: list[str], used: list[str]) -> tuple[list[Entry], list[Entry]]:
    """Records before a point (a module listing `names`), and after it (edits of `used`)."""
    listing = "\n".join(f"def {name}(): ..." for name in names)
    before = [
        Entry.user("Fix the parser: parse_header drops the last field."),
        Entry.assistant([{"type": "tool_use", "id": "r", "name": "Read", "input": {"file_path": "/r/parser.py"}}], message_id="m1"),
        Entry.user([{"type": "tool_result", "tool_use_id": "r", "content": listing}]),
    ]
    after = [
        Entry.assistant([{"type": "tool_use", "id": f"e{n}", "name": "Edit", "input": {"file_path": "/r/parser.py", "old_string": f"def {name}(): ...", "new_string": f"def {name}(): return 1"}}], message_id=f"a{n}")
        for n, name in enumerate(used)
    ]
    return before, after


def test_counts_held_used_and_listed() -> None:
    before, after = entries_for(["parse_header", "load_config", "emit_event"], ["parse_header"])
    known = KnownItems.of_entries(before)
    scores = continuation_scores(known, after, TextIndex("Edit parse_header in parser.py; load_config is fine."), None)
    # used: parse, header and parser (the Edit's strings, its path included); listed: those
    # and load, config
    assert scores["identifiers"] == Counts(held=3, used=3, listed=5)
    assert scores["files"] == Counts(held=1, used=1, listed=1)
    assert scores["identifiers"].recall == 1.0 and scores["identifiers"].precision == 0.6
    assert scores["identifiers"].score == pytest.approx(0.75)
    assert Counts(0, 0, 3).score is None and Counts(0, 2, 0).score == 0.0 and Counts(0, 2, 0).precision is None
    assert used_in_turns(after, 0).identifiers == set()


def test_a_names_line_does_not_raise_the_score() -> None:
    """The bag of names that carried the old identifier score: padded with a line of every
    name seen, a summary holds more of what the agent used next, and scores lower."""
    names = [f"{verb}_{noun}" for verb in ("parse", "load", "emit", "render", "check", "merge") for noun in ("header", "config", "event", "table", "token", "field", "record", "schema")]
    before, after = entries_for(names, ["parse_header", "merge_field", "check_token"])
    known = KnownItems.of_entries(before)
    plain = "The user wants parse_header fixed in parser.py: it drops the last field. Next: edit parse_header, then run the tests."
    padded = plain + "\nNames in the recent work: " + ", ".join(names)
    plain_score = continuation_scores(known, after, TextIndex(plain), None)["identifiers"]
    padded_score = continuation_scores(known, after, TextIndex(padded), None)["identifiers"]
    assert padded_score.recall is not None and plain_score.recall is not None
    assert padded_score.recall > plain_score.recall  # it does hold more of what was used...
    assert padded_score.score is not None and plain_score.score is not None
    assert padded_score.score < plain_score.score  # ...and lists far more that was not


CORPUS_POINTS = [p for p in corpus_files("*.jsonl") if p.name.startswith(("marot-spotter_4d5611e5", "marot-spotter_8463c716", "Smartagent"))]


@pytest.mark.corpus
def test_on_the_corpus_a_names_line_does_not_raise_the_score() -> None:
    """Over the recorded compaction points, our offline summary with a line of the 260 names
    most frequent in the recent records scores no higher on code tokens than without it (it
    may at a point: the offline hand-over names few identifiers of its own)."""
    if not CORPUS_POINTS:
        pytest.skip("../shared/corpus/raw is not present")
    plain_total = padded_total = 0.0
    for path in CORPUS_POINTS:
        main = load_transcript(path).main_thread()
        for point in compaction_points(main):
            after = after_point(main, point.boundary_index)
            known = KnownItems.of_entries(point.before)
            summary = extractive_summary(normalize_messages(point.before))
            recent: Counter[str] = Counter()
            for entry in point.before[-200:]:
                recent.update(identifiers_in(json.dumps(entry.data.get("message", {}))))
            line = "Names in the recent work: " + ", ".join(name for name, _ in recent.most_common(260))
            plain = continuation_scores(known, after, TextIndex(summary), 30)["identifiers"]
            padded = continuation_scores(known, after, TextIndex(summary + "\n" + line), 30)["identifiers"]
            plain_total += plain.score or 0
            padded_total += padded.score or 0
    assert padded_total <= plain_total, (plain_total, padded_total)
