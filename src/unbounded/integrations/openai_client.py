"""A drop-in around the official OpenAI client, for Chat Completions and the Responses API.

    client = wrap(openai.OpenAI(), session_folder="~/.myagent/session-1")
    reply = client.chat.completions.create(model=..., messages=messages, tools=...)
    # or: client.responses.create(model=..., input=items, tools=...)

It is the Anthropic drop-in (`unbounded.integrations.anthropic_client`, whose module docstring
says what every call does) with OpenAI's shapes at the edges: the caller's `messages` or
`input` items are read into the session's messages by the API's wire format
(`unbounded.wire.openai_chat`, `unbounded.wire.openai_responses`), the prepared request goes
out through the caller's own client in that API's shape, and the reply, the SDK's own object,
is returned unchanged (or its stream passed through chunk by chunk and recorded once whole;
the SDK's `stream(...)` helpers likewise).
What is new, side calls and regenerates, compaction with the client's own model as the
summarizer, recall rounds answered inside the call, and one reactive compaction on
`context_length_exceeded` are the Anthropic drop-in's, shared code.

OpenAI's own parts:

- **One API per conversation**: the first call (`chat.completions.create` or
  `responses.create`) fixes it, or `wrap(..., api=...)`; a call on the other API is refused.
- **Prompt caching**: every request carries a `prompt_cache_key` stable for the session
  (the caller's own when a turn gives one), so OpenAI routes its turns to the same cache;
  the cached tokens are read from the usage (`cached_tokens`) as cache reads. A side call's
  key is its own: it goes with it (a managed one without a key sends none) and never
  becomes the session's.
- **The system prompt** of a call, which the side-call rule compares with the
  conversation's, is the `system` and `developer` messages before the conversation (Chat
  Completions), and on the Responses API `instructions` followed by those items: a call
  with the time in its `instructions` is a side call the next call adopts, as on Anthropic.
- **Reasoning models**: the caller's `max_completion_tokens` (or `max_tokens`) is kept under
  the name the caller used, and the session's own requests (summaries) use
  `max_completion_tokens` for the o-series and gpt-5 models; `temperature` is only ever the
  caller's. Responses reasoning items (encrypted or not), compaction items and every item
  the library does not read stay in the conversation as they came and are sent back unchanged.
- **Chat Completions streams** ask for the usage chunk, for the record, and hide it from a
  caller who did not ask for it; the reply is recorded at its finish chunk
  (`_openai_streams.ChatPassage`). `n` above 1 is refused on a turn (the session records
  one reply); a side call passes it to the SDK as given.
- **System messages inside the conversation** (reminders) stay in place, sent back as they
  came (one over `Policy.tool_result_max_tokens` cut to head and tail, as a user message's
  text is); only those before it make the system prompt.
- **The Responses API's server-side state** (`previous_response_id`, `conversation`) is
  refused: the wrapper sends the whole conversation itself.
- **OpenAI-compatible servers** (vLLM, Ollama, OpenRouter…): a model the model table does
  not know needs `context_window=` (else a `ConfigError`), and takes its prices from
  `prices=` (else it is priced at zero, with a logged warning).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

from unbounded.catalog import ASSUMED_MODELS, ModelInfo, ModelTable, load_model_table
from unbounded.engine import (
    drive_turn,
    drive_turn_blocking,
    open_turn,
    open_turn_blocking,
    turn_flow,
)
from unbounded.errors import ConfigError
from unbounded.events import EventSink, ToolOutputCapped, emit
from unbounded.integrations._anthropic_prints import HistoryMode
from unbounded.integrations._drop_in import WireProvider
from unbounded.integrations._openai_streams import (
    AsyncHelperStream,
    AsyncOpenAIRecordingStream,
    ChatPassage,
    HelperStream,
    OpenAIRecordingStream,
)
from unbounded.integrations._wrapped_client import (
    BLOCKING_DROP_IN,
    AsyncWrappedClient,
    SyncWrappedClient,
    bound_session,
    check_wrap_keywords,
    refuse_blocking_background_summary,
    session_option,
)
from unbounded.integrations.anthropic_client import (
    ClientPipeline,
    SummarizerChoice,
    _given,
)
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse, Provider
from unbounded.policy import Policy
from unbounded.providers.openai import OpenAIApi, OpenAIProvider, fit_body_fields
from unbounded.session import Session, SessionConfig
from unbounded.session_input import capped_blocks
from unbounded.sync_session import SyncSession
from unbounded.wire.base import StreamAssembler
from unbounded.wire.openai_chat import OpenAIChat
from unbounded.wire.openai_items import OPAQUE_ITEM
from unbounded.wire.openai_responses import OpenAIResponses

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

PRICE_FIELDS = ("input_per_mtok", "output_per_mtok", "cache_read_multiplier")
"""The keys `prices=` takes: dollars per million input and output tokens, and the share of
the input price a cached token costs."""

REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "openai/o", "openai/gpt-5")
"""Model names whose Chat Completions refuse `max_tokens` (they take `max_completion_tokens`)."""

_CONVERSATION_KEY = {"chat": "messages", "responses": "input"}
_TOKEN_PARAMS: dict[str, tuple[str, ...]] = {
    "chat": ("max_completion_tokens", "max_tokens"),
    "responses": ("max_output_tokens",),
}
_SERVER_STATE = ("previous_response_id", "conversation")


def is_reasoning_model(model: str) -> bool:
    """Whether a model name is one of OpenAI's reasoning models (o-series, gpt-5)."""
    return model.strip().lower().startswith(REASONING_PREFIXES)


def model_from_arguments(
    model: str,
    context_window: int | None,
    prices: Mapping[str, float] | None,
    known: ModelInfo | None,
) -> ModelInfo | None:
    """The model's figures for a model the table may not know: the table's, with `prices`
    applied; for an unknown model, `context_window` and `prices` on the caching rules of
    OpenAI's current model (a `ConfigError` without a window, a logged warning without
    prices). None when the table's figures stand unchanged."""
    if known is not None:
        return _priced(known, prices) if prices else None
    if context_window is None:
        raise ConfigError(
            f"model {model!r} is not in the model table, so its context window is unknown: "
            f"pass wrap(client, context_window=...) (and prices={{...}} for costs), or add it "
            "to a models file (UNBOUNDED_MODELS_FILE)"
        )
    if not prices:
        logger.warning(
            "model %r is not in the model table: its window is %s tokens (context_window=) "
            "and its costs are counted as 0 (pass prices= to price it)",
            model,
            f"{context_window:,}",
        )
    else:
        logger.info("model %r is not in the model table: window and prices from wrap()", model)
    assumed = load_model_table().get(ASSUMED_MODELS["openai"])
    unknown = replace(
        assumed,
        name=model,
        provider="other",
        context_window=context_window,
        max_output=min(assumed.max_output, max(1, context_window // 2)),
        input_per_mtok=0.0,
        output_per_mtok=0.0,
        aliases=(),
        source="wrap() arguments",
    )
    return _priced(unknown, prices or {})


def _priced(info: ModelInfo, prices: Mapping[str, float]) -> ModelInfo:
    """`info` with the prices given (`PRICE_FIELDS`), the others unchanged."""
    return replace(
        info,
        input_per_mtok=float(prices.get("input_per_mtok", info.input_per_mtok)),
        output_per_mtok=float(prices.get("output_per_mtok", info.output_per_mtok)),
        cache_read_multiplier=float(
            prices.get("cache_read_multiplier", info.cache_read_multiplier)
        ),
    )


def _asks_usage(passthrough: Mapping[str, Any]) -> bool:
    """Whether the caller's `stream_options` say whether to send the usage chunk."""
    given = passthrough.get("stream_options")
    return isinstance(given, Mapping) and "include_usage" in given


def _check_prices(prices: Mapping[str, float] | None) -> None:
    for key, value in (prices or {}).items():
        if key not in PRICE_FIELDS:
            raise ConfigError(
                f"prices: unknown key {key!r}; the keys are {', '.join(PRICE_FIELDS)}"
            )
        if not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"prices[{key!r}] must be a number >= 0, not {value!r}")


def _anthropic_tool(tool: Any, api: OpenAIApi) -> dict[str, Any]:
    """A caller's OpenAI tool as the session keeps it: a function as an Anthropic tool (its
    `strict` kept), any other tool as it is (sent back unchanged)."""
    data = tool if isinstance(tool, Mapping) else tool.to_dict(mode="json")
    if data.get("type") != "function":
        return dict(data)
    function = data.get("function") if api == "chat" else data
    if not isinstance(function, Mapping) or not function.get("name"):
        raise ConfigError(f"a function tool needs a name: {data!r:.120}")
    out: dict[str, Any] = {"name": str(function["name"])}
    if function.get("description"):
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    if function.get("strict") is not None:
        out["strict"] = function["strict"]
    return out


def _openai_tools(request_tools: Sequence[Mapping[str, Any]], api: OpenAIApi) -> list[Any]:
    """The session's tools in the API's shape (`strict` given back where it was set)."""
    out: list[Any] = []
    for tool in request_tools:
        if "input_schema" not in tool:
            out.append(dict(tool))
            continue
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        if "strict" in tool:
            function["strict"] = tool["strict"]
        out.append(
            {"type": "function", "function": function}
            if api == "chat"
            else {"type": "function", **function}
        )
    return out


class _PromptCacheKey:
    """The `prompt_cache_key` of every request of a session: the caller's, else one made from
    the session's first record, the same for resumed ones. Kept apart from the pipeline: the
    session holds the provider that asks for it, and must not keep the pipeline alive (a
    collected blocking drop-in stops driving the session)."""

    def __init__(self) -> None:
        self.value: str | None = None
        self.session: Session | None = None

    def __call__(self) -> str:
        """The key, made at the first request when the caller gave none."""
        if self.value is None:
            if self.session is None:
                raise ConfigError("the prompt_cache_key is made from the session: open it first")
            entries = self.session.entries
            seed = (
                entries[0].uuid if entries and entries[0].uuid else ""
            ) or self.session.config.model
            self.value = "unbounded-" + hashlib.sha256(seed.encode()).hexdigest()[:24]
        return self.value


def _capped_instruction(
    block: dict[str, Any], session: Session
) -> tuple[dict[str, Any], list[ToolOutputCapped]]:
    """A block carrying a `system` or `developer` message kept inside the conversation with
    each text over `Policy.tool_result_max_tokens` cut to head and tail, the whole text saved
    (as the session cuts a user message's text); other blocks unchanged."""
    item = block.get("item")
    if block.get("type") != OPAQUE_ITEM or not isinstance(item, Mapping):
        return block, []
    if item.get("role") not in ("system", "developer"):
        return block, []
    content = item.get("content")
    parts: list[Any] = [content] if isinstance(content, str) else (
        list(content) if isinstance(content, list) else []
    )
    texts: list[dict[str, Any]] = []
    for part in parts:
        text = part if isinstance(part, str) else (
            part.get("text") if isinstance(part, Mapping) else None
        )
        if not isinstance(text, str):
            return block, []  # a part the cut does not read (an image...): kept whole
        texts.append({"type": "text", "text": text})
    if not texts:
        return block, []
    redactor = session.deps.redactor
    capped, events = capped_blocks(
        texts,
        limit=session.policy.tool_result_max_tokens,
        save=session.store.save_tool_output,
        redact=redactor.redact if redactor is not None else None,
        key_prefix=str(item.get("role")),
    )
    if not events:
        return block, []
    cut = [str(text["text"]) for text in capped]
    new_content: Any = (
        cut[0]
        if isinstance(content, str)
        else [{**part, "text": text} for part, text in zip(parts, cut, strict=True)]
    )
    return {**block, "item": {**item, "content": new_content}}, events


class OpenAIPipeline(ClientPipeline):
    """The session side of a wrapped OpenAI client: the Anthropic drop-in's pipeline reading
    and writing one OpenAI API."""

    def __init__(
        self,
        client: Any,
        session: Session | None,
        *,
        api: OpenAIApi | None,
        prices: Mapping[str, float] | None,
        context_window: int | None,
        model: str | None,
        **options: Any,
    ) -> None:
        if api is not None and api not in ("chat", "responses"):
            raise ConfigError(f"api must be 'chat' or 'responses', not {api!r}")
        _check_prices(prices)
        self.api: OpenAIApi | None = api if api is not None or model is None else "chat"
        self._prices = dict(prices) if prices else None
        self._max_param: str | None = None
        """The name the caller gives the output limit (`max_completion_tokens`...)."""
        self._cache_key = _PromptCacheKey()
        self._table: ModelTable | None = None
        """The session's own model table, when the wrapper made it (see `_open`)."""
        super().__init__(client, session, context_window=context_window, model=model, **options)

    # -- what the Anthropic pipeline asks of its subclass

    def _provider_for(self, client: Any) -> WireProvider:
        api: OpenAIApi = self.api or "chat"
        session: Session | None = getattr(self, "_session", None)  # None while __init__ runs
        model = session.config.model if session is not None else ""
        param = self._max_param or (
            "max_completion_tokens" if model and is_reasoning_model(model) else "max_tokens"
        )
        if api == "responses":
            param = "max_tokens"  # the Responses format always says max_output_tokens
        return OpenAIProvider(
            client, api=api, max_tokens_param=param, prompt_cache_key=self._cache_key
        )

    def _open(self, config: SessionConfig) -> Session:
        # The table the caller gave, as a keyword or in `options=`, learns the model.
        table = session_option(self._options, "model_table") or load_model_table()
        info = model_from_arguments(
            config.model, self._context_window, self._prices, table.find(config.model)
        )
        if info is not None or self._context_window is not None:
            # A copy of its own, the session's: a later switch to a model the table does not
            # list learns it there too (`_configure`), never in the caller's or the shared table.
            self._table = (
                table.with_model(info) if info is not None else ModelTable(dict(table.models))
            )
            self._options = {**self._options, "model_table": self._table}
        self.provider = self._provider_for(self.client)
        return super()._open(config)

    def _configure(self, params: dict[str, Any]) -> Session:
        model = params.get("model")
        table = self._table
        if table is not None and isinstance(model, str) and model and table.find(model) is None:
            # With wrap(context_window=), a model the table does not list is taken mid-session
            # as the first call takes it (the session reads its limits from this same table).
            info = model_from_arguments(model, self._context_window, self._prices, None)
            if info is not None:
                table.add(info)
        return super()._configure(params)

    def _response_of(self, message: Any, body: Any = None) -> ModelResponse:
        if isinstance(message, ModelResponse):  # a stream's reply, folded by the wire format
            return message
        if body is not None and self.api == "responses":
            # The raw JSON: reasoning and compaction items keep the server's key order.
            return self.provider.wire.from_response(body)
        return self.provider.wire.from_response(message)

    # -- a call

    def take_api(self, api: OpenAIApi) -> None:
        """Bind the conversation to `api` at its first call; refuse the other API after."""
        if self.api is None:
            self.api = api
            self.provider = self._provider_for(self.client)
            if self._session is not None and self._summarizer == "client":
                # a given session's client summarizer was built on Chat Completions before
                # the API was known: summaries go out on the conversation's API, as its
                # requests do (a session the wrapper opens here is not open yet)
                self._session.reconfigure(summarizer=self._summarizer_provider())
            return
        if self.api != api:
            other = "client.chat.completions.create" if api == "chat" else "client.responses.create"
            raise ConfigError(
                f"this wrapped client's conversation runs on the {self.api} API; {other} is "
                f"another API (pass wrap(..., api={api!r}) for a conversation on it, or call "
                "client.client for an unmanaged call)"
            )

    def begin_openai(self, kwargs: Mapping[str, Any], api: OpenAIApi) -> dict[str, Any] | None:
        """Take a call's keywords (see `ClientPipeline.begin`): the caller's conversation in
        the session's shape, the cache-safe parameters read from the API's names; returns
        the keywords to pass through, or None for a side call."""
        self.take_api(api)
        rest = {key: value for key, value in kwargs.items() if _given(value)}
        for name in _SERVER_STATE:
            if name in rest and api == "responses":
                raise ConfigError(
                    f"responses.create({name}=...) keeps the conversation on OpenAI's servers; "
                    "the wrapper sends the whole conversation itself: pass the items in input= "
                    f"and leave out {name}"
                )
        key = _CONVERSATION_KEY[api]
        if key not in rest:
            raise ConfigError(
                f"{'chat.completions' if api == 'chat' else 'responses'}.create needs {key}="
            )
        given = rest.pop(key)
        if isinstance(given, (bytes, Mapping)) or not isinstance(given, (str, Iterable)):
            raise ConfigError(
                f"{key} is a list of messages, got {type(given).__name__}: "
                f"pass {key}=[{{'role': 'user', 'content': '...'}}]"
            )
        wire = self.provider.wire
        inbound = wire.inbound(given if isinstance(given, str) else list(given))
        system = inbound.system
        if api == "responses" and rest.get("instructions"):
            system = "\n\n".join(t for t in (str(rest.pop("instructions")), system) if t)
        params: dict[str, Any] = {"messages": inbound.messages, "system": system or None}
        if "model" in rest:
            params["model"] = rest.pop("model")
        if "tools" in rest:
            params["tools"] = [_anthropic_tool(t, api) for t in rest.pop("tools")]
        given_params = [name for name in _TOKEN_PARAMS[api] if name in rest]
        if len(given_params) > 1:
            raise ConfigError("give max_completion_tokens or max_tokens, not both")
        if given_params:
            self._max_param = given_params[0]
            params["max_tokens"] = rest.pop(given_params[0])
        own_key = rest.pop("prompt_cache_key", None)
        passthrough = self.begin({**params, **rest}, streaming_helper=False)
        if passthrough is not None and own_key is not None:
            # A turn's key is the session's from now on; a side call's is its own only.
            self._cache_key.value = str(own_key)
        return passthrough

    def _check_turn(self, passthrough: Mapping[str, Any]) -> None:
        """Refuse `n` above 1 on a call recorded as a turn (a side call passes it to the SDK)."""
        choices = passthrough.get("n")
        if self.api == "chat" and choices is not None and choices != 1:
            # The session records one conversation: of n candidates, which one the caller
            # goes on with is unknown until the next call, so none can be recorded now.
            raise ConfigError(
                f"chat.completions.create(n={choices!r}) asks for several candidate replies, "
                "and the wrapper records one conversation: ask once per candidate with n=1, "
                "or call client.client for an unmanaged call"
            )

    def call_kwargs(
        self,
        request: ProviderRequest,
        method: Callable[..., Any],
        passthrough: Mapping[str, Any],
        *,
        helper: bool = False,
    ) -> dict[str, Any]:
        """The SDK keywords: the prepared request in the API's shape, the caller's other
        keywords as given, and the session's `prompt_cache_key`; the fields this SDK version
        does not name in `extra_body` (`fit_body_fields`). `helper`: for the SDK's stream
        helper, which streams without a `stream` keyword."""
        api = self.api or "chat"
        stream = passthrough.get("stream") is True
        wire: OpenAIChat | OpenAIResponses
        if api == "chat":
            model = str(request.get("model", ""))
            param = self._max_param or (
                "max_completion_tokens" if is_reasoning_model(model) else "max_tokens"
            )
            wire = OpenAIChat(max_tokens_param=param)
        else:
            wire = OpenAIResponses()
        kwargs = wire.to_request(request, stream=stream)
        if "tools" in kwargs:
            kwargs["tools"] = _openai_tools(request.get("tools") or [], api)
        kwargs.update(passthrough)
        if api == "chat" and (stream or helper) and not _asks_usage(passthrough):
            # The usage chunk is asked for the record (`chat_passage` hides it from the caller).
            given = passthrough.get("stream_options")
            kwargs["stream_options"] = {**(given or {}), "include_usage": True}
        kwargs["prompt_cache_key"] = self.cache_key()
        fit_body_fields(kwargs, method)
        return kwargs

    def _no_tool_choice(self) -> Any:
        """The `tool_choice` that lets the model call no tool, in OpenAI's shape."""
        return "none"

    def side_kwargs(
        self, kwargs: Mapping[str, Any], method: Callable[..., Any], *, helper: bool = False
    ) -> dict[str, Any]:
        """The SDK keywords of the side call `begin_openai` just passed: its managed request
        in the API's shape with its own keywords (its own `prompt_cache_key` and
        `stream_options` as given, none when it gave none), else its keywords as given.
        `helper`: as in `call_kwargs`."""
        managed = self._side_request
        self._side_request = None
        if managed is None:
            return dict(kwargs)
        request, passthrough = managed
        out = self.call_kwargs(request, method, passthrough, helper=helper)
        out.pop("stream_options", None)  # asked for the record only: a side call has none
        if _given(kwargs.get("stream_options")):
            out["stream_options"] = kwargs["stream_options"]
        # Its own system comes first: the session's key would route it to a cache it cannot
        # read, and take that cache's place; only the caller's own key goes.
        out.pop("prompt_cache_key", None)
        if _given(kwargs.get("prompt_cache_key")):
            out["prompt_cache_key"] = kwargs["prompt_cache_key"]
        return out

    def chat_passage(self, passthrough: Mapping[str, Any], *, helper: bool) -> ChatPassage | None:
        """How a stream's events pass to the caller (`ChatPassage`): on Chat Completions, the
        usage chunk hidden unless the caller's `stream_options` named `include_usage`."""
        if self.api != "chat":
            return None
        return ChatPassage(swallow_usage=not _asks_usage(passthrough), helper=helper)

    def cache_key(self) -> str:
        """The caller's `prompt_cache_key`, else one made from the session's first record:
        the same for every request of the session, resumed ones included."""
        return self._cache_key()

    def _append(self, session: Session, role: str, content: Any) -> None:
        # A system or developer message inside the conversation is cut like a user message's
        # text: kept whole, one reminder holding a pasted file could fill the window.
        if role == "user" and isinstance(content, list):
            blocks: list[Any] = []
            for block in content:
                if isinstance(block, dict):
                    block, events = _capped_instruction(block, session)
                    for event in events:
                        emit(session.events_sink(), event)
                blocks.append(block)
            content = blocks
        super()._append(session, role, content)

    def _attach(self, session: Session) -> None:
        super()._attach(session)
        self._cache_key.session = session  # a summary fork's request asks before any call

    def messages_api(self, request: ProviderRequest, sdk: Any) -> Any:
        """`sdk.chat.completions` or `sdk.responses`."""
        return sdk.chat.completions if self.api == "chat" else sdk.responses

    def stream_fold(self) -> StreamAssembler:
        """A fresh fold for one streamed reply of the conversation's API."""
        return self.provider.wire.stream_assembler()

    def raw_stream_fold(self) -> StreamAssembler | None:
        """A fresh fold for the raw events under a streamed Responses reply (`_raw_tap`): its
        items keep the server's key order; None on Chat Completions (nothing to keep)."""
        return self.provider.wire.stream_assembler() if self.api == "responses" else None


# --------------------------------------------------------------------------- stream managers


class HelperStreamManager:
    """What `stream(...)` returns on a wrapped sync client: entering it runs the turn (the
    request is sent when the SDK's own manager is entered) and gives a `HelperStream`."""

    def __init__(self, endpoint: Endpoint, kwargs: dict[str, Any]) -> None:
        self._endpoint = endpoint
        self._kwargs = kwargs
        self._manager: Any = None

    def __enter__(self) -> Any:
        endpoint, pipeline = self._endpoint, self._endpoint._pipeline
        passthrough = pipeline.begin_openai(self._kwargs, endpoint._api)
        if passthrough is None:  # a side call: the SDK's own helper (`side_kwargs`)
            method = endpoint._sdk_endpoint().stream
            self._manager = method(**pipeline.side_kwargs(self._kwargs, method, helper=True))
            return self._manager.__enter__()
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        def send(request: ProviderRequest) -> Any:
            method = endpoint._sdk_endpoint().stream
            manager = method(**pipeline.call_kwargs(request, method, passthrough, helper=True))
            opened = manager.__enter__()  # sends the request
            pipeline.mark_sent()
            self._manager = manager
            return opened

        opened = open_turn_blocking(flow, send, pipeline.runner.run)
        return HelperStream(
            opened,
            pipeline.stream_fold(),
            pipeline.record,
            chat=pipeline.api == "chat",
            raw_fold=pipeline.raw_stream_fold(),
            passage=pipeline.chat_passage(passthrough, helper=True),
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._manager is not None:
            self._manager.__exit__(exc_type, exc, traceback)


class AsyncHelperStreamManager:
    """`HelperStreamManager` for the async client: `async with client.responses.stream(...)`."""

    def __init__(self, endpoint: AsyncEndpoint, kwargs: dict[str, Any]) -> None:
        self._endpoint = endpoint
        self._kwargs = kwargs
        self._manager: Any = None

    async def __aenter__(self) -> Any:
        endpoint, pipeline = self._endpoint, self._endpoint._pipeline
        passthrough = pipeline.begin_openai(self._kwargs, endpoint._api)
        if passthrough is None:
            method = endpoint._sdk_endpoint().stream
            self._manager = method(**pipeline.side_kwargs(self._kwargs, method, helper=True))
            return await self._manager.__aenter__()
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        async def send(request: ProviderRequest) -> Any:
            method = endpoint._sdk_endpoint().stream
            manager = method(**pipeline.call_kwargs(request, method, passthrough, helper=True))
            opened = await manager.__aenter__()
            pipeline.mark_sent()
            self._manager = manager
            return opened

        opened = await open_turn(flow, send)
        return AsyncHelperStream(
            opened,
            pipeline.stream_fold(),
            pipeline.record,
            chat=pipeline.api == "chat",
            raw_fold=pipeline.raw_stream_fold(),
            passage=pipeline.chat_passage(passthrough, helper=True),
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._manager is not None:
            await self._manager.__aexit__(exc_type, exc, traceback)


# --------------------------------------------------------------------------- endpoints

_UNMANAGED = (
    "would send the call past the session (not recorded, not compacted): use create(...) "
    "(with stream=True for a stream), or client.client for an unmanaged call"
)
_REFUSED = ("parse", "with_raw_response", "with_streaming_response", "compact")


class _Endpoint:
    """What the sync and async endpoints share: the SDK endpoint's other methods, with the
    ones that would bypass the session refused."""

    _api: OpenAIApi
    _pipeline: OpenAIPipeline
    _sdk: Any

    def _sdk_endpoint(self) -> Any:
        return self._sdk.chat.completions if self._api == "chat" else self._sdk.responses

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _REFUSED:
            raise ConfigError(f"{name} {_UNMANAGED}")
        return getattr(self._sdk_endpoint(), name)


class Endpoint(_Endpoint):
    """`client.chat.completions` or `client.responses` of a wrapped sync client."""

    def __init__(self, pipeline: OpenAIPipeline, sdk: Any, api: OpenAIApi) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._api = api

    def create(self, **kwargs: Any) -> Any:
        """`create` through the pipeline; returns the SDK's reply (or its stream)."""
        pipeline = self._pipeline
        passthrough = pipeline.begin_openai(kwargs, self._api)
        if passthrough is None:
            create = self._sdk_endpoint().create
            return create(**pipeline.side_kwargs(kwargs, create))
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        streams = passthrough.get("stream") is True

        def send(request: ProviderRequest) -> Any:
            endpoint = self._sdk_endpoint()
            kwargs = pipeline.call_kwargs(request, endpoint.create, passthrough)
            # A whole reply is read raw: its body is what the next request sends back.
            result = (endpoint.create if streams else endpoint.with_raw_response.create)(**kwargs)
            pipeline.mark_sent()
            return result

        if streams:
            stream = open_turn_blocking(flow, send, pipeline.runner.run)
            return OpenAIRecordingStream(
                stream,
                pipeline.stream_fold(),
                pipeline.record,
                pipeline.raw_stream_fold(),
                pipeline.chat_passage(passthrough, helper=False),
            )

        def read(raw: Any) -> ModelResponse:
            return pipeline.read_reply(raw.parse(), raw.http_response.json())

        result = drive_turn_blocking(flow, send, read, pipeline.runner.run)
        pipeline.remember_reply()
        return result.parse()

    def stream(self, **kwargs: Any) -> HelperStreamManager:
        """The SDK's stream helper through the pipeline: `with client.responses.stream(...)`."""
        return HelperStreamManager(self, dict(kwargs))


class AsyncEndpoint(_Endpoint):
    """`client.chat.completions` or `client.responses` of a wrapped async client."""

    def __init__(self, pipeline: OpenAIPipeline, sdk: Any, api: OpenAIApi) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._api = api

    async def create(self, **kwargs: Any) -> Any:
        """`create` through the pipeline; returns the SDK's reply (or its stream)."""
        pipeline = self._pipeline
        passthrough = pipeline.begin_openai(kwargs, self._api)
        if passthrough is None:
            create = self._sdk_endpoint().create
            return await create(**pipeline.side_kwargs(kwargs, create))
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        streams = passthrough.get("stream") is True

        async def send(request: ProviderRequest) -> Any:
            endpoint = self._sdk_endpoint()
            kwargs = pipeline.call_kwargs(request, endpoint.create, passthrough)
            # A whole reply is read raw: its body is what the next request sends back.
            create = endpoint.create if streams else endpoint.with_raw_response.create
            result = await create(**kwargs)
            pipeline.mark_sent()
            return result

        if streams:
            return AsyncOpenAIRecordingStream(
                await open_turn(flow, send),
                pipeline.stream_fold(),
                pipeline.record,
                pipeline.raw_stream_fold(),
                pipeline.chat_passage(passthrough, helper=False),
            )

        def read(raw: Any) -> ModelResponse:
            return pipeline.read_reply(raw.parse(), raw.http_response.json())

        result = await drive_turn(flow, send, read)
        pipeline.remember_reply()
        return result.parse()

    def stream(self, **kwargs: Any) -> AsyncHelperStreamManager:
        """The SDK's stream helper through the pipeline: `async with ...stream(...)`."""
        return AsyncHelperStreamManager(self, dict(kwargs))


class _Chat:
    """`client.chat`: its `completions` run the pipeline."""

    def __init__(self, completions: Endpoint | AsyncEndpoint, sdk: Any) -> None:
        self.completions = completions
        self._sdk = sdk

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._sdk.chat, name)


# --------------------------------------------------------------------------- the clients


class UnboundedOpenAI(SyncWrappedClient[OpenAIPipeline]):
    """An `openai.OpenAI` whose `chat.completions.create` and `responses.create` run the
    unbounded pipeline."""

    bypass_advice = _UNMANAGED

    def __init__(self, pipeline: OpenAIPipeline, sdk: Any | None = None) -> None:
        super().__init__(pipeline, sdk)
        self.chat = _Chat(Endpoint(pipeline, self._sdk, "chat"), self._sdk)
        self.responses = Endpoint(pipeline, self._sdk, "responses")


class AsyncUnboundedOpenAI(AsyncWrappedClient[OpenAIPipeline]):
    """An `openai.AsyncOpenAI` whose `chat.completions.create` and `responses.create` run the
    unbounded pipeline."""

    bypass_advice = _UNMANAGED

    def __init__(self, pipeline: OpenAIPipeline, sdk: Any | None = None) -> None:
        super().__init__(pipeline, sdk)
        self.chat = _Chat(AsyncEndpoint(pipeline, self._sdk, "chat"), self._sdk)
        self.responses = AsyncEndpoint(pipeline, self._sdk, "responses")


@overload
def wrap_openai(
    client: openai.AsyncOpenAI, session: Session | SyncSession | None = None, **options: Any
) -> AsyncUnboundedOpenAI: ...


@overload
def wrap_openai(
    client: openai.OpenAI, session: Session | SyncSession | None = None, **options: Any
) -> UnboundedOpenAI: ...


def wrap_openai(
    client: openai.OpenAI | openai.AsyncOpenAI,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    prices: Mapping[str, float] | None = None,
    api: OpenAIApi | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> UnboundedOpenAI | AsyncUnboundedOpenAI:
    """Wrap an OpenAI SDK client (`unbounded.wrap` calls this for one): the arguments are
    `wrap`'s, plus `prices` (`PRICE_FIELDS`) for a model the table does not know and `api`
    ("chat" or "responses"; default: the first call's, or "chat" when `model` opens the
    session now)."""
    import openai

    check_wrap_keywords(wrap_openai, policy, session_options)
    given = bound_session(
        session, session_folder=session_folder, model=model, context_window=context_window
    )
    if session is not None and prices is not None:
        raise ConfigError("prices apply to a session the wrapper opens, not to one you gave")
    blocking = not isinstance(client, openai.AsyncOpenAI)
    if blocking:
        refuse_blocking_background_summary(given, policy, session_options)
    pipeline = OpenAIPipeline(
        client,
        given,
        api=api,
        prices=prices,
        context_window=context_window,
        model=model,
        folder=session_folder,
        policy=policy,
        summarizer=summarizer,
        events=events,
        history=history,
        session_options=session_options,
        blocking=BLOCKING_DROP_IN if blocking else None,
    )
    if isinstance(client, openai.AsyncOpenAI):
        return AsyncUnboundedOpenAI(pipeline)
    return UnboundedOpenAI(pipeline)


def is_openai_client(client: Any) -> bool:
    """Whether `client` is an `openai.OpenAI` or `openai.AsyncOpenAI` (without importing the
    SDK when the caller never did)."""
    import sys

    sdk = sys.modules.get("openai")
    return sdk is not None and isinstance(client, (sdk.OpenAI, sdk.AsyncOpenAI))


__all__ = [
    "PRICE_FIELDS",
    "AsyncHelperStream",
    "AsyncHelperStreamManager",
    "AsyncOpenAIRecordingStream",
    "AsyncUnboundedOpenAI",
    "HelperStream",
    "HelperStreamManager",
    "OpenAIPipeline",
    "OpenAIRecordingStream",
    "UnboundedOpenAI",
    "is_openai_client",
    "is_reasoning_model",
    "model_from_arguments",
    "wrap_openai",
]
