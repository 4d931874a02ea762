"""Recall and the outputs kept on the side, attacked: links, folders and FIFOs planted in
`tool-outputs/`, tool ids that used to share a file, a kept copy deleted or replaced, and
arguments and outputs made to cost or to return as much as possible.

Each test here failed before the fix it names (side files keyed by a collision-free encoding,
recall reading only regular files reached without links, arguments and answers bounded)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction.large_output import cap_text, is_kept_copy_of
from unbounded.errors import RecallArgumentError
from unbounded.events import Event, RecallServed
from unbounded.model.entries import Entry
from unbounded.model.tool_ids import RENAMED_FIELD
from unbounded.policy import Policy
from unbounded.recall import RecallContext, RecallRequest, TranscriptIndex, answer_recall
from unbounded.recall.lookup import GONE_NOTE, MAX_QUERY_TERMS, _terms, _words
from unbounded.recall.schema import MAX_ARGUMENT_CHARS
from unbounded.session import Session, SessionConfig
from unbounded.side_outputs import (
    MAX_ENCODED_CHARS,
    legacy_side_output_name,
    parse_side_output_name,
    side_output_name,
)
from unbounded.storage import FolderStore, MemoryStore
from unbounded.tokens.budget import cap_token_count, cut_to_tokens, fits

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")

TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
CONFIG = SessionConfig(model="claude-sonnet-4-5", tools=TOOLS, context_window=200_000)
CAP = 500  # Policy.tool_result_max_tokens: outputs over ~2,000 characters are kept aside


def output(tag: str, lines: int = 400) -> str:
    """A long tool output whose every line names `tag`."""
    return "".join(f"{tag} line {n}\n" for n in range(lines))


def open_session(folder: Path, policy: Policy | None = None, **options: Any) -> Session:
    return Session.open(folder, CONFIG, policy=policy or Policy(tool_result_max_tokens=CAP), **options)


def run(session: Session, tool_id: str, content: Any, command: str = "make") -> None:
    """One tool call of the model and its result."""
    session.add_user(f"run {command}")
    session.record({"content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}], "usage": {"input_tokens": 10, "output_tokens": 2}})
    session.add_tool_results([{"type": "tool_result", "tool_use_id": tool_id, "content": content}])


def as_compacted(session: Session) -> RecallContext:
    """What recall reads when all of the session was compacted away (everything searchable)."""
    return RecallContext(entries=session.entries, view=[], cleared_ids=(), index=TranscriptIndex().update(session.entries), budget_tokens=session.policy.recall_max_tokens, load_output=session.store.load_tool_output)


def recall(session: Session, **arguments: Any) -> str:
    result = session.run_recall({"type": "tool_use", "id": "toolu_recall", "name": "recall", "input": arguments})
    text = result["content"]
    assert isinstance(text, str)
    return text


@pytest.fixture
def deadline() -> Iterator[None]:
    """A guard against a hang (a read blocked on a FIFO): SIGALRM raises after 20 s."""

    def expire(*_: object) -> None:
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# -- the names of kept outputs ------------------------------------------------------------------


@pytest.mark.parametrize("tool_id", ["toolu_01ABC", "call.1", "call:1", "call/1", "...", "", "é/ü", "x" * 120, "a\udc80b"])
@pytest.mark.parametrize("part", [0, 1, 12])
def test_names_are_reversible_and_safe_in_a_file_name(tool_id: str, part: int) -> None:
    name = side_output_name(tool_id, part)
    assert parse_side_output_name(name) == (tool_id, part)
    assert "/" not in name and name == name.lower() and not name.startswith(".")
    assert len(f"{name}.txt".encode()) <= 255


def test_distinct_ids_and_parts_never_share_a_name() -> None:
    ids = ["call.1", "call:1", "call/1", "call_1", "CALL_1", "Call_1", "x-1", "x", "...", "..", "", "-", "_"]
    names = {side_output_name(i, p) for i in ids for p in (0, 1, 2)}
    assert len(names) == len(ids) * 3
    # the old naming folded every one of these onto `call_1` (and `x` part 1 onto `x-1`)
    assert {legacy_side_output_name(side_output_name(i)) for i in ("call.1", "call:1", "call/1")} == {"call_1"}
    assert legacy_side_output_name(side_output_name("x", 1)) == legacy_side_output_name(side_output_name("x-1")) == "x-1"
    assert legacy_side_output_name(side_output_name("...")) is None  # it kept nothing for those


def test_an_id_too_long_for_a_file_name_is_named_by_its_hash() -> None:
    long_id = "y" * (MAX_ENCODED_CHARS * 5 // 8 + 1)
    name = side_output_name(long_id)
    assert name.startswith("sha-") and len(name) < 80 and parse_side_output_name(name) is None
    assert side_output_name(long_id) == name and side_output_name(long_id + "z") != name
    shorter = "y" * (MAX_ENCODED_CHARS * 5 // 8)
    assert side_output_name(shorter).startswith("id-")


def seen_as(session: Session, provider_id: str) -> str:
    """The name the session gave a call whose id the provider sent (renamed when the API would
    refuse it or it was taken)."""
    for entry in session.entries:
        for name, original in (entry.data.get(RENAMED_FIELD) or {}).items():
            if original == provider_id:
                return str(name)
    return provider_id


def test_ids_that_used_to_collide_each_keep_their_output(tmp_path: Path) -> None:
    # Defect: `call.1`, `call:1`, `call/1` shared `call_1.txt`, the first output overwritten and
    # recall answering with another call's; `x-1` took `x`'s second block; `...` raised.
    with open_session(tmp_path / "s") as session:
        ids = ["call.1", "call:1", "call/1", "...", "x-1"]
        for tool_id in ids:
            run(session, tool_id, output(f"out-of-{tool_id}"))
        run(session, "x", [{"type": "text", "text": output("x-first")}, {"type": "text", "text": output("x-second")}])
        names = [seen_as(session, tool_id) for tool_id in ids]
        assert names == ["call_1", "call_1_2", "call_1_3", "___", "x-1"]
        for tool_id, name in zip(ids, names, strict=True):
            answer = recall(session, id=name)
            assert f"out-of-{tool_id} line 0" in answer and "line 200" in answer  # whole: the middle is there
            assert GONE_NOTE not in answer
            others = [i for i in ids if i != tool_id]
            assert not any(f"out-of-{other} " in answer for other in others)
        second = recall(session, id="x", start_line=401)
        assert "x-second line 0" in second and "x-second line 200" in second and "out-of-x-1" not in second
        kept = sorted(p.name for p in (tmp_path / "s" / "tool-outputs").iterdir())
        assert kept == sorted(f"{side_output_name(n, p)}.txt" for n, p in [*((n, 0) for n in names), ("x", 0), ("x", 1)])


# -- recall reads only regular files of the session, never through a link -----------------------


@pytest.fixture
def kept_session(tmp_path: Path) -> Iterator[tuple[Session, Path]]:
    """A session whose call `t1` has its output kept aside; yields it and the kept file."""
    with open_session(tmp_path / "s") as session:
        run(session, "t1", output("mine"))
        kept = tmp_path / "s" / "tool-outputs" / f"{side_output_name('t1')}.txt"
        assert kept.read_text().startswith("mine line 0")
        yield session, kept


def outside_secret(tmp_path: Path) -> Path:
    """A file outside the session whose start matches the shortened copy (the worst case)."""
    secret = tmp_path / "outside.txt"
    secret.write_text(output("mine") + "SECRET OUTSIDE THE SESSION\n")
    return secret


def test_a_link_in_place_of_a_kept_output_is_not_followed(tmp_path: Path, kept_session: tuple[Session, Path]) -> None:
    session, kept = kept_session
    kept.unlink()
    kept.symlink_to(outside_secret(tmp_path))
    answer = recall(session, id="t1")
    assert "SECRET OUTSIDE" not in answer and GONE_NOTE in answer
    assert "mine line 0" in answer  # the shortened copy the conversation had
    assert session.store.load_tool_output(side_output_name("t1")) is None


def test_a_linked_tool_outputs_folder_is_neither_read_nor_written(tmp_path: Path, kept_session: tuple[Session, Path]) -> None:
    session, kept = kept_session
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / kept.name).write_text(outside_secret(tmp_path).read_text())
    folder = kept.parent
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    folder.symlink_to(elsewhere, target_is_directory=True)
    assert "SECRET OUTSIDE" not in recall(session, id="t1")
    run(session, "t2", output("second"))  # a new output is not written through the link
    assert sorted(p.name for p in elsewhere.iterdir()) == [kept.name]
    assert GONE_NOTE in recall(session, id="t2")


def test_a_folder_in_place_of_a_kept_output_is_an_answer_not_an_error(kept_session: tuple[Session, Path]) -> None:
    session, kept = kept_session
    kept.unlink()
    kept.mkdir()
    answer = recall(session, id="t1")  # IsADirectoryError before
    assert GONE_NOTE in answer and "mine line 0" in answer


def test_a_fifo_in_place_of_a_kept_output_does_not_block(deadline: None, kept_session: tuple[Session, Path]) -> None:
    session, kept = kept_session
    kept.unlink()
    os.mkfifo(kept)
    answer = recall(session, id="t1")  # blocked forever before
    assert GONE_NOTE in answer


def test_a_deleted_kept_output_is_said_to_be_gone(kept_session: tuple[Session, Path]) -> None:
    session, kept = kept_session
    assert GONE_NOTE not in recall(session, id="t1")
    kept.unlink()
    answer = recall(session, id="t1")
    assert GONE_NOTE in answer and "mine line 0" in answer and "characters (" in answer


def test_a_kept_output_replaced_by_another_text_is_not_returned(kept_session: tuple[Session, Path]) -> None:
    session, kept = kept_session
    kept.write_text("someone else's output\n" * 400)
    answer = recall(session, id="t1")
    assert "someone else" not in answer and GONE_NOTE in answer


def test_outputs_kept_under_the_old_names_are_read_only_when_they_match(tmp_path: Path) -> None:
    # A folder written by an earlier version: calls `call.1` and `call:1` (ids taken as sent)
    # were both kept in `call_1.txt`, which therefore holds `call:1`'s output.
    first, second = output("first"), output("second")
    entries = [Entry.user("go")]
    for tool_id, text in (("call.1", first), ("call:1", second)):
        shortened = cap_text(text, CAP, f"{tmp_path}/s/tool-outputs/call_1.txt")
        assert shortened is not None
        entries.append(Entry.assistant([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "make"}}]))
        entries.append(Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": shortened.text}]))
    with FolderStore(tmp_path / "s") as store:
        store.append(entries)
    (tmp_path / "s" / "tool-outputs").mkdir(mode=0o700)
    (tmp_path / "s" / "tool-outputs" / "call_1.txt").write_text(second)
    with open_session(tmp_path / "s") as session:
        # the index names the two calls as the requests do: call_1 and call_1_2
        answer = recall(session, id="call_1_2")
        assert "second line 200" in answer and GONE_NOTE not in answer
        answer = recall(session, id="call_1")
        assert "second line" not in answer and GONE_NOTE in answer and "first line 0" in answer


def test_is_kept_copy_of_checks_head_tail_and_length() -> None:
    text = output("k")
    shortened = cap_text(text, CAP, None)
    assert shortened is not None and is_kept_copy_of(text, shortened.text)
    assert not is_kept_copy_of(text + "x", shortened.text)  # longer
    assert not is_kept_copy_of("x" + text[1:], shortened.text)  # another head
    assert not is_kept_copy_of(text[:-2] + "y\n", shortened.text)  # another tail
    middle = len(text) // 2
    assert is_kept_copy_of(text[:middle] + "Z" + text[middle + 1 :], shortened.text)  # the middle is not in the copy
    assert not is_kept_copy_of(text, text)  # no marker, nothing to check against


# -- arguments and answers are bounded ----------------------------------------------------------


def test_an_argument_over_the_limit_is_refused_without_being_echoed() -> None:
    huge = "A" * 1_000_000
    with pytest.raises(RecallArgumentError) as error:
        RecallRequest.from_input({"path": huge})
    assert len(str(error.value)) < 200 and f"{MAX_ARGUMENT_CHARS:,}" in str(error.value)
    with pytest.raises(RecallArgumentError) as error:
        RecallRequest.from_input({"id": "x", huge: 1})
    assert len(str(error.value)) < 200
    with pytest.raises(RecallArgumentError) as error:
        RecallRequest.from_input({"id": "x", "start_line": 10**5000})
    assert len(str(error.value)) < 200
    assert RecallRequest.from_input({"path": "A" * MAX_ARGUMENT_CHARS}).value == "A" * MAX_ARGUMENT_CHARS


def test_what_an_answer_quotes_of_the_arguments_is_cut_short(tmp_path: Path) -> None:
    with open_session(tmp_path / "s") as session:
        run(session, "t1", "short")
        for kind in ("id", "path", "command", "query"):
            answer = recall(session, **{kind: "Q" * MAX_ARGUMENT_CHARS})
            assert len(answer) < 300, kind  # echoed whole before (1 MB in, 1 MB out)
            assert answer.startswith("Nothing in this session matches") and "QQQQ…" in answer


def test_a_query_searches_at_most_its_first_words(tmp_path: Path) -> None:
    words = [f"w{n}" for n in range(1_600)]
    query = " ".join(words)
    assert len(query) <= MAX_ARGUMENT_CHARS
    assert _terms(_words(query), query) == words[:MAX_QUERY_TERMS]
    assert _terms(_words("a b"), "a b") == ["a b"]  # no word of two letters: the query itself
    with open_session(tmp_path / "s", policy=Policy(tool_result_max_tokens=CAP, recall_max_tokens=5_000)) as session:
        big = "".join(f"w{n % 50} noise {n}\n" for n in range(60_000))
        run(session, "t1", big)
        answer = answer_recall(RecallRequest("query", query), as_compacted(session)).text
        assert f"only its first {MAX_QUERY_TERMS} words" in answer and "w1 noise" in answer


def cjk(lines: int) -> str:
    return "".join(f"第{n}行：上下文窗口压缩测试，中文文本的分词密度远高于英文。\n" for n in range(lines))


def test_a_cjk_answer_is_within_the_cap_as_a_tokenizer_counts(tmp_path: Path) -> None:
    policy = Policy(tool_result_max_tokens=25_000, recall_max_tokens=5_000)
    with open_session(tmp_path / "s", policy=policy) as session:
        text = cjk(3_000)
        run(session, "t1", text)
        sent = session.entries[-1].content[0]["content"]
        assert cap_token_count(sent) <= 25_000  # 68,810 before
        for request in (RecallRequest("id", "t1"), RecallRequest("id", "t1", 2_000), RecallRequest("query", "上下文窗口压缩测试")):
            answer = answer_recall(request, as_compacted(session)).text
            assert cap_token_count(answer) <= 5_000, request  # 13,731 before
            if request.kind == "id":
                assert cap_token_count(answer) > 3_000, request  # and not needlessly short
        first = recall(session, id="t1")
        assert "start_line=" in first  # the footer that pages on survives the cut


def test_a_hostile_transcript_field_does_not_blow_up_an_answer() -> None:
    stamp = "2025-06-01T10:00:00Z" + "9" * 100_000
    entries = [
        Entry.user("go"),
        Entry.assistant([{"type": "tool_use", "id": "t" * 50_000, "name": "Bash", "input": {"command": "ls"}}], timestamp=stamp),
        Entry.user([{"type": "tool_result", "tool_use_id": "t" * 50_000, "content": "a\nb"}], timestamp=stamp),
    ]
    context = RecallContext(entries=entries, view=[], cleared_ids=(), index=TranscriptIndex().update(entries), budget_tokens=500)
    for request in (RecallRequest("command", "ls"), RecallRequest("query", "a")):
        answer = answer_recall(request, context)
        assert answer.found and cap_token_count(answer.text) <= 500


def test_cut_to_tokens_fits_and_keeps_what_fits() -> None:
    assert cut_to_tokens("short", 10) == "short"
    text = cjk(200)
    cut = cut_to_tokens(text, 300)
    assert cap_token_count(cut) <= 300 and cut.endswith("…") and text.startswith(cut[:-1])
    assert cap_token_count(cut_to_tokens(text, 300)[:-1] + text[len(cut) - 1 : len(cut) + 40]) > 300 - 20
    assert fits("x" * 41, 10) and not fits("x" * 42, 10)  # length / 4, rounded half up
    assert cut_to_tokens(text, 0) == ""


def test_recall_served_events_and_a_memory_store(tmp_path: Path) -> None:
    events: list[Event] = []
    session = Session(CONFIG, store=MemoryStore(), policy=Policy(tool_result_max_tokens=CAP), events=events.append)
    run(session, "t.1", output("mem"))
    run(session, "t:1", output("other"))
    assert (seen_as(session, "t.1"), seen_as(session, "t:1")) == ("t_1", "t_1_2")
    assert "mem line 200" in recall(session, id="t_1") and "other line" not in recall(session, id="t_1")
    assert "other line 200" in recall(session, id="t_1_2")
    served = [e for e in events if isinstance(e, RecallServed)]
    assert served[-1].found and served[-1].tokens <= session.policy.recall_max_tokens


def test_a_read_only_folder_store_refuses_links_too(tmp_path: Path) -> None:
    with open_session(tmp_path / "s") as session:
        run(session, "t1", output("mine"))
    kept = tmp_path / "s" / "tool-outputs" / f"{side_output_name('t1')}.txt"
    kept.unlink()
    kept.symlink_to(outside_secret(tmp_path))
    reader = FolderStore(tmp_path / "s", lock=False)
    assert reader.load_tool_output(side_output_name("t1")) is None
