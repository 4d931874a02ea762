"""The agent loop over Python callables, through the Anthropic provider and the local server."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from summaries import asks_for_summary, nine_section_summary

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.errors import ConfigError
from unbounded.events import AgentFinished, CompactionFinished, Event, ModelTurn, ToolExecuted
from unbounded.integrations import (
    AgentOptions,
    Tool,
    aiter_agent,
    arun_agent,
    iter_agent,
    run_agent,
    tool,
    tool_schema,
)
from unbounded.integrations._schema import json_schema_for, parse_docstring
from unbounded.integrations.agent_loop import AgentKeywords
from unbounded.model.profile import MODEL_PROFILE
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

pytest.importorskip("anthropic")

MODEL = "claude-sonnet-4-6"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "exact"] = "fast",
    paths: list[str] | None = None,
    note: Annotated[str, "free text for the log"] = "",
) -> list[str]:
    """Search the code base.

    Returns matching lines.

    Args:
        query: What to look for,
            a regular expression.
        limit: At most this many results.
    """
    return [query] * limit


def test_schemas_from_signatures_and_docstrings() -> None:
    schema = tool_schema(search)
    assert schema["name"] == "search"
    assert schema["description"] == "Search the code base.\n\nReturns matching lines."
    properties = schema["input_schema"]["properties"]
    assert schema["input_schema"]["required"] == ["query"]
    assert properties["query"] == {"type": "string", "description": "What to look for, a regular expression."}
    assert properties["limit"] == {"type": "integer", "description": "At most this many results.", "default": 10}
    assert properties["mode"] == {"enum": ["fast", "exact"], "type": "string", "default": "fast"}
    assert properties["paths"] == {"type": "array", "items": {"type": "string"}, "default": None}
    assert properties["note"]["description"] == "free text for the log"
    assert json_schema_for(Color) == {"enum": ["red", "blue"]}
    assert json_schema_for(dict[str, int]) == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert json_schema_for(tuple[int, ...]) == {"type": "array", "items": {"type": "integer"}}
    assert json_schema_for(int | str) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert parse_docstring(None) == ("", {})

    def bad(*args: int) -> None:
        """No."""

    with pytest.raises(ConfigError, match=r"\*args"):
        tool_schema(bad)
    with pytest.raises(ConfigError, match="tool name"):
        tool_schema(search, name="has spaces")


def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    await asyncio.sleep(0)
    return a + b


def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def tool_results(request: RecordedRequest) -> list[dict[str, Any]]:
    content = request.json["messages"][-1]["content"]
    return [b for b in content if b.get("type") == "tool_result"]


def test_run_agent_executes_tools_and_stops(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    api_server.anthropic.push(
        message(
            tool_use_block("read_file", {"path": "setup.py"}, id="toolu_1"),
            tool_use_block("add", {"a": 2, "b": 3}, id="toolu_2"),
            id="msg_1",
        ),
        message(
            tool_use_block("explode", {"reason": "x"}, id="toolu_3"),
            tool_use_block("missing", {}, id="toolu_4"),
            tool_use_block("add", {"a": 1}, id="toolu_5"),
            id="msg_2",
        ),
        message("All done: 5.", id="msg_3"),
    )
    provider = AnthropicProvider(api_server.anthropic_client(sync=True))
    config = SessionConfig(model=MODEL, system="You are terse.", max_tokens=512)
    result = run_agent(config, provider, tools=[read_file, add, explode], prompt="Go.", policy=Policy())
    assert result.text == "All done: 5." and result.stop_reason == "end_turn" and result.turns == 3

    first, second, third = api_server.requests
    assert [t["name"] for t in first.json["tools"]] == ["read_file", "add", "explode"]  # no recall before a clear
    assert first.json["tools"][-1]["cache_control"]["type"] == "ephemeral"
    assert [(r["tool_use_id"], r.get("is_error", False)) for r in tool_results(second)] == [("toolu_1", False), ("toolu_2", False)]
    assert json.dumps(tool_results(second)[1]["content"]) == '"5"'
    errors = tool_results(third)
    assert all(r["is_error"] for r in errors)
    assert "RuntimeError: boom: x" in errors[0]["content"] and "no tool named 'missing'" in errors[1]["content"]
    assert errors[2]["content"] == "Error: invalid arguments for add: missing required argument(s) 'b'"

    kinds = [type(e).__name__ for e in result.events]
    assert kinds == ["ModelTurn", "ToolExecuted", "ToolExecuted", "ModelTurn", "ToolExecuted", "ToolExecuted", "ToolExecuted", "ModelTurn", "AgentFinished"]
    assert result.session.messages[-1]["role"] == "assistant"


def test_max_turns_stops_with_the_results_added(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    def again(request: RecordedRequest) -> Any:
        n = len(api_server.requests)
        return message(tool_use_block("read_file", {"path": f"f{n}.py"}, id=f"toolu_{n}"), id=f"msg_{n}")

    api_server.anthropic.push(again, again)
    provider = AnthropicProvider(api_server.anthropic_client(sync=True))
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    result = run_agent(session, provider, tools=[read_file], prompt="Read everything.", max_turns=2)
    assert result.stop_reason == "max_turns" and result.turns == 2 and result.session is session
    assert session.messages[-1]["role"] == "user"  # the last tool results wait for the next run
    api_server.anthropic.push(message("Read them all.", id="msg_end"))
    later = run_agent(session, provider, tools=[read_file])
    assert later.text == "Read them all." and later.stop_reason == "end_turn"


def test_async_loop_streams_and_yields_events(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    api_server.anthropic.push(
        message(tool_use_block("add", {"a": 20, "b": 22}, id="toolu_1"), id="msg_1"),
        message("42", id="msg_2"),
    )
    seen: list[Event] = []

    async def main() -> list[Event]:
        provider = AnthropicProvider(api_server.anthropic_client())
        return [
            event
            async for event in aiter_agent(
                SessionConfig(model=MODEL), provider, tools=[add], prompt="20 + 22?", stream=True, events=seen.append, policy=Policy()
            )
        ]

    events = asyncio.run(main())
    assert all(r.stream for r in api_server.requests)
    assert isinstance(events[0], ModelTurn) and isinstance(events[1], ToolExecuted)
    assert events[1].content == "42" and not events[1].is_error
    assert isinstance(events[-1], AgentFinished) and events[-1].text == "42"
    assert seen == events  # the sink gets every event the iterator yields


def test_compaction_during_a_long_run(api_server: ApiServer) -> None:
    """A small window: the loop keeps going through auto-compaction, and the pipeline's own
    events come out of the iterator."""
    from unbounded.providers.anthropic import AnthropicProvider

    def step(request: RecordedRequest) -> Any:
        if asks_for_summary(request.json["messages"]):  # the loop's own model writes summaries
            return message(nine_section_summary("read the files"), id=f"msg_s{len(api_server.requests)}")
        n = sum(1 for r in api_server.requests if not asks_for_summary(r.json["messages"]))
        size = len(request.body) // 4
        if n >= 12:
            return message("Finished.", id=f"msg_{n}", usage={"cache_read_input_tokens": size})
        return message(tool_use_block("read_file", {"path": f"f{n}.py"}, id=f"toolu_{n}"), id=f"msg_{n}", usage={"cache_read_input_tokens": size})

    def big_read(path: str) -> str:
        """Read a big file."""
        return f"{path}\n" + "line of code\n" * 700

    api_server.anthropic.push(*([step] * 20))
    provider = AnthropicProvider(api_server.anthropic_client(sync=True))
    config = SessionConfig(model=MODEL, context_window=40_000)  # auto-compaction at 26,800 tokens
    events = list(
        iter_agent(config, provider, tools=[Tool.from_function(big_read, name="read_file", compactable=True)], prompt="Read them.", policy=Policy(), max_turns=12)
    )
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished and all(e.summarizer == "anthropic" and e.fallback is None for e in finished)
    assert isinstance(events[-1], AgentFinished) and events[-1].text == "Finished."


def test_tools_decorator_and_misuse() -> None:
    @tool(compactable=True)
    def grep(pattern: str) -> str:
        """Search."""
        return pattern

    assert isinstance(grep, Tool) and grep.compactable and grep("x") == "x"
    assert tool(read_file).name == "read_file"

    class Dummy:
        name = "dummy"
        supports_cache_edits = False
        profile = MODEL_PROFILE

        async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
            raise AssertionError("not called")

    session = Session(SessionConfig(model=MODEL), policy=Policy())
    with pytest.raises(ConfigError, match="nothing for the model"):
        run_agent(session, Dummy(), tools=[grep])
    assert session.micro.tools.is_compactable("grep")  # registered for microcompaction
    with pytest.raises(ConfigError, match="two tools"):
        run_agent(session, Dummy(), tools=[read_file, read_file], prompt="x")
    with pytest.raises(ConfigError, match="SessionConfig"):
        run_agent(session, Dummy(), prompt="x", policy=Policy())

    async def inside_a_loop() -> None:  # run_agent works there too: on a worker thread
        with pytest.raises(AssertionError, match="not called"):
            run_agent(SessionConfig(model=MODEL), Dummy(), prompt="x")

    asyncio.run(inside_a_loop())


def test_arun_agent_returns_the_result(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    api_server.anthropic.push(message("Hello.", id="msg_1"))

    async def main() -> Any:
        provider = AnthropicProvider(api_server.anthropic_client())
        return await arun_agent(SessionConfig(model=MODEL), provider, prompt="Say hello.", policy=Policy())

    result = asyncio.run(main())
    assert result.text == "Hello." and result.turns == 1 and isinstance(result.events[-1], AgentFinished)


# --------------------------------------------------------------------------- typed arguments


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Span:
    start: int
    end: int


def make_ticket_model() -> Any:
    pydantic = pytest.importorskip("pydantic")

    class Ticket(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        title: str
        priority: Priority = Priority.LOW

    return Ticket


Ticket = make_ticket_model()


def file_ticket(ticket: Ticket, span: Span, tags: set[str], due: datetime.date, level: Priority = Priority.LOW) -> Any:  # type: ignore[valid-type]
    """File a ticket."""
    return {"title": ticket.title, "priority": ticket.priority, "lines": span.end - span.start,
            "tags": sorted(tags), "year": due.year, "level": level, "span": span}


def test_typed_arguments_are_converted_and_checked(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    good = {"ticket": {"title": "Crash", "priority": "high"}, "span": {"start": 3, "end": 10},
            "tags": ["ui", "ui", "db"], "due": "2026-05-01", "level": "high"}
    bad = {"ticket": {"priority": "urgent"}, "span": {"start": "x", "end": 2}, "tags": [], "due": "soon", "extra": 1}
    api_server.anthropic.push(
        message(tool_use_block("file_ticket", good, id="toolu_1"), tool_use_block("file_ticket", bad, id="toolu_2"), id="msg_1"),
        message("Filed one.", id="msg_2"),
    )
    provider = AnthropicProvider(api_server.anthropic_client(sync=True))
    result = run_agent(SessionConfig(model=MODEL), provider, tools=[file_ticket], prompt="File it.", policy=Policy())
    executed = [e for e in result.events if isinstance(e, ToolExecuted)]
    assert not executed[0].is_error
    assert json.loads(str(executed[0].content)) == {
        "title": "Crash", "priority": "high", "lines": 7, "tags": ["db", "ui"], "year": 2026,
        "level": "high", "span": {"start": 3, "end": 10},
    }
    error = str(executed[1].content)
    assert executed[1].is_error and error.startswith("Error: invalid arguments for file_ticket:")
    for part in ("unexpected argument(s) 'extra'", "ticket.title: Field required", "ticket.priority: Input should be 'low' or 'high'",
                 "span.start: Input should be a valid integer", "due: Input should be a valid date"):
        assert part in error, part
    sent = tool_results(api_server.last)
    assert [r.get("is_error", False) for r in sent] == [False, True]


# --------------------------------------------------------------------------- leaving the loop


def test_breaking_out_of_iter_agent_answers_the_tool_calls(api_server: ApiServer) -> None:
    """The caller stops reading after the first of two tool calls; the next run is valid."""
    from unbounded.providers.anthropic import AnthropicProvider

    api_server.anthropic.push(
        message(
            tool_use_block("read_file", {"path": "a.py"}, id="toolu_1"),
            tool_use_block("read_file", {"path": "b.py"}, id="toolu_2"),
            id="msg_1",
        ),
        message(tool_use_block("read_file", {"path": "c.py"}, id="toolu_3"), id="msg_2"),
        message("Fine, stopping.", id="msg_3"),
    )
    provider = AnthropicProvider(api_server.anthropic_client(sync=True))
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    for event in iter_agent(session, provider, tools=[read_file], prompt="Read a.py and b.py."):
        if isinstance(event, ToolExecuted):
            break  # after read_file(a.py) ran, before read_file(b.py)
    assert session.pending_tool_use_ids() == []
    for event in iter_agent(session, provider, tools=[read_file], prompt="Now c.py."):
        if isinstance(event, ModelTurn):
            break  # before any tool of this turn ran
    result = run_agent(session, provider, tools=[read_file], prompt="Stop there.")
    assert result.text == "Fine, stopping." and not session.closed  # a session passed in stays open
    answered = [b for m in api_server.last.json["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert [(b["tool_use_id"], b.get("is_error", False)) for b in answered] == [("toolu_1", False), ("toolu_2", True), ("toolu_3", True)]
    assert answered[0]["content"] == "contents of a.py"
    assert "interrupted" in json.dumps(api_server.last.json["messages"]).lower()


def test_run_agent_twice_on_one_folder(api_server: ApiServer, tmp_path: Path) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    api_server.anthropic.push(message("One.", id="msg_1"), message("Two.", id="msg_2"))
    provider = AnthropicProvider(api_server.anthropic_client(sync=True))
    config = SessionConfig(model=MODEL)
    first = run_agent(config, provider, prompt="one", session_folder=tmp_path / "s", policy=Policy())
    second = run_agent(config, provider, prompt="two", session_folder=tmp_path / "s", policy=Policy())
    assert first.session.closed and second.session.closed  # the loop opened them: it closed them
    assert second.text == "Two." and len(api_server.last.json["messages"]) == 3


# -- AgentOptions: the one set of options the four entry points take ------------------------------


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("max_turns", 0, "max_turns must be at least 1, not 0"),
        ("max_turns", -3, "max_turns must be at least 1"),
        ("max_turns", True, "max_turns must be an int"),
        ("max_turns", 2.0, "max_turns must be an int"),
        ("stream", "yes", "stream must be True or False"),
        ("tools", read_file, "tools must be a list"),
        ("tools", "read_file", "tools must be a list"),
        ("tools", [read_file, read_file], "tools: two tools are named 'read_file'"),
        ("prompt", 5, "prompt must be a string or a list of content blocks"),
        ("prompt", ["text"], "prompt must be a string or a list of content blocks"),
        ("session_folder", 3, "session_folder must be a path"),
        ("policy", {"compact_enabled": False}, "policy must be a Policy"),
        ("summarizer", "extractive", "summarizer must be a Provider"),
        ("events", "print", "events must be callable"),
    ],
)
def test_agent_options_refuse_a_wrong_value_naming_the_field(field: str, value: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("AgentOptions." + says)):
        AgentOptions(**{field: value})
    with pytest.raises(ConfigError, match="AgentOptions." + field):  # the keyword form checks too
        run_agent(SessionConfig(model=MODEL), _NeverCalled(), **{field: value})


def test_agent_options_take_their_edge_values(tmp_path: Path) -> None:
    options = AgentOptions(
        tools=[read_file],
        prompt=[{"type": "text", "text": "hi"}],
        max_turns=1,
        stream=False,
        session_folder=tmp_path,
        policy=Policy(),
        events=print,
    )
    assert options.max_turns == 1 and options.session_folder == tmp_path
    assert [t.name for t in options.tools] == ["read_file"]  # made into Tools once, here
    assert all(isinstance(t, Tool) for t in options.tools)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_turns = 3  # type: ignore[misc]


def test_the_keywords_are_exactly_the_options_fields() -> None:
    assert list(AgentKeywords.__annotations__) == [f.name for f in dataclasses.fields(AgentOptions)]
    with pytest.raises(ConfigError, match=r"unknown agent option\(s\) max_turn: the options are tools, prompt, max_turns,"):
        run_agent(SessionConfig(model=MODEL), _NeverCalled(), max_turn=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="options must be an AgentOptions, not dict"):
        run_agent(SessionConfig(model=MODEL), _NeverCalled(), {"prompt": "x"})  # type: ignore[arg-type]


class _NeverCalled:
    name = "never"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
        raise AssertionError("not called")


def _user_texts(request: RecordedRequest) -> list[str]:
    texts: list[str] = []
    for m in request.json["messages"]:
        if m["role"] == "user":
            content = m["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            texts += [b["text"] for b in blocks if b.get("type") == "text"]
    return texts


def test_all_four_entry_points_take_options_with_keywords_over_them(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    options = AgentOptions(tools=[add], prompt="from the options", max_turns=1, stream=False)

    def turn() -> None:
        api_server.anthropic.push(message(tool_use_block("add", {"a": 1, "b": 2}, id="toolu_1"), id="msg_1"))

    turn()
    result = run_agent(SessionConfig(model=MODEL, max_tokens=512), AnthropicProvider(api_server.anthropic_client(sync=True)), options)
    assert result.stop_reason == "max_turns" and result.turns == 1  # the options' max_turns
    assert _user_texts(api_server.requests[-1]) == ["from the options"]
    assert not api_server.requests[-1].stream and api_server.requests[-1].json["tools"][0]["name"] == "add"

    turn()
    events = list(iter_agent(SessionConfig(model=MODEL, max_tokens=512), AnthropicProvider(api_server.anthropic_client(sync=True)), options, prompt="a keyword"))
    assert isinstance(events[-1], AgentFinished) and events[-1].stop_reason == "max_turns"
    assert _user_texts(api_server.requests[-1]) == ["a keyword"]  # the keyword wins
    assert options.prompt == "from the options"  # and the options are left as they were

    async def both_async() -> tuple[Any, list[Event]]:
        provider = AnthropicProvider(api_server.anthropic_client())
        turn()
        ran = await arun_agent(SessionConfig(model=MODEL, max_tokens=512), provider, options, stream=True)
        turn()
        seen = [e async for e in aiter_agent(SessionConfig(model=MODEL, max_tokens=512), provider, options=options, max_turns=1, prompt="async")]
        return ran, seen

    ran, seen = asyncio.run(both_async())
    assert ran.turns == 1 and api_server.requests[-2].stream  # stream=True over stream=False
    assert _user_texts(api_server.requests[-1]) == ["async"] and isinstance(seen[-1], AgentFinished)
