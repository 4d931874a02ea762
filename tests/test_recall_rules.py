"""The rules of `unbounded.recall`, each held by a test that fails when the rule is flipped,
dropped or off by one (the mutation check, scripts/mutation_check.py, runs these)."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.recall.offer import (
    answer_tokens,
    is_recall_call,
    offers_recall,
    recall_tool_result,
    with_recall_tool,
)
from unbounded.recall.schema import RECALL_TOOL_NAME

# -- offer -----------------------------------------------------------------------------------------

BASH = {"name": "Bash", "input_schema": {"type": "object"}}
OPENAI_RECALL = {"type": "function", "function": {"name": "recall", "parameters": {}}}
OPENAI_BASH = {"type": "function", "function": {"name": "Bash", "parameters": {}}}


def test_the_tool_is_offered_beside_tools_unless_the_host_has_one_or_turned_it_off() -> None:
    policy = Policy()
    assert offers_recall([BASH], policy) and offers_recall([OPENAI_BASH], policy)
    assert not offers_recall([], policy)
    assert not offers_recall([BASH, {"name": "recall"}], policy)
    assert not offers_recall([OPENAI_RECALL], policy)  # a function tool named recall counts too
    assert not offers_recall([{"type": "function", "function": "recall", "name": "recall"}], policy)
    assert not offers_recall([BASH], Policy(recall_enabled=False))
    tools = with_recall_tool([BASH], policy)
    assert [t["name"] for t in tools] == ["Bash", RECALL_TOOL_NAME] and tools[0] is not BASH
    assert with_recall_tool([BASH], Policy(recall_enabled=False)) == [BASH]


@pytest.mark.parametrize(
    ("block", "is_call"),
    [
        ({"type": "tool_use", "name": "recall"}, True),
        ({"name": "recall"}, True),  # a block without a type is a tool call
        ({"type": "tool_use", "name": "Bash"}, False),
        ({"type": "tool_result", "name": "recall"}, False),
        ({"type": "text", "name": "Bash"}, False),
    ],
)
def test_is_recall_call(block: dict[str, Any], is_call: bool) -> None:
    assert is_recall_call(block) is is_call


def test_answer_tokens_counts_text_content_only() -> None:
    assert answer_tokens({"content": "x" * 400}) == 100
    assert answer_tokens({"content": ""}) == 0
    assert answer_tokens({"content": [{"type": "text", "text": "x" * 400}]}) == 0
    assert answer_tokens({}) == 0


def test_a_recall_result_answers_its_call() -> None:
    from unbounded.recall import RecallContext, TranscriptIndex

    entries = [Entry.user("go")]
    context = RecallContext(entries=entries, view=entries, cleared_ids=(), index=TranscriptIndex().update(entries), budget_tokens=500)
    result, answer = recall_tool_result({"id": "r1", "name": "recall", "input": {"id": "nope"}}, context)
    assert result == {"type": "tool_result", "tool_use_id": "r1", "content": "Nothing in this session matches tool call id 'nope'."}
    assert answer is not None and not answer.found and answer.lookup == "id"
    error, none = recall_tool_result({"name": "recall", "input": {}}, context)
    assert none is None and error["is_error"] is True and error["tool_use_id"] == ""
    assert error["content"].startswith("Error: give exactly one of")


# -- receipts --------------------------------------------------------------------------------------

from unbounded.recall import TranscriptIndex  # noqa: E402
from unbounded.recall.receipts import (  # noqa: E402
    NOTE_HANDLES,
    Receipt,
    compaction_receipt,
    microcompact_receipt,
    microcompact_receipt_entry,
    recall_note,
    receipts_by_tool_id,
    receipts_in,
    tool_result_item,
)


def calls_transcript() -> list[Entry]:
    entries = [Entry.user("go")]
    calls = [
        ("t_read", "Read", {"file_path": "/repo/src/parser.py"}, "x" * 400),
        ("t_bash", "Bash", {"command": "pytest " + "-k a " * 60}, "1 failed"),
        ("t_write", "Write", {"file_path": "/repo/notes.md", "content": "hi"}, "ok"),
        ("t_other", "Search", {"q": "x"}, [{"type": "text", "text": "y" * 40}]),
    ]
    for tool_id, name, tool_input, output in calls:
        entries.append(Entry.assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}], timestamp="2025-06-01T10:00:00.000Z"))
        entries.append(Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": output}]))
    return entries


def test_tool_result_items_name_the_call() -> None:
    index = TranscriptIndex().update(calls_transcript())
    assert tool_result_item(index.get("t_read"), "t_read", 100) == {"id": "t_read", "tool": "Read", "tokens": 100, "path": "/repo/src/parser.py"}
    bash = tool_result_item(index.get("t_bash"), "t_bash", 3)
    assert bash["tool"] == "Bash" and "path" not in bash and len(bash["command"]) == 200 and bash["command"].endswith("…")
    assert tool_result_item(index.get("t_write"), "t_write", 1)["path"] == "/repo/notes.md"
    assert tool_result_item(None, "gone", 7) == {"id": "gone", "tool": "?", "tokens": 7}
    assert tool_result_item(index.get("t_other"), "t_other", 2) == {"id": "t_other", "tool": "Search", "tokens": 2}


def test_a_microcompaction_receipt() -> None:
    index = TranscriptIndex().update(calls_transcript())
    receipt = microcompact_receipt("time", ["t_read", "t_write", "t_read2"], index=index, tokens={"t_read": 100, "t_write": 5}, tokens_saved=105, breaks_cache=True)
    assert receipt == {
        "version": 1,
        "tier": "time",
        "toolResults": [
            {"id": "t_read", "tool": "Read", "tokens": 100, "path": "/repo/src/parser.py"},
            {"id": "t_write", "tool": "Write", "tokens": 5, "path": "/repo/notes.md"},
            {"id": "t_read2", "tool": "?", "tokens": 0},
        ],
        "files": ["/repo/src/parser.py", "/repo/notes.md"],
        "tokens": 105,
        "breaksCache": True,
    }
    entry = microcompact_receipt_entry(receipt, timestamp="2025-06-01T11:00:00.000Z")
    assert entry.type == "system" and entry.subtype == "microcompact_receipt" and entry.data["isMeta"] is True
    assert entry.data["content"] == "3 old tool result(s) cleared (~105 tokens)"
    assert entry.data["microcompactReceipt"] == receipt and entry.data["microcompactReceipt"] is not receipt
    cached = microcompact_receipt_entry({**receipt, "tier": "cached", "tokens": 2_500}, timestamp="t")
    assert cached.data["content"] == "3 old tool result(s) deleted from the prompt cache (~2,500 tokens)"
    empty = microcompact_receipt_entry({}, timestamp="t")
    assert empty.data["content"] == "0 old tool result(s) cleared (~0 tokens)"
    (read,) = receipts_in([entry])
    assert (read.kind, read.trigger, read.tokens, read.files, read.time) == ("microcompaction", "time", 105, ("/repo/src/parser.py", "/repo/notes.md"), "2025-06-01T11:00:00.000Z")
    assert read.describe() == "cleared by microcompaction (time tier) at 2025-06-01T11:00:00.000Z"
    assert Receipt.from_entry(cached).describe() == "deleted from the prompt cache by microcompaction at t"  # type: ignore[union-attr]
    untimed = Entry({"type": "system", "subtype": "microcompact_receipt", "microcompactReceipt": {"tier": "count"}})
    assert Receipt.from_entry(untimed).describe() == "cleared by microcompaction (count tier) at ?"  # type: ignore[union-attr]


def test_a_compaction_receipt_counts_and_covers() -> None:
    entries = calls_transcript()
    index = TranscriptIndex().update(entries)
    summary = "We read parser.py and ran the tests."
    receipt = compaction_receipt(entries, index=index, summary_text=summary, summarizer="model", already_cleared={"t_bash"})
    assert receipt["messages"] == 9 and receipt["version"] == 1
    assert [i["id"] for i in receipt["toolResults"]] == ["t_read", "t_bash", "t_write", "t_other"]
    assert receipt["toolResults"][1]["alreadyCleared"] is True and "alreadyCleared" not in receipt["toolResults"][0]
    assert receipt["toolResults"][0]["tokens"] == 100 and receipt["toolResults"][3]["tokens"] == 10
    assert receipt["files"] == ["/repo/src/parser.py", "/repo/notes.md"]
    assert receipt["covered"] == {"by": "model", "summaryTokens": 9, "filesMentioned": ["/repo/src/parser.py"], "filesNotMentioned": ["/repo/notes.md"]}
    assert receipt["tokens"] > 100
    only_assistant = compaction_receipt(entries[1:2], index=index, summary_text="", summarizer="m")
    assert only_assistant["toolResults"] == [] and only_assistant["messages"] == 1


@pytest.mark.parametrize(
    ("path", "summary", "mentioned"),
    [
        ("/repo/notes.md", "see /repo/notes.md", True),
        ("/repo/notes.md", "see notes.md", True),
        ("/repo/notes.md", "see notes", False),
        ("C:\\repo\\long.md", "see long.md", True),  # a Windows path's name
        ("/repo/a.c", "a.c changed", False),  # a name under 4 characters counts only as the whole path
        ("/repo/abcd", "abcd changed", True),
    ],
)
def test_a_file_is_covered_by_its_path_or_a_name_of_four_or_more(path: str, summary: str, mentioned: bool) -> None:
    entries = [Entry.user("go"), Entry.assistant([{"type": "tool_use", "id": "w", "name": "Write", "input": {"file_path": path}}]), Entry.user([{"type": "tool_result", "tool_use_id": "w", "content": "ok"}])]
    receipt = compaction_receipt(entries, index=TranscriptIndex().update(entries), summary_text=summary, summarizer="m")
    assert receipt["covered"]["filesMentioned"] == ([path] if mentioned else [])
    assert receipt["covered"]["filesNotMentioned"] == ([] if mentioned else [path])


def test_the_recall_note_names_the_most_recent_handles() -> None:
    items = [{"id": f"t{n}", "tool": "Bash", "command": f"make {n}"} for n in range(NOTE_HANDLES + 2)]
    items.append({"id": "p", "tool": "Read", "path": "/a.py"})
    items.append({"id": "q", "tool": "Grep"})
    note = recall_note({"toolResults": items})
    lines = note.splitlines()
    assert lines[1] == "Recent tool results it replaced:"
    assert lines[2:5] == ["- recall id=q: Grep", "- recall id=p: Read /a.py", f"- recall id=t{NOTE_HANDLES + 1}: Bash make {NOTE_HANDLES + 1}"]
    assert len(lines) == 2 + NOTE_HANDLES and "id=t3:" not in note and "id=t4:" in note  # the last 8 of 12
    assert recall_note({}).count("\n") == 0 and "call the `recall` tool" in recall_note({})


def test_receipts_read_back_and_index_by_tool() -> None:
    from unbounded.model.entries import create_compact_boundary

    boundary = create_compact_boundary("manual", 1_000)
    boundary.compact_metadata["receipt"] = {"tokens": 50, "messages": 4, "toolResults": [{"id": "a", "tool": "Bash"}, {"id": "b", "tool": "Read"}], "files": ["/x"], "covered": {"by": "m"}}
    micro = microcompact_receipt_entry({"tier": "count", "toolResults": [{"id": "a", "tool": "Bash"}], "tokens": 3}, timestamp="t2")
    plain = Entry.user("hi")
    other_system = Entry({"type": "system", "subtype": "local_command", "content": "x"})
    bare_boundary = create_compact_boundary("auto", 10)
    receipts = receipts_in([plain, boundary, other_system, bare_boundary, micro])
    assert [r.kind for r in receipts] == ["compaction", "microcompaction"]
    compaction = receipts[0]
    assert compaction.trigger == "manual" and compaction.messages == 4 and compaction.tokens == 50
    assert [i["id"] for i in compaction.tool_results] == ["a", "b"]
    assert compaction.describe().startswith("summarized by the manual compaction at ")
    assert compaction.to_dict()["covered"] == {"by": "m"} and compaction.to_dict()["messages"] == 4
    assert "covered" not in receipts[1].to_dict() and receipts[1].to_dict()["trigger"] == "count"
    latest = receipts_by_tool_id(receipts)
    assert latest["a"] is receipts[1] and latest["b"] is compaction
    unnamed = Entry({"type": "system", "subtype": "microcompact_receipt", "microcompactReceipt": {"toolResults": []}})
    bare = Receipt.from_entry(unnamed)
    assert bare is not None and (bare.trigger, bare.tokens, bare.messages, bare.files, bare.covered) == ("?", 0, 0, (), {})
    assert Receipt.from_entry(Entry({"type": "system", "subtype": "microcompact_receipt"})) is None
    assert Receipt.from_entry(Entry({"type": "user", "subtype": "microcompact_receipt", "microcompactReceipt": {}})) is None


# -- the tool's arguments ---------------------------------------------------------------------------

from unbounded.errors import RecallArgumentError  # noqa: E402
from unbounded.recall.schema import (  # noqa: E402
    MAX_ARGUMENT_CHARS,
    MAX_START_LINE,
    RecallRequest,
    recall_tool_schema,
)


def test_the_schemas_and_a_wrong_api() -> None:
    assert set(recall_tool_schema("anthropic")) == {"name", "description", "input_schema"}
    assert recall_tool_schema("openai")["type"] == "function"
    with pytest.raises(RecallArgumentError, match="api must be 'anthropic' or 'openai', not 'gemini'"):
        recall_tool_schema("gemini")  # type: ignore[arg-type]


def refusal(arguments: object) -> str:
    with pytest.raises(RecallArgumentError) as error:
        RecallRequest.from_input(arguments)
    return str(error.value)


def test_each_argument_rule_and_its_message() -> None:
    assert refusal(["id", "x"]) == "the input of recall must be a JSON object"
    assert refusal({"id": "a", "b1": 1, "b2": 1, "b3": 1, "b4": 1, "b5": 1}) == "recall takes id, path, command, query and start_line, not b1, b2, b3, b4, b5"
    assert refusal({"id": "a", **{f"k{n}": 1 for n in range(6)}}) == "recall takes id, path, command, query and start_line, not k0, k1, k2, k3, k4 and 1 more"
    assert refusal({"id": "a", "x" * 61: 1}).endswith("not " + "x" * 59 + "…")
    assert refusal({"id": "a", "x" * 60: 1}).endswith("not " + "x" * 60)
    assert refusal({}) == "give exactly one of id, path, command or query"
    assert refusal({"id": "", "path": None}) == "give exactly one of id, path, command or query"
    assert refusal({"id": "a", "query": "b"}) == "give exactly one of id, path, command or query (got id, query)"
    assert refusal({"id": 5}) == "id must be a non-empty string, not a value of type int"
    assert refusal({"path": "   "}) == "path must be a non-empty string, not '   '"
    assert refusal({"command": "c" * (MAX_ARGUMENT_CHARS + 1)}) == f"command is {MAX_ARGUMENT_CHARS + 1:,} characters long; give at most {MAX_ARGUMENT_CHARS:,} (for query: a few distinctive words)"
    assert refusal({"id": "a", "start_line": 0}) == f"start_line must be a whole number from 1 to {MAX_START_LINE:,}, not 0"
    assert refusal({"id": "a", "start_line": MAX_START_LINE + 1}).endswith(f"not {MAX_START_LINE + 1}")
    assert refusal({"id": "a", "start_line": True}).endswith("not True")
    assert refusal({"id": "a", "start_line": 10**12}).endswith("not a value of type int")
    assert refusal({"id": "a", "start_line": 10**12 - 1}).endswith(f"not {10**12 - 1}")
    assert refusal({"id": "a", "start_line": -(10**12) + 1}).endswith(f"not {-(10**12) + 1}")
    assert refusal({"id": "a", "start_line": "3"}).endswith("not '3'")


def test_what_the_arguments_become() -> None:
    assert RecallRequest.from_input({"id": "  t1 "}) == RecallRequest("id", "t1", 1)
    assert RecallRequest.from_input({"query": "q", "start_line": None}) == RecallRequest("query", "q", 1)
    assert RecallRequest.from_input({"path": "p", "start_line": 1}).start_line == 1
    assert RecallRequest.from_input({"command": "c", "start_line": MAX_START_LINE}).start_line == MAX_START_LINE
    assert RecallRequest.from_input({"id": "i", "path": ""}).kind == "id"
    assert RecallRequest.from_input({"command": "c" * MAX_ARGUMENT_CHARS}).kind == "command"


# -- the index -------------------------------------------------------------------------------------

from unbounded.recall.index import clip, command_of, normalize_command, read_path_of, same_path  # noqa: E402


def test_paths_commands_and_clips() -> None:
    assert same_path("/repo/src/a.py", "/repo/src/a.py") and same_path("/repo/src/a.py", "src/a.py")
    assert same_path("src/a.py", "/repo/src/a.py") and same_path("C:\\repo\\a.py", "a.py")
    assert not same_path("/repo/src/a.py", "rc/a.py") and not same_path("/repo/a.py", "/repo/b.py")
    assert not same_path("a.py", "b/a.pyx")
    assert normalize_command("  ls   -la \n x ") == "ls -la x"
    assert clip("a  b\nc") == "a b c" and clip("x" * 160) == "x" * 160 and clip("x" * 161) == "x" * 159 + "…"
    assert clip("abcdef", 4) == "abc…" and clip("abcd", 4) == "abcd"
    assert command_of({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}) == "ls"
    assert command_of({"type": "tool_use", "name": "execute_bash", "input": {"cmd": "pwd"}}) in ("pwd", None)
    assert command_of({"type": "tool_use", "name": "Read", "input": {"command": "ls"}}) is None
    assert read_path_of({"type": "tool_use", "name": "Read", "input": {"file_path": "/a.py"}}) == "/a.py"


def test_the_index_finds_calls_by_id_path_and_command() -> None:
    entries = calls_transcript()
    entries.append(Entry.assistant([{"type": "tool_use", "id": "t_read2", "name": "Read", "input": {"file_path": "/repo/src/parser.py"}}]))
    entries.append(Entry.user([{"type": "tool_result", "tool_use_id": "t_read2", "content": "again", "is_error": True}]))
    entries.append(Entry.assistant([{"type": "tool_use", "id": "t_ls", "name": "Bash", "input": {"command": "ls -la src"}}]))
    index = TranscriptIndex().update(entries)
    assert [c.id for c in index.reads_of("parser.py")] == ["t_read", "t_read2"]
    assert [c.id for c in index.touching("/repo/notes.md")] == ["t_write"] and index.reads_of("/repo/notes.md") == []
    assert [c.id for c in index.runs_of("ls  -la   src")] == ["t_ls"]  # exact, whitespace collapsed
    assert [c.id for c in index.runs_of("-la")] == ["t_ls"]  # else contained
    assert index.runs_of("make") == []
    second = index.get("t_read2")
    assert second is not None and second.is_error and second.result == "again" and second.result_position == 10 and second.use_position == 9
    pending = index.get("t_ls")
    assert pending is not None and pending.result is None and pending.result_position is None
    first = index.get("t_read")
    assert first is not None and first.result_tokens == 100 and first.time == "2025-06-01T10:00:00.000Z"
    assert index.get("nope") is None


def test_the_index_follows_the_transcript_as_it_grows_or_changes() -> None:
    entries = calls_transcript()
    index = TranscriptIndex()
    index.update(entries[:3])
    assert list(index.calls) == ["t_read"]
    index.update(entries)
    assert list(index.calls) == ["t_read", "t_bash", "t_write", "t_other"]
    index.update(entries[:2])  # shorter: scanned again from the start
    assert list(index.calls) == ["t_read"] and index.get("t_read").result is None  # type: ignore[union-attr]
    other = calls_transcript()
    index.update(other)  # the same length, other records: scanned again
    index.update(other[:5] + entries[5:])
    assert list(index.calls) == ["t_read", "t_bash", "t_write", "t_other"]
    sidechain = Entry.assistant([{"type": "tool_use", "id": "side", "name": "Bash", "input": {"command": "x"}}])
    sidechain.data["isSidechain"] = True
    user_use = Entry.user([{"type": "tool_use", "id": "wrong", "name": "Bash", "input": {}}])
    index.update([*other, sidechain, user_use, Entry.user("text"), Entry({"type": "system", "content": "s"})])
    assert "side" not in index.calls and "wrong" not in index.calls


def test_a_call_describes_itself() -> None:
    index = TranscriptIndex().update(calls_transcript())
    assert index.get("t_read").describe() == "Read: /repo/src/parser.py"  # type: ignore[union-attr]
    assert index.get("t_bash").describe().startswith("Bash: pytest -k a")  # type: ignore[union-attr]
    assert index.get("t_write").describe() == "Write: /repo/notes.md"  # type: ignore[union-attr]
    assert index.get("t_other").describe() == 'Search {"q":"x"}'  # type: ignore[union-attr]
    odd = TranscriptIndex().update([Entry.assistant([{"type": "tool_use", "id": "o", "name": "X", "input": {1: {2}}}])])
    assert odd.get("o").describe() == "X {1: {2}}"  # type: ignore[union-attr]


# -- answers ---------------------------------------------------------------------------------------

import re  # noqa: E402

from unbounded.recall import RecallContext as Context  # noqa: E402
from unbounded.recall import RecallRequest as Request  # noqa: E402
from unbounded.recall.lookup import (  # noqa: E402
    GONE_NOTE,
    MAX_QUERY_TERMS,
    MIN_BUDGET_TOKENS,
    _excerpt,
    _matching_lines,
    _terms,
    _words,
    answer_recall,
)
from unbounded.recall.receipts import microcompact_receipt_entry as receipt_entry  # noqa: E402


def test_an_excerpt_takes_whole_lines_within_the_budget() -> None:
    assert _excerpt("a\nbb\nccc\ndddd", 2, 7) == ("bb\nccc", 2, 3, 4)  # 3 + 4 characters, newlines counted
    assert _excerpt("a\nbb\nccc\ndddd", 2, 6) == ("bb", 2, 2, 4)
    assert _excerpt("a\nbb\nccc\ndddd", 1, 100) == ("a\nbb\nccc\ndddd", 1, 4, 4)
    assert _excerpt("xxxxxxxxxx\ny", 1, 5) == ("xxxx…", 1, 1, 2)  # a line longer than the budget: its start
    assert _excerpt("", 1, 5) == ("", 1, 1, 1)
    assert _excerpt("a\nb", 9, 5) == ("b", 2, 2, 2)  # past the end: the last line


def test_matching_lines_with_one_line_around_each_and_gaps_marked() -> None:
    text = "\n".join(f"l{n}" + (" hit" if n in (3, 4, 10) else "") for n in range(60))
    assert _matching_lines(text, re.compile("hit")) == "l2\nl3 hit\nl4 hit\nl5\n…\nl9\nl10 hit\nl11"
    many = "\n".join("hit" for _ in range(100))
    assert _matching_lines(many, re.compile("hit")).count("\n") == 39  # at most 40 lines
    assert _matching_lines("x " * 300 + "hit", re.compile("hit")) == ("x " * 300 + "hit")[:399] + "…"
    assert _matching_lines("hit", re.compile("hit")) == "hit"


def test_query_words() -> None:
    assert _words("Foo foo bar a b2 x.y/z") == ["foo", "bar", "b2", "x.y/z"]
    assert _terms(_words("a b"), " A B ") == ["a b"]
    words = [f"w{n}" for n in range(MAX_QUERY_TERMS + 1)]
    assert _terms(words, "") == words[:MAX_QUERY_TERMS]


def context_of(entries: list[Entry], *, view: list[Entry] | None = None, budget: int = 1_000, cleared: tuple[str, ...] = (), kept: dict[str, str] | None = None) -> Context:
    from unbounded.recall import receipts_in

    return Context(entries=entries, view=entries if view is None else view, cleared_ids=cleared, index=TranscriptIndex().update(entries), budget_tokens=budget, load_output=(kept or {}).get, receipts=receipts_in(entries))


def test_an_id_answer_says_where_it_came_from_and_how_it_left() -> None:
    entries = calls_transcript()
    micro = receipt_entry({"tier": "time", "toolResults": [{"id": "t_bash", "tool": "Bash"}], "tokens": 3}, timestamp="2025-06-01T12:00:00Z")
    entries.append(micro)
    context = context_of(entries, cleared=("t_write",))
    bash = answer_recall(Request("id", "t_bash"), context)
    assert bash.found and bash.tool_use_id == "t_bash" and bash.lookup == "id"
    assert bash.text.splitlines()[0].endswith("at 2025-06-01T10:00:00.000Z; cleared by microcompaction (time tier) at 2025-06-01T12:00:00Z]")
    assert bash.text.splitlines()[1] == "1 failed"
    assert "cleared from the context]" in answer_recall(Request("id", "t_write"), context).text
    assert "still in the conversation]" in answer_recall(Request("id", "t_read"), context).text
    error = calls_transcript()
    error[-1].content[0]["is_error"] = True
    assert answer_recall(Request("id", "t_other"), context_of(error)).text.splitlines()[1] == "[the tool reported an error]"
    assert "[the tool reported an error]" not in answer_recall(Request("id", "t_other"), context).text
    waiting = [*entries, Entry.assistant([{"type": "tool_use", "id": "t_wait", "name": "Bash", "input": {"command": "sleep 9"}}])]
    unanswered = answer_recall(Request("id", "t_wait"), context_of(waiting))
    assert not unanswered.found and unanswered.text == "Tool call t_wait (Bash: sleep 9) has no result in this session." and unanswered.tool_use_id == "t_wait"


def long_output_transcript(lines: int = 400) -> list[Entry]:
    output = "".join(f"row {n:04d}\n" for n in range(lines))
    return [
        Entry.user("go"),
        Entry.assistant([{"type": "tool_use", "id": "t", "name": "Read", "input": {"file_path": "/x/data.txt"}}], timestamp="T"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t", "content": output}]),
    ]


def test_a_long_answer_pages_on_with_start_line() -> None:
    context = context_of(long_output_transcript(), budget=MIN_BUDGET_TOKENS)
    first = answer_recall(Request("id", "t"), context).text
    footer = first.splitlines()[-1]
    assert re.fullmatch(r"\[lines 1-\d+ of 400; recall id=t with start_line=\d+ for more\]", footer)
    shown = int(footer.split("-")[1].split(" ")[0])
    assert footer.endswith(f"start_line={shown + 1} for more]")
    by_path = answer_recall(Request("path", "data.txt"), context).text
    path_footer = re.fullmatch(r"\[lines 1-(\d+) of 400; recall path='data.txt' with start_line=(\d+) for more\]", by_path.splitlines()[-1])
    assert path_footer is not None and int(path_footer.group(2)) == int(path_footer.group(1)) + 1
    last = answer_recall(Request("id", "t", start_line=395), context).text
    assert last.splitlines()[-1] == "[lines 395-400 of 400]"  # the rest fits: no more to read
    whole = answer_recall(Request("id", "t"), context_of(long_output_transcript(10))).text
    assert "[lines" not in whole and whole.splitlines()[-1] == "row 0009"


def test_a_budget_below_the_floor_is_raised_to_it() -> None:
    from unbounded.tokens.budget import cap_token_count

    low = answer_recall(Request("id", "t"), context_of(long_output_transcript(), budget=1)).text
    at_floor = answer_recall(Request("id", "t"), context_of(long_output_transcript(), budget=MIN_BUDGET_TOKENS)).text
    assert low == at_floor and MIN_BUDGET_TOKENS - 30 <= cap_token_count(low) <= MIN_BUDGET_TOKENS


def test_path_and_command_answers_prefer_reads_then_the_latest() -> None:
    entries = calls_transcript()
    for tool_id, name, tool_input, out in (
        ("w2", "Write", {"file_path": "/repo/new.md", "content": "x"}, "written"),
        ("b2", "Bash", {"command": "pytest -q"}, "2 failed"),
        ("b3", "Bash", {"command": "pytest -q"}, "all passed"),
        ("b4", "Bash", {"command": "make"}, None),
    ):
        entries.append(Entry.assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]))
        if out is not None:
            entries.append(Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": out}]))
    context = context_of(entries)
    assert answer_recall(Request("path", "parser.py"), context).tool_use_id == "t_read"
    assert answer_recall(Request("path", "new.md"), context).tool_use_id == "w2"  # no read: the write
    assert answer_recall(Request("command", "pytest -q"), context).tool_use_id == "b3"  # the latest run
    assert answer_recall(Request("command", "make"), context).text == "Nothing in this session matches a run of the command 'make'."
    assert answer_recall(Request("path", "nope.md"), context).text == "Nothing in this session matches a tool call on the file 'nope.md'."
    long_path = "/d/" + "p" * 200
    assert answer_recall(Request("path", long_path), context).text == f"Nothing in this session matches a tool call on the file '{long_path[:79]}…'."


def test_a_long_handle_is_replaced_by_the_call_id() -> None:
    command = "echo " + "x" * 200
    entries = [Entry.user("go"), Entry.assistant([{"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": command}}]), Entry.user([{"type": "tool_result", "tool_use_id": "c1", "content": "".join(f"{n}\n" for n in range(3_000))}])]
    text = answer_recall(Request("command", command), context_of(entries, budget=400)).text
    assert "recall id=c1 with start_line=" in text
    short = "echo " + "y" * 155  # 160 characters: still named as asked
    entries[1].content[0]["input"]["command"] = short
    text = answer_recall(Request("command", short), context_of(entries, budget=400)).text
    assert f"recall command='{short}' with start_line=" in text


def test_search_ranks_and_reads_only_what_left_the_context() -> None:
    entries = [
        Entry.user("please fix the tokenizer crash", timestamp="T1"),
        Entry.assistant([{"type": "text", "text": "Looking at the tokenizer."}], timestamp="T2"),
        Entry.assistant([{"type": "tool_use", "id": "r", "name": "Bash", "input": {"command": "pytest"}}], timestamp="T3"),
        Entry.user([{"type": "tool_result", "tool_use_id": "r", "content": "tokenizer crash: KeyError\ntokenizer crash again"}], timestamp="T4"),
        Entry.user("[Old tool result content cleared]", timestamp="T5"),
        Entry.user("tokenizer visible still", timestamp="T6"),
    ]
    side = Entry.user("tokenizer in a sub-agent", timestamp="T7")
    side.data["isSidechain"] = True
    entries.append(side)
    summary = Entry.user("Summary: tokenizer work", timestamp="T8")
    summary.data["isCompactSummary"] = True
    entries.append(summary)
    context = context_of(entries, view=[entries[5]])
    found = answer_recall(Request("query", "tokenizer crash"), context)
    labels = [line for line in found.text.splitlines() if line.startswith("--- ")]
    # both words and the phrase first (the result has more hits than the request), then one word
    assert labels == ["--- result of r (Bash: pytest) at T3 ---", "--- user message at T1 ---", "--- summary at T8 ---", "--- assistant at T2 ---"]
    assert found.text.splitlines()[0] == "[recall: 4 passage(s) of the compacted or cleared conversation match 'tokenizer crash'; best first]"
    assert "visible still" not in found.text and "sub-agent" not in found.text and "Old tool result" not in found.text
    nothing = answer_recall(Request("query", "zebra"), context)
    assert not nothing.found and nothing.text == "Nothing in this session matches 'zebra' in what was compacted away or cleared."


def test_search_includes_cleared_results_once_and_ties_go_to_the_latest() -> None:
    entries = [Entry.user("go")]
    for n in range(3):
        entries.append(Entry.assistant([{"type": "tool_use", "id": f"c{n}", "name": "Bash", "input": {"command": f"run {n}"}}]))
        entries.append(Entry.user([{"type": "tool_result", "tool_use_id": f"c{n}", "content": "needle"}]))
    context = context_of(entries, cleared=("c0", "c1"))  # all visible, two cleared
    text = answer_recall(Request("query", "needle"), context).text
    assert re.findall(r"^--- result of (c\d)", text, re.M) == ["c1", "c0"]
    compacted = context_of(entries, view=[], cleared=("c0",))
    labels = [line for line in answer_recall(Request("query", "needle"), compacted).text.splitlines() if line.startswith("--- ")]
    assert len(labels) == 3 and labels[0].startswith("--- result of c2")


def test_search_over_the_budget_shows_the_best_and_counts_the_rest() -> None:
    entries = [Entry.user("go")]
    for n in range(40):
        entries.append(Entry.user(f"needle message {n} " + "pad " * 60))
    text = answer_recall(Request("query", "needle"), context_of(entries, view=[], budget=MIN_BUDGET_TOKENS)).text
    shown = sum(1 for line in text.splitlines() if line.startswith("--- "))
    assert 0 < shown < 40 and text.splitlines()[-1] == f"[{40 - shown} more passage(s) not shown: use more specific words, or recall a tool result by its id]"
    huge = [Entry.user("go"), Entry.user("needle " + "x" * 10_000)]
    single = answer_recall(Request("query", "needle"), context_of(huge, view=[], budget=MIN_BUDGET_TOKENS)).text
    assert single.count("--- ") == 1 and single.endswith("…")


def test_a_gone_copy_is_said_once_per_answer() -> None:
    from unbounded.compaction.large_output import cap_text
    from unbounded.side_outputs import side_output_name

    whole = "".join(f"row {n}\n" for n in range(3_000))
    shortened = cap_text(whole, 500, None)
    assert shortened is not None
    entries = [Entry.user("go"), Entry.assistant([{"type": "tool_use", "id": "g", "name": "Bash", "input": {"command": "cat"}}]), Entry.user([{"type": "tool_result", "tool_use_id": "g", "content": [{"type": "text", "text": "intro"}, {"type": "image", "source": {}}, {"type": "text", "text": shortened.text}]}])]
    gone = answer_recall(Request("id", "g"), context_of(entries)).text
    assert gone.splitlines()[1] == GONE_NOTE and "[image]" in gone and "intro" in gone
    back = answer_recall(Request("id", "g", start_line=1_500), context_of(entries, kept={side_output_name("g", 2): whole})).text
    assert GONE_NOTE not in back and back.splitlines()[1] == "row 1497"  # line 1,500 of intro, [image], the rows
    wrong_part = answer_recall(Request("id", "g"), context_of(entries, kept={side_output_name("g", 0): whole})).text
    assert GONE_NOTE in wrong_part  # kept under another part's name: not this text


def test_the_limits_the_docs_promise() -> None:
    assert recall_tool_schema()["input_schema"]["properties"]["start_line"]["minimum"] == 1
    assert RecallRequest.from_input({"query": "q" * 10_000}).kind == "query"
    assert refusal({"query": "q" * 10_001}).startswith("query is 10,001 characters long; give at most 10,000")
    assert RecallRequest.from_input({"id": "a", "start_line": 1_000_000_000}).start_line == 1_000_000_000
    assert refusal({"id": "a", "start_line": 1_000_000_001}).endswith("not 1000000001")
