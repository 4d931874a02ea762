"""pydantic-ai: unbounded's context management as a capability, or a history processor.

    from pydantic_ai import Agent
    from unbounded.integrations.pydantic_ai import UnboundedCapability

    agent = Agent("anthropic:claude-sonnet-4-6", tools=[...],
                  capabilities=[UnboundedCapability(session_folder=".sessions/agent")])

Before every model request the agent's messages go through one unbounded `Session`:

1. **What is new** is appended to the session: the agent's history grows by whole messages,
   and the ones already read are recognised as the same objects (a run continued with
   `message_history=result.all_messages()` included), so a request costs what it added.
   pydantic-ai's messages are converted to unbounded's (`_pydantic_ai_messages`): tool call
   ids, arguments, thinking and its signature, retries (as error results) and the usage
   each response reported, which anchors the token count.
2. **The request** is `Session.prepare()`'s: old tool results cleared (microcompaction),
   the conversation summarized when it reaches the threshold, by the agent's own model by
   default (`summarizer="extractive"` writes it offline, any unbounded `Provider` works). The
   prepared messages go back as pydantic-ai messages: an unchanged message is the agent's own
   object, only what the pipeline rewrote is built anew.
3. **Recall.** The capability adds a `recall` tool, offered once something was cleared or
   summarized (`Policy.recall_enabled`), answered from the session's transcript.
4. **Cache markers** where the model is Anthropic's: on the tools, the instructions and the
   last message (pydantic-ai's `anthropic_cache_*` settings), unless `cache_breakpoints=False`.

With the capability the agent's history (`result.all_messages()`) stays whole: only the
request is managed. `UnboundedHistory.processor` is the same pipeline as a history
processor: `Agent(history_processors=[history.processor])` on a pydantic-ai before
capabilities, `Agent(capabilities=[ProcessHistory(history.processor)])` on one that no longer
takes `history_processors=` (2.68); there the managed list also replaces the agent's history,
as every history processor's output does.

Importing this module needs pydantic-ai (`pip install 'unbounded[pydantic-ai]'`).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from unbounded.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    ServerError,
)

try:
    from pydantic_ai import messages as pai
    from pydantic_ai.exceptions import ModelHTTPError, ModelRetry
    from pydantic_ai.models import Model, ModelRequestParameters
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import RunContext, Tool, ToolDefinition
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as missing:  # pragma: no cover - exercised only without pydantic-ai
    raise ConfigError(
        f"the pydantic-ai integration needs pydantic-ai ({missing}): "
        "pip install 'unbounded[pydantic-ai]'"
    ) from None

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import ModelRequestContext

    HAS_CAPABILITIES = True
    """Whether this pydantic-ai has capabilities (else use `UnboundedHistory.processor`)."""
except ImportError:  # pragma: no cover - pydantic-ai before capabilities
    HAS_CAPABILITIES = False

from unbounded.configuration import check_token_count
from unbounded.events import EventSink
from unbounded.integrations._pydantic_ai_messages import (
    MessageMap,
    anthropic_usage,
    request_blocks,
    response_blocks,
    system_prompt,
)
from unbounded.integrations._support import answer_recall, append_message, as_session
from unbounded.integrations._wrapped_client import refuse_unknown_options
from unbounded.model.content import ContentBlock, MessageParam, Role
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Heartbeat, ModelResponse, Provider
from unbounded.policy import Policy
from unbounded.providers.anthropic import with_tools_declared
from unbounded.recall.schema import RECALL_DESCRIPTION, RECALL_INPUT_SCHEMA, RECALL_TOOL_NAME
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession
from unbounded.wire.base import is_prompt_too_long_message, parse_prompt_too_long

logger = logging.getLogger(__name__)

SummarizerChoice = Literal["model", "extractive"]

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_call": "tool_use"}


def _provider_error(error: ModelHTTPError) -> ProviderError:
    """The project's error for a pydantic-ai HTTP error (what compaction's retries read)."""
    message = f"{error.message}: {error.body}" if error.body else error.message
    status = error.status_code
    if is_prompt_too_long_message(message):
        sizes = parse_prompt_too_long(message)
        actual, limit = sizes if sizes else (None, None)
        return PromptTooLongError(
            message, actual_tokens=actual, limit_tokens=limit, body=error.body
        )
    wait = getattr(error, "retry_after", None)  # the server's retry-after, where it is read
    if status == 429:
        return RateLimitedError(message, retry_after=wait, status=status, body=error.body)
    if status in (503, 529):
        return OverloadedError(message, retry_after=wait, status=status, body=error.body)
    if status >= 500:
        return ServerError(message, retry_after=wait, status=status, body=error.body)
    if status in (401, 403):
        return AuthenticationError(message, status=status, body=error.body)
    return BadRequestError(message, status=status, body=error.body)


class PydanticAIModelProvider:
    """A pydantic-ai `Model` as an unbounded `Provider`: what writes the summaries (and
    session notes) with the agent's own model."""

    supports_cache_edits = False

    def __init__(self, model: Model) -> None:
        self.model = model
        self.name = f"pydantic-ai:{model.system}"
        self.turn_tools: tuple[ToolDefinition, ...] = ()
        """The tools the agent's last request declared (its function tools, then its output
        tools), as pydantic-ai defined them: a request naming the same tools declares these,
        in their order, so it sends the turns' tools prefix."""

    @property
    def profile(self) -> ProviderProfile:
        """A plain model's replies."""
        return MODEL_PROFILE

    def _tool_definitions(self, declared: Sequence[Any]) -> list[ToolDefinition]:
        """The request's tools as pydantic-ai's: the turns' own definitions when it names the
        same tools (the summary's cache-sharing request), else built from its schemas."""
        names = {str(tool.get("name")) for tool in declared if "name" in tool}
        if names and names == {tool.name for tool in self.turn_tools}:
            return list(self.turn_tools)
        return [
            ToolDefinition(
                name=str(tool["name"]),
                description=str(tool.get("description") or ""),
                parameters_json_schema=dict(tool.get("input_schema") or {"type": "object"}),
            )
            for tool in declared
            if "name" in tool and "input_schema" in tool
        ]

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Send `request` through the pydantic-ai model and read its reply back. A request
        whose messages hold tool blocks declares tools (the Messages API refuses them
        otherwise: a history processor's summary request has none of the agent's), none of
        them to be called (`tool_choice` none) unless the request chose otherwise."""
        request = with_tools_declared(request)
        messages = MessageMap().to_pydantic(request.get("messages", []))
        system = request.get("system")
        system_text = (
            system
            if isinstance(system, str)
            else "\n\n".join(str(block.get("text", "")) for block in system or [])
        )
        if system_text:
            messages.insert(0, pai.ModelRequest(parts=[pai.SystemPromptPart(content=system_text)]))
        tools = self._tool_definitions(request.get("tools", []))
        settings = ModelSettings()
        if "max_tokens" in request:
            settings["max_tokens"] = request["max_tokens"]
        if tools and (request.get("tool_choice") or {}).get("type") == "none":
            settings["tool_choice"] = "none"
        marked = [t["cache_control"] for t in request.get("tools", []) if t.get("cache_control")]
        if marked and self.model.system == "anthropic":
            # The tools marked as the turns mark them (the capability's cache settings).
            ttl = marked[-1].get("ttl")
            cast(dict[str, Any], settings)["anthropic_cache_tool_definitions"] = (
                ttl if ttl in ("5m", "1h") else True
            )
        try:
            reply = await self.model.request(
                messages, settings, ModelRequestParameters(function_tools=tools)
            )
        except ModelHTTPError as error:
            raise _provider_error(error) from error
        return ModelResponse(
            content=cast("list[ContentBlock]", response_blocks(reply)),
            stop_reason=_STOP_REASONS.get(str(reply.finish_reason), reply.finish_reason),
            usage=anthropic_usage(reply.usage),
            model=reply.model_name or self.model.model_name,
            id=reply.provider_response_id or "",
        )


@dataclass(frozen=True, slots=True)
class _Seen:
    """A message of the agent's history already appended, and its content key."""

    message: pai.ModelMessage
    key: str


def _content_key(message: pai.ModelMessage) -> str:
    """A message's content, markers and metadata aside (what 'the same message' means)."""
    if isinstance(message, pai.ModelResponse):
        return json.dumps(["assistant", response_blocks(message)], sort_keys=True)
    return json.dumps(["user", request_blocks(message)], sort_keys=True)


def _read_length(messages: Sequence[pai.ModelMessage], seen: Sequence[_Seen]) -> int | None:
    """How many of `messages` hold the messages `seen` read, in order; None when they do not
    start with them. A message may stand for several requests read in a row: a run's
    history (`result.all_messages()`) merges the previous run's last tool return and the
    new prompt, read as two requests, into one."""
    at = 0
    index = 0
    while index < len(seen):
        if at >= len(messages):
            return None
        given = messages[at]
        if given is seen[index].message or _content_key(given) == seen[index].key:
            at, index = at + 1, index + 1
            continue
        merged = _merged_requests(given, seen, index)
        if merged is None:
            return None
        at, index = at + 1, merged
    return at


def _merged_requests(given: pai.ModelMessage, seen: Sequence[_Seen], start: int) -> int | None:
    """Where the requests read from `start` on that `given` merges (two or more in a row
    whose parts are its parts) end; None when it merges none."""
    if not isinstance(given, pai.ModelRequest):
        return None
    wanted = request_blocks(given)
    parts: list[Any] = []
    end = start
    while end < len(seen) and len(parts) < len(wanted):
        message = seen[end].message
        if not isinstance(message, pai.ModelRequest):
            return None
        parts += request_blocks(message)
        end += 1
    return end if end - start >= 2 and parts == wanted else None


def _check_options(
    session_options: dict[str, Any], policy: object, cache_breakpoints: object
) -> None:
    """Refuse at construction what the first model request would: a keyword neither this
    class nor `Session` takes (`TypeError`, as a wrong keyword is), a `policy` that is no
    `Policy` and a `cache_breakpoints` that is no bool (`ConfigError`)."""
    own = [
        name
        for name in inspect.signature(UnboundedHistory.__init__).parameters
        if name not in ("self", "session", "session_options")
    ]
    refuse_unknown_options(session_options, own)
    if policy is not None and not isinstance(policy, Policy):
        raise ConfigError(
            f"policy must be a Policy (Policy(...)) or a policy file's path, not "
            f"{type(policy).__name__} {policy!r}"
        )
    if not isinstance(cache_breakpoints, bool):
        raise ConfigError(f"cache_breakpoints must be True or False, not {cache_breakpoints!r}")


class UnboundedHistory:
    """A pydantic-ai agent's conversation kept inside the window by one unbounded `Session`.

    The session is one you give, one kept in `session_folder` (created, or resumed), or one
    in memory; it opens at the first request, which names the model. A resumed session holds
    the history: continue it with the new prompt only (a run without `message_history`).
    """

    def __init__(
        self,
        session: Session | SyncSession | None = None,
        *,
        session_folder: str | Path | None = None,
        context_window: int | None = None,
        policy: Policy | str | Path | None = None,
        summarizer: Provider | SummarizerChoice = "model",
        events: EventSink | None = None,
        cache_breakpoints: bool = True,
        **session_options: Any,
    ) -> None:
        if isinstance(summarizer, str) and summarizer not in ("model", "extractive"):
            raise ConfigError(
                f"summarizer must be 'model', 'extractive' or a Provider, not {summarizer!r}"
            )
        if not isinstance(summarizer, str) and not isinstance(summarizer, Provider):
            raise ConfigError(
                "summarizer must be 'model', 'extractive' or a Provider (name, "
                f"supports_cache_edits, profile and create()), not {type(summarizer).__name__}"
            )
        if session is not None and session_folder is not None:
            raise ConfigError("give a session or a session_folder, not both")
        if isinstance(policy, (str, Path)):  # a policy file, read now as Session reads one
            policy = Policy.from_file(policy)
        _check_options(session_options, policy, cache_breakpoints)
        check_token_count("context_window", context_window)
        if context_window is not None and context_window <= 0:
            raise ConfigError(f"context_window must be positive, not {context_window}")
        self._session: Session | None = as_session(session) if session is not None else None
        self._folder = Path(session_folder).expanduser() if session_folder is not None else None
        self._context_window = context_window
        self._policy = policy
        self._summarizer = summarizer
        self._events = events
        self._options = session_options
        self.cache_breakpoints = cache_breakpoints
        """Whether requests to an Anthropic model carry cache markers."""
        self._seen: list[_Seen] = []
        self._recorded_early: list[_Seen] = []
        """Replies recorded as they arrived, not yet seen in the agent's history."""
        self._map = MessageMap()
        self._summarizer_model: Model | None = None
        self._summarizer_provider: PydanticAIModelProvider | None = None

    @property
    def session(self) -> Session:
        """The session (opened at the first request unless one was given)."""
        if self._session is None:
            raise ConfigError(
                "the session opens at the agent's first model request, which names the model"
            )
        return self._session

    def _open(self, config: SessionConfig) -> Session:
        options: dict[str, Any] = {"policy": self._policy, "events": self._events, **self._options}
        if self._folder is not None:
            return Session.open(self._folder, config, **options)
        return Session(config, **options)

    def _configure(self, model: Model, tools: Sequence[ToolDefinition], system: str) -> Session:
        """The session for this model, system prompt and tools (opened, or its config
        updated), with its summarizer."""
        offered = [
            {
                "name": tool.name,
                "description": tool.description or "",
                "input_schema": tool.parameters_json_schema,
            }
            for tool in tools
            if tool.name != RECALL_TOOL_NAME  # the session offers its own
        ]
        fields: dict[str, Any] = {
            "model": model.model_name,
            "system": system or None,
            "tools": offered,
        }
        if self._session is None:
            self._session = self._open(SessionConfig(**fields, context_window=self._context_window))
        session = self._session
        wanted = dataclasses.replace(session.config, **fields)
        if wanted != session.config:
            session.reconfigure(wanted)
        summarizer = self._summarizer_for(session, model)
        if summarizer is not None:
            session.reconfigure(summarizer=summarizer)
        return session

    def _summarizer_for(self, session: Session, model: Model) -> Provider | None:
        """The summarizer the session should get now (None: it has the right one)."""
        if self._summarizer == "extractive":
            if session.summarizer is not None:
                return None
            from unbounded.providers.extractive import ExtractiveSummarizer

            return ExtractiveSummarizer()
        if self._summarizer == "model":
            if self._summarizer_model is model:
                return None
            self._summarizer_model = model
            self._summarizer_provider = PydanticAIModelProvider(model)
            return self._summarizer_provider
        return None if session.summarizer is self._summarizer else self._summarizer

    def _new_messages(
        self, session: Session, messages: Sequence[pai.ModelMessage]
    ) -> Sequence[pai.ModelMessage]:
        """The messages past those already appended (the same objects, or equal ones)."""
        seen = self._seen
        read = _read_length(messages, seen)
        if read is None:
            if not any(isinstance(m, pai.ModelResponse) for m in messages):
                return messages  # a run with the new prompt only: it continues the session
            raise ConfigError(
                "the agent's message history no longer starts with the messages this session "
                "read (an edited or shortened history): the transcript is append-only; start "
                "a new UnboundedCapability (or session) for another conversation"
            )
        new = messages[read:]
        if not seen and session.entries and any(isinstance(m, pai.ModelResponse) for m in new):
            raise ConfigError(
                "this session already holds a conversation (resumed from its folder): run the "
                "agent with the new prompt only (no message_history), the session has the rest"
            )
        return new

    def _append(self, session: Session, message: pai.ModelMessage) -> None:
        """Append one pydantic-ai message to the session."""
        reply: dict[str, Any] | None = None
        if isinstance(message, pai.ModelResponse):
            role: Role = "assistant"
            blocks = response_blocks(message)
            reply = {
                "usage": dict(anthropic_usage(message.usage)),
                "model": message.model_name,
                "id": message.provider_response_id,
                "stop_reason": _STOP_REASONS.get(str(message.finish_reason)),
            }
        else:
            role, blocks = "user", request_blocks(message)
        if blocks:
            append_message(session, role, blocks, reply)
            self._map.remember(role, blocks, message)

    async def process(
        self,
        messages: Sequence[pai.ModelMessage],
        *,
        model: Model,
        tools: Sequence[ToolDefinition] = (),
        replaces_history: bool = False,
    ) -> list[pai.ModelMessage]:
        """The messages to send for the agent's `messages`: the new ones appended to the
        session, the prepared request converted back. `replaces_history`: the result becomes
        the agent's history (a history processor), so the next call continues from it."""
        session = self._configure(model, tools, system_prompt(messages))
        early, self._recorded_early = self._recorded_early, []
        for message in self._new_messages(session, messages):
            if early and (message is early[0].message or _content_key(message) == early[0].key):
                early.pop(0)  # recorded when it arrived
                continue
            self._append(session, message)
        request = await session.prepare()
        prepared = self._to_pydantic(request.get("messages", []), messages)
        kept = prepared if replaces_history else list(messages)
        self._seen = self._seen_list(kept)
        return prepared

    def _seen_list(self, kept: Sequence[pai.ModelMessage]) -> list[_Seen]:
        """`kept` as the messages read, the keys of those already read reused (a message is
        converted to its key once)."""
        known = {id(seen.message): seen for seen in self._seen}
        out: list[_Seen] = []
        for message in kept:
            seen = known.get(id(message))
            if seen is None or seen.message is not message:
                seen = _Seen(message, _content_key(message))
            out.append(seen)
        return out

    def note_sent_tools(self, tools: Sequence[ToolDefinition]) -> None:
        """The tools the request just sent declared (`_declared_tools`): the summary
        requests the agent's model writes repeat them when they name the same tools, so
        they read that request's cache."""
        if self._summarizer_provider is not None:
            self._summarizer_provider.turn_tools = tuple(tools)

    def record_reply(self, response: pai.ModelResponse) -> None:
        """Record a reply when it arrives (a run's last reply is then in the session folder
        before the run ends); it is not appended again when the history shows it."""
        if self._session is None:
            return
        self._append(self._session, response)
        self._recorded_early.append(_Seen(response, _content_key(response)))

    def _to_pydantic(
        self, sent: Sequence[MessageParam], history: Sequence[pai.ModelMessage]
    ) -> list[pai.ModelMessage]:
        """The prepared messages as pydantic-ai's, the system prompt parts first."""
        out = self._map.to_pydantic(sent)
        system_parts = [
            part
            for message in history
            if isinstance(message, pai.ModelRequest)
            for part in message.parts
            if isinstance(part, pai.SystemPromptPart)
        ]
        if not system_parts or not out:
            return out
        first = out[0]
        if isinstance(first, pai.ModelRequest) and any(
            isinstance(part, pai.SystemPromptPart) for part in first.parts
        ):
            return out
        if isinstance(first, pai.ModelRequest):
            out[0] = dataclasses.replace(first, parts=[*system_parts, *first.parts])
        else:
            out.insert(0, pai.ModelRequest(parts=system_parts))
        return out

    def recall_tool(self) -> Tool[Any]:
        """The `recall` tool, answered from the session's transcript (an argument error goes
        back to the model as a retry, which pydantic-ai sends as an error result)."""

        def recall(ctx: RunContext[Any], **arguments: Any) -> str:
            answer = answer_recall(self.session, ctx.tool_call_id or "", arguments)
            if answer.is_error:
                raise ModelRetry(answer.text)
            return answer.text

        tool: Tool[Any] = Tool.from_schema(
            recall,
            name=RECALL_TOOL_NAME,
            description=RECALL_DESCRIPTION,
            json_schema=RECALL_INPUT_SCHEMA,
            takes_ctx=True,
        )
        return tool

    def offers_recall(self) -> bool:
        """Whether the next request offers `recall` (the session's rule)."""
        return self._session is not None and self._session.offers_recall

    def cache_settings(self, model: Model) -> ModelSettings:
        """The cache markers for a request to `model` (none unless Anthropic's)."""
        if not self.cache_breakpoints or model.system != "anthropic":
            return ModelSettings()
        marked: dict[str, Any] = {
            "anthropic_cache_tool_definitions": True,
            "anthropic_cache_instructions": True,
            "anthropic_cache_messages": True,
        }
        return cast(ModelSettings, marked)

    async def processor(
        self, ctx: RunContext[Any], messages: list[pai.ModelMessage]
    ) -> list[pai.ModelMessage]:
        """A pydantic-ai history processor: `Agent(capabilities=[ProcessHistory(history.
        processor)])`, or `history_processors=[...]` where the Agent still takes it (without
        the recall tool; add `history.recall_tool()` to the agent's tools)."""
        return await self.process(messages, model=cast(Model, ctx.model), replaces_history=True)

    def close(self) -> None:
        """Release the session folder's lock."""
        if self._session is not None:
            self._session.close()


def _declared_tools(parameters: ModelRequestParameters) -> list[ToolDefinition]:
    """The tools a request declares, as its summary requests should repeat them: the function
    tools, then the output tools (a structured output's `final_result`: the history calls
    it), then the tools that joined mid-run (pydantic-ai declares them last, deferred)."""
    joined = set(getattr(parameters, "introduced_tool_names", ()) or ())
    functions = list(parameters.function_tools)
    return [
        *(tool for tool in functions if tool.name not in joined),
        *parameters.output_tools,
        *(
            dataclasses.replace(tool, defer_loading=True)
            for tool in functions
            if tool.name in joined
        ),
    ]


if HAS_CAPABILITIES:

    class UnboundedCapability(AbstractCapability[Any]):
        """unbounded's context management for a pydantic-ai agent:
        `Agent(..., capabilities=[UnboundedCapability(...)])` (arguments: `UnboundedHistory`'s).

        The agent's history stays whole; each request is the session's managed one."""

        def __init__(self, session: Session | SyncSession | None = None, **options: Any) -> None:
            self.history = UnboundedHistory(session, **options)
            """The pipeline and its session."""

        @property
        def session(self) -> Session:
            """The session (opened at the first request unless one was given)."""
            return self.history.session

        def get_toolset(self) -> FunctionToolset[Any]:
            """The `recall` tool."""
            return FunctionToolset([self.history.recall_tool()], max_retries=3)

        async def prepare_tools(
            self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
        ) -> list[ToolDefinition]:
            """`recall` only while the session offers it (something was cleared or summarized)."""
            if self.history.offers_recall():
                return tool_defs
            return [tool for tool in tool_defs if tool.name != RECALL_TOOL_NAME]

        async def before_model_request(
            self, ctx: RunContext[Any], request_context: ModelRequestContext
        ) -> ModelRequestContext:
            """Send the session's managed request instead of the whole history."""
            parameters = request_context.model_request_parameters
            request_context.messages = await self.history.process(
                request_context.messages,
                model=request_context.model,
                # The output tools too (a structured output's final_result): the history
                # calls them, so the session's requests declare them.
                tools=[*parameters.function_tools, *parameters.output_tools],
            )
            marks = self.history.cache_settings(request_context.model)
            if marks:  # the caller's own settings win
                request_context.model_settings = ModelSettings(
                    **{**marks, **(request_context.model_settings or {})}
                )
            return request_context

        async def after_model_request(
            self,
            ctx: RunContext[Any],
            *,
            request_context: ModelRequestContext,
            response: pai.ModelResponse,
        ) -> pai.ModelResponse:
            """Record the reply at once (its usage anchors the count)."""
            self.history.record_reply(response)
            # Resolved by the model's request: which tools joined mid-run (sent deferred).
            self.history.note_sent_tools(_declared_tools(request_context.model_request_parameters))
            return response


__all__ = [
    "HAS_CAPABILITIES",
    "PydanticAIModelProvider",
    "UnboundedCapability",
    "UnboundedHistory",
]
