"""The `compact_context` tool and the context-budget reminders (extensions/compaction_tool.py,
extensions/budget_reminders.py): a scripted agent against the local server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.engine import TurnOptions, drive_turn, turn_flow
from unbounded.errors import ConfigError
from unbounded.extensions.budget_reminders import BudgetReminders, reminder_text
from unbounded.extensions.compaction_tool import (
    COMPACTION_TOOL_NAME,
    FOCUS_INSTRUCTIONS,
    FOCUS_NOTE,
    CompactionTool,
)
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore

pytest.importorskip("anthropic")

MODEL = "claude-sonnet-5-5"
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]
FOCUS = "keep the failing test names: test_parse_empty, test_parse_unicode"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _session(*extensions: Any, provider: Any = None, policy: Policy | None = None) -> Session:
    config = SessionConfig(model=MODEL, system="You are a coding agent.", tools=TOOLS, context_window=100_000)
    return Session(config, store=MemoryStore(), extensions=list(extensions), summarizer=provider, policy=policy)


async def _agent_turn(session: Session, provider: AnthropicProvider) -> ModelResponse:
    """One turn of an agent whose driver lets the session answer its own tools."""
    flow = turn_flow(session, TurnOptions(recall_rounds=2))
    return await drive_turn(flow, provider.create, lambda reply: reply)


def _tool_names(request: Any) -> list[str]:
    return [tool["name"] for tool in request.json.get("tools") or []]


def _texts(request: Any) -> str:
    out: list[str] = []
    for message_ in request.json["messages"]:
        content = message_["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(str(b.get("text", b.get("content", ""))) for b in content)
    return "\n".join(out)


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _texts_of(message_: dict[str, Any]) -> str:
    content = _unmarked(message_["content"])
    return content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content)


def test_a_scripted_agent_calls_the_compaction_tool_with_a_focus(api_server: ApiServer) -> None:
    provider = AnthropicProvider(api_server.anthropic_client())
    session = _session(CompactionTool(), BudgetReminders(), provider=provider)
    threshold = session.thresholds.autocompact
    api_server.anthropic.push(
        message("Reading the tests.", tool_use_block("Read", {"file_path": "/w/test_parse.py"}), usage={"input_tokens": int(threshold * 0.85)}),
        message(tool_use_block(COMPACTION_TOOL_NAME, {"focus": FOCUS}, id="toolu_c1"), usage={"input_tokens": int(threshold * 0.9)}),
        message(nine_section_summary("fixing the parser tests")),
        message("Fixed test_parse_empty and test_parse_unicode."),
    )
    session.add_user("Fix the failing parser tests.")
    first = _run(_agent_turn(session, provider))
    assert first.tool_uses[0]["name"] == "Read"
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "toolu_01", "content": "def test_parse_empty(): ..."}])
    final = _run(_agent_turn(session, provider))
    assert final.text == "Fixed test_parse_empty and test_parse_unicode."

    sent = api_server.requests
    assert len(sent) == 4 and not api_server.rejected  # every request valid
    assert COMPACTION_TOOL_NAME not in _tool_names(sent[0])  # under the share: not offered
    assert COMPACTION_TOOL_NAME in _tool_names(sent[1])  # over 80 % of the threshold: offered
    # The budget reminder for the highest mark passed (75 %) was in the same request, appended.
    assert "Context budget: 85%" in _texts(sent[1])
    # Appended, never rewriting what was sent before (cache markers aside).
    assert _texts_of(sent[1].json["messages"][0]) == _texts_of(sent[0].json["messages"][0])
    assert "Context budget" in _texts_of(sent[1].json["messages"][-1])
    # The summary request carried the focus in its prompt (the last message).
    assert FOCUS_INSTRUCTIONS.format(focus=FOCUS) in _texts_of(sent[2].json["messages"][-1])
    # After the compaction: the focus kept verbatim after the summary, the tool no longer offered.
    after = _texts(sent[3])
    assert FOCUS_NOTE.format(focus=FOCUS) in after
    assert "fixing the parser tests" in after
    assert COMPACTION_TOOL_NAME not in _tool_names(sent[3])
    assert session.status().compactions == 1


def test_a_caller_answers_the_tool_with_answer_tool(api_server: ApiServer) -> None:
    provider = AnthropicProvider(api_server.anthropic_client())
    tool = CompactionTool()
    session = _session(tool, provider=provider, policy=Policy(compaction_tool_share=0.01))
    api_server.anthropic.push(
        message(tool_use_block(COMPACTION_TOOL_NAME, {}, id="toolu_c2")),
        message(nine_section_summary("the parser")),
        message("Going on."),
    )
    session.add_user("Fix the parser " + "please " * 400)
    reply = _run(session.call(provider))
    use = reply.tool_uses[0]
    assert session.answers_tool(COMPACTION_TOOL_NAME)
    result = _run(session.answer_tool(use))
    assert result == {"type": "tool_result", "tool_use_id": "toolu_c2", "content": "The context will be compacted before your next turn."}
    session.add_tool_results([result])
    _run(session.call(provider))
    assert session.status().compactions == 1
    assert "natural break" in _texts(api_server.requests[1])
    assert not api_server.rejected


def test_the_tool_is_not_offered_below_the_share_or_when_switched_off() -> None:
    tool = CompactionTool()
    session = _session(tool, policy=Policy(compaction_tool_share=0.8))
    threshold = session.thresholds.autocompact
    session.add_user("hi")
    session.record(ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": int(threshold * 0.79)}, MODEL))
    session.add_user("go on")
    assert tool.tools_state(session) is False
    assert not session.answers_tool(COMPACTION_TOOL_NAME)
    session.record(ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": int(threshold * 0.81)}, MODEL))
    session.add_user("go on")
    assert tool.tools_state(session) is True
    assert COMPACTION_TOOL_NAME in [t["name"] for t in session.offered_tools()]
    off = CompactionTool()
    switched = _session(off, policy=Policy(compaction_tool_enabled=False, compaction_tool_share=0.01))
    switched.add_user("hi " * 5000)
    assert off.tools_state(switched) is False
    assert CompactionTool().tools_state(_session(policy=Policy(compaction_tool_share=0.01))) is False


@pytest.mark.parametrize("arguments", [{"focus": 3}, "not an object"])
def test_a_bad_focus_gets_an_error_result_and_no_compaction(arguments: Any) -> None:
    tool = CompactionTool()
    session = _session(tool, policy=Policy(compaction_tool_share=0.01))
    session.add_user("hi " * 5000)
    assert tool.tools_state(session) is True
    result = _run(session.answer_tool({"type": "tool_use", "id": "toolu_x", "name": COMPACTION_TOOL_NAME, "input": arguments}))
    assert result["is_error"] is True and "focus" in result["content"]
    assert tool._due == []


def test_a_session_refuses_a_tool_it_does_not_answer() -> None:
    session = _session()
    with pytest.raises(ConfigError, match="answers no calls"):
        _run(session.answer_tool({"type": "tool_use", "id": "t", "name": COMPACTION_TOOL_NAME, "input": {}}))


@pytest.mark.parametrize(
    ("field", "value"),
    [("compaction_tool_share", 0.0), ("compaction_tool_share", 1.5), ("budget_reminder_marks", (0.9, 0.5)), ("budget_reminder_marks", (0.5, 0.5)), ("budget_reminder_marks", (0.0,))],
)
def test_bad_tool_and_reminder_settings_are_refused(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        Policy(**{field: value})


# -- budget reminders -------------------------------------------------------------------------


def _at_share(session: Session, share: float) -> None:
    tokens = int(session.thresholds.autocompact * share)
    session.record(ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": tokens}, MODEL))
    session.add_user("go on")


def _reminders(session: Session) -> list[str]:
    return [str(e.content) for e in session.view if "Context budget" in str(e.content)]


def test_each_mark_is_announced_once_and_again_after_a_compaction() -> None:
    reminders = BudgetReminders()
    session = _session(reminders, policy=Policy(budget_reminder_marks=(0.5, 0.75)))
    session.add_user("start")
    _at_share(session, 0.49)
    _run(reminders.before_prepare(session))
    assert _reminders(session) == []
    _at_share(session, 0.5)
    _run(reminders.before_prepare(session))
    _run(reminders.before_prepare(session))  # the same mark: not again
    assert len(_reminders(session)) == 1 and reminders.announced == 0.5
    _at_share(session, 0.8)
    _run(reminders.before_prepare(session))
    assert reminders.announced == 0.75 and len(_reminders(session)) == 2
    reminders.after_compact(session, None)  # type: ignore[arg-type]
    assert reminders.announced == 0.0


def test_a_jump_past_several_marks_is_one_reminder_for_the_highest() -> None:
    reminders = BudgetReminders()
    session = _session(reminders, policy=Policy(budget_reminder_marks=(0.5, 0.75)))
    session.add_user("start")
    _at_share(session, 0.8)
    _run(reminders.before_prepare(session))
    _at_share(session, 0.82)
    _run(reminders.before_prepare(session))
    assert len(_reminders(session)) == 1 and reminders.announced == 0.75


def test_a_reminder_waits_for_a_user_turn_and_respects_the_switch() -> None:
    reminders = BudgetReminders()
    session = _session(reminders)
    session.add_user("start")
    session.record(ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": session.thresholds.autocompact}, MODEL))
    _run(reminders.before_prepare(session))
    assert _reminders(session) == []  # the last record is the reply
    off = BudgetReminders()
    quiet = _session(off, policy=Policy(budget_reminders_enabled=False))
    quiet.add_user("start")
    _at_share(quiet, 0.95)
    _run(off.before_prepare(quiet))
    assert _reminders(quiet) == []


def test_reminder_text_says_what_is_left() -> None:
    assert reminder_text(150_000, 200_000).startswith("<system-reminder>Context budget: 75%")
    assert "50,000 left" in reminder_text(150_000, 200_000)
    assert "0 left" in reminder_text(250_000, 200_000)


# -- kept across a resume (the session's saved state) -----------------------------------------


def _open(folder: Path, *extensions: Any, policy: Policy | None = None) -> Session:
    config = SessionConfig(model=MODEL, system="You are a coding agent.", tools=TOOLS, context_window=100_000)
    return Session.open(folder, config, extensions=list(extensions), policy=policy)


def test_a_resumed_session_does_not_remind_again_of_a_mark_it_gave(tmp_path: Path) -> None:
    policy = Policy(budget_reminder_marks=(0.5, 0.75))
    session = _open(tmp_path / "s", BudgetReminders(), policy=policy)
    session.add_user("start")
    _at_share(session, 0.8)
    _run(session.prepare())
    assert len(_reminders(session)) == 1
    session.close()

    resumed = _open(tmp_path / "s", reminders := BudgetReminders(), policy=policy)
    assert reminders.announced == 0.75
    _at_share(resumed, 0.82)
    _run(resumed.prepare())
    assert len(_reminders(resumed)) == 1  # the 0.75 mark is not given twice
    reminders.after_compact(resumed, None)  # type: ignore[arg-type]
    resumed.save_state()
    resumed.close()
    again = _open(tmp_path / "s", fresh := BudgetReminders(), policy=policy)
    assert fresh.announced == 0.0  # a compaction started the marks over, and that was kept
    again.close()


def test_a_resumed_session_offers_the_tool_as_before_and_runs_the_compaction_it_promised(tmp_path: Path) -> None:
    session = _open(tmp_path / "s", CompactionTool())
    session.add_user("start")
    _at_share(session, 0.85)
    assert COMPACTION_TOOL_NAME in [t["name"] for t in _run(session.prepare())["tools"]]
    _at_share(session, 0.3)  # microcompaction, say, took it back under the share
    assert COMPACTION_TOOL_NAME in [t["name"] for t in _run(session.prepare())["tools"]]
    session.close()

    resumed = _open(tmp_path / "s", CompactionTool())
    assert COMPACTION_TOOL_NAME in [t["name"] for t in _run(resumed.prepare())["tools"]]  # the tool list unchanged
    call = tool_use_block(COMPACTION_TOOL_NAME, {"focus": FOCUS}, id="toolu_c1")
    resumed.record(ModelResponse([call], "tool_use", {"input_tokens": 30_000}, MODEL))
    resumed.add_tool_results([_run(resumed.answer_tool(call))])
    resumed.close()  # stopped before the compaction it promised

    last = _open(tmp_path / "s", tool := CompactionTool())
    _run(last.prepare())
    assert last.status().compactions == 1  # the promised compaction ran, with the focus
    assert any(FOCUS_NOTE.format(focus=FOCUS) == e.content for e in last.view)
    assert COMPACTION_TOOL_NAME not in [t["name"] for t in last.cache_safe_params().tools or []]
    assert tool.answers_tool(last, COMPACTION_TOOL_NAME) is False
    last.close()


@pytest.mark.parametrize("stored", [[1], {"budget_reminders": 0.5}, "x"])
def test_a_stored_extension_state_that_is_not_objects_by_name_is_refused(stored: Any) -> None:
    store = MemoryStore()
    store.save_state("session", {"extensions": stored})
    with pytest.raises(ConfigError, match=r"extensions .* not an object of objects by extension name"):
        Session(SessionConfig(model=MODEL), store=store)
    fine = MemoryStore()
    fine.save_state("session", {"extensions": {"budget_reminders": {"announced": 0.5}}})
    reminders = BudgetReminders()
    Session(SessionConfig(model=MODEL), store=fine, extensions=[reminders])
    assert reminders.announced == 0.5
