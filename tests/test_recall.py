"""Recall and receipts: the tool's schema and arguments, lookups within a budget, receipts of
microcompaction and compaction in the transcript, and the LangChain middleware's tool."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.large_output import cap_text
from unbounded.compaction.micro import MicrocompactState, microcompact
from unbounded.compaction.tools_registry import CLEARED_TOOL_RESULT, cleared_stub, is_cleared_text
from unbounded.errors import RecallArgumentError
from unbounded.events import Event, RecallServed, ReceiptWritten
from unbounded.model.entries import Entry
from unbounded.model.normalize import validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.recall import (
    RecallContext,
    RecallRequest,
    TranscriptIndex,
    answer_recall,
    recall_tool_schema,
    receipts_in,
)
from unbounded.session import Session, SessionConfig
from unbounded.side_outputs import side_output_name
from unbounded.transcripts.claude_code import validate_record
from unbounded.transcripts.loader import load_transcript

MODEL = "claude-sonnet-4-5"
TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}, {"name": "Read", "description": "read", "input_schema": {"type": "object"}}]


# -- the tool -----------------------------------------------------------------------------------


def test_schemas_for_both_apis_describe_the_same_arguments() -> None:
    anthropic = recall_tool_schema("anthropic")
    openai = recall_tool_schema("openai")
    assert anthropic["name"] == "recall" and openai["function"]["name"] == "recall"
    assert anthropic["input_schema"] == openai["function"]["parameters"]
    assert set(anthropic["input_schema"]["properties"]) == {"id", "path", "command", "query", "start_line"}
    anthropic["input_schema"]["properties"].clear()  # a copy: the next one is whole
    assert recall_tool_schema()["input_schema"]["properties"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "exactly one"),
        ({"id": "a", "path": "b"}, "exactly one"),
        ({"id": "  "}, "non-empty"),
        ({"id": "a", "start_line": 0}, "start_line"),
        ({"id": "a", "limit": 3}, "not limit"),
        ("id=a", "JSON object"),
    ],
)
def test_wrong_arguments_say_what_to_fix(arguments: Any, problem: str) -> None:
    with pytest.raises(RecallArgumentError, match=problem):
        RecallRequest.from_input(arguments)


def test_the_stub_names_the_handle_and_is_stable() -> None:
    assert cleared_stub() == CLEARED_TOOL_RESULT
    assert cleared_stub("toolu_1") == cleared_stub("toolu_1") == "[Old tool result content cleared — recall id=toolu_1]"
    assert is_cleared_text(cleared_stub("toolu_1")) and is_cleared_text(CLEARED_TOOL_RESULT)
    assert not is_cleared_text("[Old tool result content cleared — recall id=x] and more")


def test_clearing_with_handles_is_idempotent_and_sticks_to_one_stub() -> None:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(6):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"ls {n}"}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 40_000}]})
    state = MicrocompactState()
    state.name_handles = True
    first = microcompact(messages, state, policy=Policy())
    assert first.cleared_ids
    second = microcompact(first.messages, state, policy=Policy())
    assert second.messages == first.messages and not second.cleared_ids  # same bytes, nothing new
    stubs = [b["content"] for m in first.messages if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result" and is_cleared_text(b["content"])]
    assert stubs == [cleared_stub(i) for i in first.cleared_ids]


# -- lookups ------------------------------------------------------------------------------------


def transcript() -> list[Entry]:
    entries = [Entry.user("Fix the parser.")]
    calls = [
        ("t_read", "Read", {"file_path": "/repo/src/parser.py"}, "def parse(text):\n" + "    pass\n" * 300),
        ("t_test", "Bash", {"command": "pytest  -q"}, "FAILED test_parser.py::test_empty - KeyError: 'root'\n1 failed"),
        ("t_log", "Bash", {"command": "git log -3"}, "commit abc\n    add tokenizer"),
    ]
    for tool_id, name, tool_input, output in calls:
        entries.append(Entry.assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}], timestamp="2025-06-01T10:00:00.000Z"))
        entries.append(Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": output}]))
    return entries


def context(entries: list[Entry], *, view: list[Entry] | None = None, cleared: frozenset[str] = frozenset(), budget: int = 5_000, kept: dict[str, str] | None = None) -> RecallContext:
    return RecallContext(entries=entries, view=entries if view is None else view, cleared_ids=cleared, index=TranscriptIndex().update(entries), budget_tokens=budget, load_output=(kept or {}).get)


def test_by_id_path_and_command() -> None:
    entries = transcript()
    ctx = context(entries, cleared=frozenset({"t_test"}))
    by_id = answer_recall(RecallRequest("id", "t_test"), ctx)
    assert by_id.found and "KeyError: 'root'" in by_id.text and "cleared from the context" in by_id.text
    by_path = answer_recall(RecallRequest("path", "src/parser.py"), ctx)  # relative to the recorded path
    assert by_path.tool_use_id == "t_read" and "def parse(text):" in by_path.text
    by_command = answer_recall(RecallRequest("command", "pytest -q"), ctx)  # whitespace collapsed
    assert by_command.tool_use_id == "t_test"
    assert not answer_recall(RecallRequest("id", "t_nope"), ctx).found
    assert not answer_recall(RecallRequest("path", "/etc/passwd"), ctx).found  # never outside the transcript


def test_a_long_output_is_cut_to_the_budget_and_read_on_by_line() -> None:
    ctx = context(transcript(), budget=100)
    first = answer_recall(RecallRequest("id", "t_read"), ctx)
    assert len(first.text) <= 100 * 4 + 200
    assert "start_line=" in first.text
    start = int(first.text.rsplit("start_line=", 1)[1].split()[0])
    more = answer_recall(RecallRequest("id", "t_read", start_line=start), ctx)
    assert f"[lines {start}-" in more.text


def test_a_capped_output_comes_back_whole_from_the_store() -> None:
    whole = "line\n" * 3_000 + "the needle\n" + "line\n" * 3_000
    capped = cap_text(whole, 500, "/s/tool-outputs/x.txt")
    assert capped is not None and "the needle" not in capped.text
    entries = [Entry.user("go"), Entry.assistant([{"type": "tool_use", "id": "t_log", "name": "Bash", "input": {"command": "make"}}]), Entry.user([{"type": "tool_result", "tool_use_id": "t_log", "content": capped.text}])]
    answer = answer_recall(RecallRequest("query", "needle"), context(entries, view=[], kept={side_output_name("t_log"): whole}))
    assert "the needle" in answer.text


def test_search_reads_only_what_left_the_context() -> None:
    entries = transcript()
    view = entries[5:]  # the first two calls were summarized away
    ctx = context(entries, view=view)
    hit = answer_recall(RecallRequest("query", "KeyError root"), ctx)
    assert hit.found and "t_test" in hit.text and "KeyError: 'root'" in hit.text
    # what the model still sees is not searched
    assert not answer_recall(RecallRequest("query", "tokenizer"), ctx).found


# -- a session ----------------------------------------------------------------------------------


class Summarizer:
    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        return ModelResponse([{"type": "text", "text": nine_section_summary("the parser")}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, MODEL)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 6, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(hours=2)
        return self.now


async def work(session: Session, turns: int) -> None:
    session.add_user("Fix the parser.")
    for turn in range(turns):
        request = await session.prepare()
        validate_request(request["messages"])
        use = {"type": "tool_use", "id": f"t{turn}", "name": "Read", "input": {"file_path": f"/repo/m{turn}.py"}}
        session.record(ModelResponse([use], "tool_use", {"input_tokens": 10, "output_tokens": 5}, MODEL, id=f"msg_{turn}"))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": f"module {turn}\n" * 200}])


def test_a_session_writes_receipts_and_answers_recall(tmp_path: Path) -> None:
    events: list[Event] = []
    config = SessionConfig(model=MODEL, tools=TOOLS, context_window=60_000)
    session = Session.open(tmp_path / "s", config, policy=Policy(time_based_keep_recent=1), summarizer=Summarizer(), events=events.append, clock=Clock())
    asyncio.run(work(session, 4))
    request = session.last_request
    assert request is not None and [t["name"] for t in request["tools"]] == ["Bash", "Read", "recall"]
    # microcompaction (the idle-gap tier) cleared the older reads, each to its own handle
    stub = cleared_stub("t0")
    assert stub in json.dumps(request["messages"], ensure_ascii=False)
    micro = [e for e in events if isinstance(e, ReceiptWritten) and e.source == "microcompaction"]
    assert micro and micro[0].files == ("/repo/m0.py",)

    answer = session.run_recall({"type": "tool_use", "id": "toolu_r", "name": "recall", "input": {"id": "t0"}})
    assert answer["tool_use_id"] == "toolu_r" and "module 0" in answer["content"]
    assert "cleared by microcompaction (time tier)" in answer["content"]
    wrong = session.run_recall({"type": "tool_use", "id": "toolu_w", "name": "recall", "input": {"id": "a", "query": "b"}})
    assert wrong["is_error"] is True
    served = [e for e in events if isinstance(e, RecallServed)]
    assert [(e.lookup, e.found) for e in served] == [("id", True), ("invalid", False)]

    result = asyncio.run(session.compact())
    receipt = result.boundary.compact_metadata["receipt"]
    assert {item["id"] for item in receipt["toolResults"]} == {"t0", "t1", "t2", "t3"}
    assert receipt["covered"]["by"] == "scripted" and receipt["files"][0] == "/repo/m0.py"
    summary = result.summary_messages[0].content
    assert isinstance(summary, str) and "recall id=t3: Read /repo/m3.py" in summary
    # after the compaction, the summarized text is searched and still recalled by id
    assert "module 2" in session.run_recall({"id": "t_s", "input": {"query": "module 2"}})["content"]
    session.close()

    # the transcript stays readable: every record validates, and the receipts read back
    path = tmp_path / "s" / "transcript.jsonl"
    for number, line in enumerate(path.read_text().splitlines(), 1):
        validate_record(json.loads(line), path, number)
    loaded = load_transcript(path)
    kinds = [r.kind for r in receipts_in(loaded.main_thread())]
    assert kinds.count("compaction") == 1 and "microcompaction" in kinds


def test_recall_is_not_offered_without_tools_or_when_turned_off() -> None:
    chat = Session(SessionConfig(model=MODEL))
    assert not chat.offers_recall
    assert "tools" not in asyncio.run(_prepared(chat))
    off = Session(SessionConfig(model=MODEL, tools=TOOLS), policy=Policy(recall_enabled=False))
    assert [t["name"] for t in asyncio.run(_prepared(off))["tools"]] == ["Bash", "Read"]
    own = Session(SessionConfig(model=MODEL, tools=[*TOOLS, {"name": "recall", "input_schema": {"type": "object"}}]))
    assert not own.offers_recall  # the host's own recall tool wins


def test_recall_is_offered_once_something_was_taken_out(tmp_path: Path) -> None:
    """Before a clear or a compaction it could bring back nothing: its schema is not sent."""
    fresh = Session(SessionConfig(model=MODEL, tools=TOOLS))
    assert not fresh.offers_recall
    assert [t["name"] for t in asyncio.run(_prepared(fresh))["tools"]] == ["Bash", "Read"]
    early = Session(SessionConfig(model=MODEL, tools=TOOLS), policy=Policy(recall_from_start=True))
    assert [t["name"] for t in asyncio.run(_prepared(early))["tools"]] == ["Bash", "Read", "recall"]
    # A session continuing a transcript that was compacted has something to bring back.
    session = Session.open(tmp_path / "s", SessionConfig(model=MODEL, tools=TOOLS), summarizer=Summarizer(), clock=Clock())
    asyncio.run(work(session, 2))
    asyncio.run(session.compact())
    assert session.offers_recall
    session.close()
    resumed = Session.open(tmp_path / "s", SessionConfig(model=MODEL, tools=TOOLS))
    resumed.micro.stats.compactions = 0  # only the transcript says it was compacted
    assert resumed.offers_recall
    resumed.close()


async def _prepared(session: Session) -> ProviderRequest:
    session.add_user("hi")
    return await session.prepare()


# -- LangChain ----------------------------------------------------------------------------------


def test_the_langchain_middleware_registers_recall_and_keeps_what_it_clears() -> None:
    pytest.importorskip("langchain")
    from types import SimpleNamespace

    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from unbounded.integrations.langchain import UnboundedMiddleware

    # At the warning level (a huge buffer), where clearing may rewrite a warm cache.
    policy = Policy(microcompact_protect_recent_tokens=6_000, microcompact_min_savings=5_000, warning_buffer=10**9)
    middleware = UnboundedMiddleware(MODEL, policy=policy)
    assert [t.name for t in middleware.tools] == ["recall"]
    messages: list[Any] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(8):
        messages.append(AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}"))
        messages.append(ToolMessage(content=f"module {n}\n" + "x = 1\n" * 900, tool_call_id=f"call_{n}", id=f"tool_{n}"))
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    cleared = {m.tool_call_id: m for m in update["messages"]}
    assert "call_0" in cleared and cleared["call_0"].content == cleared_stub("call_0")
    archive = update["unbounded"]["archive"]
    assert "call_0" in archive["cleared"]

    state = {"messages": [cleared.get(getattr(m, "tool_call_id", None), m) for m in messages], "unbounded": update["unbounded"]}
    runtime = SimpleNamespace(state=state, tool_call_id="call_recall")
    answer = middleware.tools[0].func(runtime=runtime, id="call_0")  # type: ignore[attr-defined]
    assert "module 0" in answer and "cleared from the context" in answer
    by_path = middleware.tools[0].func(runtime=runtime, path="m1.py")  # type: ignore[attr-defined]
    assert "module 1" in by_path


# -- inspect, the report, replay ---------------------------------------------------------------


def test_inspect_lists_the_receipts_of_a_compacted_session(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from unbounded.cli import (
        app,
        inspect_command,  # noqa: F401  (registers the command)
    )

    config = SessionConfig(model=MODEL, tools=TOOLS, context_window=60_000)
    session = Session.open(tmp_path / "s", config, policy=Policy(time_based_keep_recent=1), summarizer=Summarizer(), clock=Clock())
    asyncio.run(work(session, 4))
    asyncio.run(session.compact())
    session.close()
    path = str(tmp_path / "s" / "transcript.jsonl")
    runner = CliRunner()
    as_json = runner.invoke(app, ["inspect", path, "--json"])
    assert as_json.exit_code == 0, as_json.stderr
    receipts = json.loads(as_json.stdout)["receipts"]
    assert [r["kind"] for r in receipts][-1] == "compaction"
    assert receipts[0]["kind"] == "microcompaction" and receipts[0]["tool_results"][0]["id"] == "t0"
    assert receipts[-1]["covered"]["by"] == "scripted"
    text = runner.invoke(app, ["inspect", path], env={"COLUMNS": "200"})
    assert text.exit_code == 0
    out = text.stdout
    assert "Receipts (3: what compactions took out)" in out
    assert out.count("microcompact ") == 2 and out.count("(time)") == 2 and "(manual)" in out
    assert "tool results" not in out.split("Receipts")[1].split("compaction ")[0]  # 1 result


def test_the_report_shows_the_receipts_of_a_replay(session_2_1: Path) -> None:
    from unbounded.evaluation.replay import ReplayOptions, replay_session
    from unbounded.evaluation.report import render_report_html

    report = replay_session(load_transcript(session_2_1), ReplayOptions(window=19_000, policy=Policy(autocompact_pct_override=80), baselines=False))
    assert report.compactions >= 1
    assert any(line.kind == "compaction" for line in report.receipts)
    assert set(report.to_dict()["recall"]) == {"refetches", "refetch_tokens", "recall_tokens"}
    page = render_report_html(report)
    assert "Receipts: what each compaction took out" in page and "compaction (auto)" in page


@pytest.mark.corpus
def test_replay_counts_refetches_on_a_real_session() -> None:
    from conftest import corpus_files
    from unbounded.evaluation.replay import ReplayOptions, replay_session

    wanted = [p for p in corpus_files() if p.name.startswith("marot-spotter_8463c716")]
    if not wanted:
        pytest.skip("corpus session not available")
    report = replay_session(load_transcript(wanted[0]), ReplayOptions(window=100_000, baselines=False))
    figures = report.to_dict()["recall"]
    # the 100K window clears and summarizes enough that the agent re-reads what we took out
    assert figures["refetches"] >= 1 and figures["refetch_tokens"] > 0 and figures["recall_tokens"] > 0
