"""An agent loop over plain Python functions, with unbounded's context management every turn.

    def read_file(path: str) -> str:
        '''Read a text file.'''
        return Path(path).read_text()

    result = run_agent(SessionConfig(model="claude-sonnet-4-6"), AnthropicProvider(),
                       tools=[read_file], prompt="What does setup.py install?")
    print(result.text)

Each turn is `Session.call`: prepare (auto-compaction, microcompaction, cache breakpoints) →
the provider → record; a prompt-too-long answer compacts once and retries. Every `tool_use`
of the reply is run (sync functions on the loop's thread in the blocking variants and in a
worker thread in the async ones; coroutine functions awaited); an exception becomes an
`is_error` tool result the model can react to. The loop stops at a reply without tool calls
(or at `max_turns`, with the tool results already added so the session can go on later).

Tool schemas come from signatures and docstrings, and the model's arguments are checked and
converted into the annotated types before the call (both in `integrations/_schema.py`);
arguments that do not fit become an `is_error` result saying what is wrong.
A return value that is not a string becomes JSON text (pydantic models, dataclasses, Enums,
sets and dates included); a list of text/image/document blocks is sent as blocks.

Leaving the loop mid-round answers the tool calls still waiting (the results of the tools
that ran, "interrupted" for the others), so the next run is valid; a session the loop opened
in a folder is closed when the loop ends.

The session's own `recall` tool (offered when tools are in use, `Policy.recall_enabled`) is
answered by the session from its transcript (`Session.run_recall`); a tool of yours named
`recall` takes its place.

The four entry points take one `AgentOptions` (tools, prompt, max_turns, stream, ...),
checked when it is made, or its fields as keywords, or both (the keywords win).

`aiter_agent` / `iter_agent` yield the events as they happen (`ModelTurn`, `ToolExecuted`,
the pipeline's own events when the loop built the session, then `AgentFinished`);
`arun_agent` / `run_agent` return an `AgentResult`. The blocking variants also work inside a
running event loop: there they run on a worker thread with a loop of its own
(`unbounded.blocking`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from typing_extensions import TypedDict, Unpack

from unbounded.blocking import BlockingDriver, BlockingRunner
from unbounded.errors import ConfigError, ToolArgumentError
from unbounded.events import AgentFinished, Event, EventSink, ModelTurn, ToolExecuted
from unbounded.integrations._schema import ArgumentConverter, tool_schema
from unbounded.integrations._support import as_session, register_compactable_tools
from unbounded.model.normalize import interrupted_result
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse, Provider
from unbounded.recall.schema import RECALL_TOOL_NAME
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession


@dataclass(frozen=True, slots=True)
class Tool:
    """A Python function offered to the model as a tool (call it like the function)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    function: Callable[..., Any]
    compactable: bool = False
    """Its output can be produced again (a read, a search, a command's output): microcompaction
    may clear old results of it."""
    converter: ArgumentConverter = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "converter", ArgumentConverter(self.function, self.name))

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        compactable: bool = False,
    ) -> Tool:
        """A tool from a function's signature and docstring."""
        schema = tool_schema(function, name=name, description=description)
        return cls(
            schema["name"], schema["description"], schema["input_schema"], function, compactable
        )

    def definition(self) -> dict[str, Any]:
        """The tool definition for a request's `tools`."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    async def run(self, arguments: Mapping[str, Any], *, inline: bool = False) -> Any:
        """Call the function with the model's arguments, converted into its annotated types
        (ToolArgumentError when they do not fit); sync functions run in a worker thread, or
        on this thread when `inline`."""
        arguments = self.converter.convert(arguments)
        if inspect.iscoroutinefunction(self.function):
            return await self.function(**arguments)
        if inline:
            value = self.function(**arguments)
        else:
            value = await asyncio.to_thread(self.function, **arguments)
        if inspect.isawaitable(value):
            return await value
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself."""
        return self.function(*args, **kwargs)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, compactable: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    compactable: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: `@tool` or `@tool(compactable=True)` turns a function into a `Tool`."""
    if function is not None:
        return Tool.from_function(function, name=name, description=description)

    def decorate(inner: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            inner, name=name, description=description, compactable=compactable
        )

    return decorate


def as_tools(tools: Sequence[Callable[..., Any] | Tool]) -> list[Tool]:
    """Tools from functions (or tools); names must be unique."""
    out = [t if isinstance(t, Tool) else Tool.from_function(t) for t in tools]
    seen: set[str] = set()
    for item in out:
        if item.name in seen:
            raise ConfigError(f"two tools are named {item.name!r}")
        seen.add(item.name)
    return out


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True, slots=True)
class AgentResult:
    """What an agent run produced."""

    text: str
    """The text of the last reply."""
    stop_reason: str
    """The last reply's stop reason, or "max_turns"."""
    turns: int
    response: ModelResponse | None
    session: Session
    events: tuple[Event, ...] = field(default=(), repr=False)


# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """How an agent run goes, taken by all four entry points (checked when made)."""

    tools: Sequence[Callable[..., Any] | Tool] = ()
    """Functions (or `Tool`s) offered to the model; names must be unique."""
    prompt: str | Sequence[Mapping[str, Any]] | None = None
    """Added as a user message; without one the session must end with a user message."""
    max_turns: int = 20
    """Model replies at most (at least 1)."""
    stream: bool = True
    """Stream replies (the Anthropic SDK refuses long unstreamed calls)."""
    session_folder: str | Path | None = None
    """Where a session built from a SessionConfig is kept (else in memory)."""
    policy: Policy | None = None
    """The policy of a session built from a SessionConfig."""
    summarizer: Provider | None = None
    """Writes the summaries of a session built from a SessionConfig (else `provider`)."""
    events: EventSink | None = None
    """Receives every event the run yields."""

    def __post_init__(self) -> None:
        if isinstance(self.tools, (str, bytes)) or not isinstance(self.tools, Sequence):
            raise ConfigError(
                f"AgentOptions.tools must be a list of functions or Tools, not "
                f"{type(self.tools).__name__}"
            )
        try:
            offered = tuple(as_tools(self.tools))
        except ConfigError as error:
            raise ConfigError(f"AgentOptions.tools: {error}") from error
        object.__setattr__(self, "tools", offered)
        prompt = self.prompt
        if not (
            prompt is None
            or isinstance(prompt, str)
            or (isinstance(prompt, Sequence) and all(isinstance(b, Mapping) for b in prompt))
        ):
            raise ConfigError(
                "AgentOptions.prompt must be a string or a list of content blocks (dicts), not "
                f"{type(prompt).__name__}"
            )
        if isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int):
            raise ConfigError(
                f"AgentOptions.max_turns must be an int, not {type(self.max_turns).__name__}"
            )
        if self.max_turns < 1:
            raise ConfigError(f"AgentOptions.max_turns must be at least 1, not {self.max_turns}")
        if not isinstance(self.stream, bool):
            raise ConfigError(f"AgentOptions.stream must be True or False, not {self.stream!r}")
        folder = self.session_folder
        if folder is not None and not isinstance(folder, (str, os.PathLike)):
            raise ConfigError(
                f"AgentOptions.session_folder must be a path, not "
                f"{type(self.session_folder).__name__}"
            )
        if self.policy is not None and not isinstance(self.policy, Policy):
            raise ConfigError(
                f"AgentOptions.policy must be a Policy, not {type(self.policy).__name__}"
            )
        if self.summarizer is not None and not isinstance(self.summarizer, Provider):
            raise ConfigError(
                f"AgentOptions.summarizer must be a Provider, not {type(self.summarizer).__name__}"
            )
        if self.events is not None and not callable(self.events):
            raise ConfigError(
                f"AgentOptions.events must be callable (an event sink), not "
                f"{type(self.events).__name__}"
            )


class AgentKeywords(TypedDict, total=False):
    """`AgentOptions`' fields as keywords of the entry points (`run_agent(..., prompt=...)`)."""

    tools: Sequence[Callable[..., Any] | Tool]
    prompt: str | Sequence[Mapping[str, Any]] | None
    max_turns: int
    stream: bool
    session_folder: str | Path | None
    policy: Policy | None
    summarizer: Provider | None
    events: EventSink | None


def _agent_options(options: AgentOptions | None, keywords: AgentKeywords) -> AgentOptions:
    """The options of a run: `options` (or the defaults) with the keywords given over them."""
    unknown = sorted(set(keywords) - set(AgentKeywords.__annotations__))
    if unknown:
        raise ConfigError(
            f"unknown agent option(s) {', '.join(unknown)}: the options are "
            f"{', '.join(AgentKeywords.__annotations__)}"
        )
    if options is None:
        return AgentOptions(**keywords)
    if not isinstance(options, AgentOptions):
        raise ConfigError(f"options must be an AgentOptions, not {type(options).__name__}")
    return dataclasses.replace(options, **keywords) if keywords else options


# --------------------------------------------------------------------------- the loop


def _tool_content(value: Any) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        return value or "(no output)"
    if value is None:
        return "(no output)"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace") or "(no output)"
    if (
        isinstance(value, list)
        and value
        and all(
            isinstance(b, Mapping) and b.get("type") in ("text", "image", "document") for b in value
        )
    ):
        return [dict(b) for b in value]
    try:
        from pydantic_core import to_jsonable_python

        value = to_jsonable_python(value, fallback=str)
    except ImportError:  # without pydantic: dataclasses and Enums by hand
        value = _jsonable_value(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _jsonable_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return [_jsonable_value(v) for v in value]
    return value


async def _execute(
    tools: Mapping[str, Tool], use: Mapping[str, Any], inline: bool
) -> tuple[dict[str, Any], ToolExecuted]:
    tool_use_id = str(use.get("id", ""))
    name = str(use.get("name", ""))
    arguments = use.get("input")
    is_error = False
    content: str | list[dict[str, Any]]
    chosen = tools.get(name)
    if chosen is None:
        is_error, content = True, f"Error: there is no tool named {name!r}"
    elif not isinstance(arguments, Mapping):
        is_error, content = True, f"Error: the input of {name} must be a JSON object"
    else:
        try:
            content = _tool_content(await chosen.run(arguments, inline=inline))
        except ToolArgumentError as error:
            is_error, content = True, f"Error: {error}"
        except Exception as error:
            is_error, content = True, f"{type(error).__name__}: {error}"
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        result["is_error"] = True
    given = dict(arguments) if isinstance(arguments, Mapping) else {}
    return result, ToolExecuted(tool_use_id, name, given, content, is_error)


async def _execute_or_recall(
    session: Session, tools: Mapping[str, Tool], use: Mapping[str, Any], inline: bool
) -> tuple[dict[str, Any], ToolExecuted]:
    """Run a tool call; the session's own `recall` is answered by the session."""
    if (
        use.get("name") == RECALL_TOOL_NAME
        and RECALL_TOOL_NAME not in tools
        and session.offers_recall
    ):
        result = session.run_recall(use)
        arguments = use.get("input")
        given = dict(arguments) if isinstance(arguments, Mapping) else {}
        executed = ToolExecuted(
            str(use.get("id", "")),
            RECALL_TOOL_NAME,
            given,
            result["content"],
            bool(result.get("is_error")),
        )
        return result, executed
    return await _execute(tools, use, inline)


def _session_for(
    session: Session | SyncSession | SessionConfig, options: AgentOptions, sink: EventSink
) -> Session:
    if isinstance(session, SessionConfig):
        built: dict[str, Any] = {
            "policy": options.policy,
            "summarizer": options.summarizer,
            "events": sink,
        }
        if options.session_folder is not None:
            folder = Path(options.session_folder).expanduser()
            return Session.open(folder, session, **built)
        return Session(session, **built)
    if (
        options.session_folder is not None
        or options.policy is not None
        or options.summarizer is not None
    ):
        raise ConfigError(
            "session_folder, policy and summarizer apply to a session the loop builds from a "
            "SessionConfig; set them on the Session you pass instead"
        )
    return as_session(session)


def _install_tools(session: Session, tools: Sequence[Tool]) -> None:
    names = {t.name for t in tools}
    kept = [t for t in session.config.tools if t.get("name") not in names]
    merged = [*kept, *(t.definition() for t in tools)]
    if merged != session.config.tools:
        session.reconfigure(dataclasses.replace(session.config, tools=merged))
    register_compactable_tools(session, [t.name for t in tools if t.compactable])


async def _agent_events(
    session: Session | SyncSession | SessionConfig,
    provider: Provider,
    options: AgentOptions,
    *,
    inline: bool,
    result_box: list[AgentResult],
) -> AsyncIterator[Event]:
    pending: list[Event] = []
    events = options.events

    def sink(event: Event) -> None:
        pending.append(event)
        if events is not None:
            events(event)

    active = _session_for(session, options, sink)
    # A session opened here in a folder holds its lock: released when the loop ends.
    owned = isinstance(session, SessionConfig) and options.session_folder is not None
    results: list[dict[str, Any]] = []
    prompt = options.prompt
    hold = None
    try:
        if inline:  # the blocking loop: background_summary refused while it runs the session
            hold = active.drive_blocking(BLOCKING_AGENT_LOOP)
        offered = as_tools(options.tools)
        _install_tools(active, offered)
        by_name = {t.name: t for t in offered}
        if prompt is not None:
            active.add_user(prompt if isinstance(prompt, str) else [dict(b) for b in prompt])
        elif not active.messages or active.messages[-1]["role"] != "user":
            raise ConfigError("nothing for the model to answer: give prompt=...")

        def drain() -> list[Event]:
            out = list(pending)
            pending.clear()
            return out

        def publish(event: Event) -> Event:
            if events is not None:
                events(event)
            return event

        turns = 0
        response: ModelResponse | None = None
        stop_reason = "max_turns"
        while turns < options.max_turns:
            response = await active.call(provider, stream=options.stream)
            turns += 1
            for event in drain():
                yield event
            yield publish(ModelTurn(turns, response))
            uses = response.tool_uses
            if not uses:
                if response.stop_reason == "pause_turn":
                    continue
                stop_reason = response.stop_reason or "end_turn"
                break
            results = []
            for use in uses:
                result, executed = await _execute_or_recall(active, by_name, use, inline)
                results.append(result)
                yield publish(executed)
            active.add_tool_results(results)
            results = []
            for event in drain():
                yield event
        text = response.text if response is not None else ""
        result_box.append(AgentResult(text, stop_reason, turns, response, active))
        yield publish(AgentFinished(text, stop_reason, turns))
    finally:
        if hold is not None:
            active.release_blocking(hold)
        try:
            _answer_abandoned_calls(active, results)
        finally:
            if owned:
                active.close()


def _answer_abandoned_calls(session: Session, results: Sequence[Mapping[str, Any]]) -> None:
    """After the loop was left mid-round (the caller broke out of the iterator, an exception,
    Ctrl-C): the results of the tools that ran are recorded, the other calls are answered as
    interrupted and the interrupt is noted, so the next request is valid."""
    if session.closed:
        return
    pending = session.pending_tool_use_ids()
    if not pending:
        return
    done = {str(r.get("tool_use_id")) for r in results}
    if done:
        answered = [dict(r) for r in results if str(r.get("tool_use_id")) in pending]
        answered += [interrupted_result(i) for i in pending if i not in done]
        session.add_tool_results(answered)
    session.interrupt(for_tool_use=True)


def aiter_agent(
    session: Session | SyncSession | SessionConfig,
    provider: Provider,
    options: AgentOptions | None = None,
    **keywords: Unpack[AgentKeywords],
) -> AsyncIterator[Event]:
    """Run the loop, yielding each event as it happens (`async for event in aiter_agent(...)`).

    `session` is a Session (continued) or a SessionConfig (a new session, kept in
    `session_folder` when given, else in memory). The run's options are `options` (an
    `AgentOptions`) with any keyword given over it (`prompt=...`, `tools=...`, ...): see
    `AgentOptions` for each. Without a prompt the session must already end with a user message
    (a prompt or tool results). `events` receives every event yielded; the pipeline's events
    are among them only for a session built here (a Session you pass sends them to its own
    sink).

    Leaving the loop early (breaking out of the iterator, an exception, Ctrl-C) while tool
    calls wait for results records the results of the tools that ran, answers the others as
    interrupted and notes the interrupt, so the next run sends a valid request. A session
    the loop opened in `session_folder` is closed when the loop ends (its lock released;
    `result.session` can still be read; run again with the same folder to go on); a Session
    you pass is never closed.
    """
    chosen = _agent_options(options, keywords)
    return _agent_events(session, provider, chosen, inline=False, result_box=[])


async def arun_agent(
    session: Session | SyncSession | SessionConfig,
    provider: Provider,
    options: AgentOptions | None = None,
    **keywords: Unpack[AgentKeywords],
) -> AgentResult:
    """Run the loop to the end and return the result (see `aiter_agent`)."""
    chosen = _agent_options(options, keywords)
    box: list[AgentResult] = []
    collected: list[Event] = []
    async for event in _agent_events(session, provider, chosen, inline=False, result_box=box):
        collected.append(event)
    return dataclasses.replace(box[0], events=tuple(collected))


async def _next_event(agen: AsyncIterator[Event]) -> Event:
    return await agen.__anext__()


def _blocking_events(agen: AsyncIterator[Event]) -> Iterator[Event]:
    """The events of the async loop for blocking code: every step on one runner's loop, on a
    worker thread when a loop already runs in this thread (see `unbounded.blocking`)."""
    runner = BlockingRunner()
    try:
        while True:
            try:
                event = runner.run(_next_event(agen))
            except StopAsyncIteration:
                return
            yield event
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            runner.run(closer())
        runner.close()


BLOCKING_AGENT_LOOP = BlockingDriver(
    "the blocking agent loop (run_agent, iter_agent)", "use arun_agent or aiter_agent"
)
"""The blocking loop's name and advice when it refuses `Policy.background_summary`."""


def _refuse_blocking_background_summary(
    session: Session | SyncSession | SessionConfig, options: AgentOptions
) -> None:
    """The blocking loop refuses `Policy.background_summary` (of the session given, else of
    the policy it builds one with) before it starts: its event loop runs only inside each
    step."""
    if isinstance(session, SessionConfig):
        policy = options.policy or Policy.from_env()
    else:
        policy = as_session(session).policy
    BLOCKING_AGENT_LOOP.refuse_background_summary(policy)


def iter_agent(
    session: Session | SyncSession | SessionConfig,
    provider: Provider,
    options: AgentOptions | None = None,
    **keywords: Unpack[AgentKeywords],
) -> Iterator[Event]:
    """`aiter_agent` for blocking code: `for event in iter_agent(...)`; sync tools run on the
    caller's thread. `Policy.background_summary` is refused (`aiter_agent` runs it)."""
    chosen = _agent_options(options, keywords)
    _refuse_blocking_background_summary(session, chosen)
    return _blocking_events(_agent_events(session, provider, chosen, inline=True, result_box=[]))


def run_agent(
    session: Session | SyncSession | SessionConfig,
    provider: Provider,
    options: AgentOptions | None = None,
    **keywords: Unpack[AgentKeywords],
) -> AgentResult:
    """`arun_agent` for blocking code; sync tools run on the caller's thread.
    `Policy.background_summary` is refused (`arun_agent` runs it)."""
    chosen = _agent_options(options, keywords)
    _refuse_blocking_background_summary(session, chosen)
    box: list[AgentResult] = []
    events = _agent_events(session, provider, chosen, inline=True, result_box=box)
    collected = list(_blocking_events(events))
    return dataclasses.replace(box[0], events=tuple(collected))


__all__ = [
    "AgentKeywords",
    "AgentOptions",
    "AgentResult",
    "Tool",
    "aiter_agent",
    "arun_agent",
    "as_tools",
    "iter_agent",
    "run_agent",
    "tool",
]
