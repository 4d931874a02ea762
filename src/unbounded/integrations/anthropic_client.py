"""A drop-in around the official Anthropic client: the caller's code does not change.

    client = wrap(anthropic.Anthropic(), session_folder="~/.myagent/session-1")
    reply = client.messages.create(model=..., max_tokens=..., system=..., tools=...,
                                   messages=messages)          # a plain SDK `Message`

Every `messages.create(...)` / `messages.stream(...)` call runs the unbounded pipeline of one
`Session`:

1. **What is new.** The caller may keep sending the whole conversation (the usual SDK
   pattern) or only the new messages; both work. Messages are compared by content with the
   conversation the session holds (cache markers, `None` fields and SDK objects versus dicts
   make no difference; an echoed assistant reply also matches with its thinking left out),
   and only what the session does not hold yet is appended: the known prefix of a full
   list, the part after an overlap (a sliding window), or everything when nothing is known.
   A list that starts like the known conversation and then differs (an edited or rewound
   history) is refused with a `ConfigError`: the transcript is append-only. A list that
   ends where the conversation ended before its last reply (the whole list, or a window of
   two messages or more) asks again: the last reply is discarded (`LastReplyDiscarded`) and
   a new one requested. `history="full"` or `"new"` fixes the reading for callers that
   always do one thing. Only the messages a call adds to the previous call's list are
   read (the repeated ones are recognised as the same objects, or equal ones): a message
   dict edited in place after it was sent is not seen; send a new dict to change one.
   **Side calls.** A call that does not continue the conversation (a title, a classifier,
   a judge) is a side call: nothing is recorded and its reply is returned unchanged
   (`SideCallPassed`): one with a different `system` (unless its messages go on through
   the exchange of the side call just before it, point 2, or the caller said
   `history="new"`, point 2); one that shares no message with the conversation when the caller has
   been sending whole histories, or when its model or tools differ; one that would leave
   the last reply's tool calls unanswered. One with a different `system` whose messages
   continue the recorded conversation (adding messages, or asking again for its last
   reply), with the conversation's tools or not, is sent managed (`_side_calls`): the
   session's view as its next request would send it (compacted, cleared, its cache markers)
   and the messages the side call adds, under the side call's own system, tools and other
   keywords. It does not compact (the view fits as of the last turn, which compacted when
   due; a compaction wants the last reply's calls answered, which the side call does
   without recording it); a view that would not fit the side model's window with the side
   call's own messages is cut from its oldest rounds for that request only. No extension's
   `before_request` runs (a turn's step). Every other side call goes to the SDK as given.
2. **Cache-safe parameters.** `model`, `system`, `tools`, `thinking` and `max_tokens` become
   the session's `SessionConfig` (what the compaction fork repeats to share the prompt
   cache). Changing one after a request went out is allowed, and emits `CacheParamsChanged`
   because it re-writes the cache. A new `system` is adopted by what the next call keeps:
   the first call carrying it is a side call (a title or judge request looks the same).
   When it has the conversation's tools and its messages continue the conversation, adding
   messages, or ask again for its last reply (a regenerate), it is remembered: the messages
   it added after the recorded conversation (none for a regenerate). The next call adopts
   it when, with the conversation's tools, its messages continue the recorded conversation
   through it: where the side call's added messages began, they hold those messages, then
   an assistant message (the side call's reply) and more. Adopting records the side call's
   messages and that reply (a regenerate's: the recorded last reply discarded first,
   `LastReplyDiscarded`), then the call's own, and takes the call's own parameters
   (whatever its system: one with the time in it, new at every call, is recorded every
   turn). Any other call forgets the side call: a judge or title asked again (the same
   question, no reply after it) is another side call, and a call back on the old system
   that does not carry the side exchange is an ordinary turn. A `history="new"` caller
   declares that every call continues the conversation: a new system with the
   conversation's tools and model is a change at once (recorded, `CacheParamsChanged`); one
   without tools while the conversation has some, or on another model (a title request),
   is a side call sent managed over the recorded conversation, its messages after it.
   `max_tokens` is required, as by the SDK (`TypeError`). The `extra_headers` of the
   caller's last turn go with the compaction's summary requests too (`_CallerHeaders`),
   but for the ones naming that one request (`_unrepeated`: trace context, request ids).
   Every other keyword (`temperature`, `tool_choice`, `metadata`, `stop_sequences`,
   `extra_headers`, `timeout`…) is passed to the SDK as given.
3. **The request** is `Session.prepare()`'s: auto-compaction, microcompaction, cache
   breakpoints. It goes out through the caller's own client.
4. **The reply** is recorded (its usage anchors the token count) and returned unchanged: the
   SDK's `Message`, the SDK's event stream (`stream=True`), or the SDK's `MessageStream` from
   `messages.stream(...)`. A streamed reply is recorded once it is complete.
5. **Prompt too long**: one reactive compaction, then the call is retried once; a second
   refusal reaches the caller as the SDK's own exception, like every other API error.

**Recall.** When the caller's tools are in use the request also offers the session's `recall`
tool (`Policy.recall_enabled`). A non-streamed reply that calls only `recall` is answered
here and the model asked again (at most `MAX_RECALL_ROUNDS` times), so the caller receives
the reply that follows; those rounds stay in the transcript (marked `isRecallRound`) and the
caller never has to send them back. A `recall` call the caller does see (in a streamed reply,
or beside its own tool calls) may be left unanswered or answered with anything: the wrapper
puts the session's answer in the caller's next tool results.

Compaction summaries (and the notes of a `SessionMemory` without an updater) come from the
same client and model by default: the cache-sharing fork, its transport retries made and
counted by unbounded within the compaction's summary requests, and the offline hand-over
once the breaker trips or those requests are spent. Pass `summarizer="extractive"` (offline)
or any `Provider` to change that. One wrapped client is one
conversation: calls on it are sequential, like the turns of a conversation. Everything else
on the client (`models`, `beta`, `messages.count_tokens`…) is the SDK's, untouched;
`close()` (or `with` / `async with`) releases the session folder's lock and the SDK client.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from unbounded.blocking import BlockingDriver, BlockingRunner
from unbounded.catalog import (
    ASSUMED_MODELS,
    ModelInfo,
    ModelTable,
    load_model_table,
    provider_of_name,
)
from unbounded.compaction.large_output import is_kept_copy_of, is_shortened
from unbounded.configuration import model_for_window
from unbounded.engine import (
    TurnOptions,
    drive_turn,
    drive_turn_blocking,
    open_turn,
    open_turn_blocking,
    turn_flow,
)
from unbounded.errors import ConfigError
from unbounded.events import (
    CacheParamsChanged,
    EventSink,
    LastReplyDiscarded,
    SideCallPassed,
    emit,
)
from unbounded.integrations._anthropic_blocks import (
    canonical_content,
    canonical_system,
    canonical_tools,
)
from unbounded.integrations._anthropic_markers import honor_caller_markers
from unbounded.integrations._anthropic_prints import (
    Continuation,
    HistoryMode,
    MessagePrint,
    SeenMessages,
    conversation_prints,
    message_print,
    new_messages,
    recall_call_ids,
)
from unbounded.integrations._anthropic_streams import (
    AsyncRecordingStream,
    AsyncStreamManager,
    RecordingStream,
    StreamManager,
)
from unbounded.integrations._drop_in import WireProvider
from unbounded.integrations._side_calls import (
    calls_recall,
    fit_side_view,
    fresh_messages,
    holds_tool_blocks,
    recall_rounds_as_text,
    side_budget,
    side_request,
    side_request_tokens,
    side_view,
    with_recall_tool,
)
from unbounded.integrations._wrapped_client import (
    BLOCKING_DROP_IN,
    AsyncWrappedClient,
    SyncWrappedClient,
    bound_session,
    check_wrap_keywords,
    check_wrap_options,
    refuse_blocking_background_summary,
    session_option,
    summarizer_in_options,
)
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Heartbeat, ProviderWrapper
from unbounded.policy import Policy
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.providers.base import ModelResponse, PromptTooLongError, Provider
from unbounded.providers.retry import RetryingProvider
from unbounded.recall.schema import RECALL_TOOL_NAME
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession
from unbounded.wire.anthropic import block_dict, plain_data, stored_content

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message

logger = logging.getLogger(__name__)

SummarizerChoice = Literal["client", "extractive"]
"""`client`: the wrapped client and the session's model; `extractive`: offline, no model."""


CACHE_SAFE_PARAMETERS = ("model", "system", "tools", "thinking", "max_tokens")
"""Keywords that key the prompt cache: they go into the session's `SessionConfig`."""


MAX_RECALL_ROUNDS = 3
"""Recall-only replies answered in a row before the reply goes to the caller as it is."""


def _config_fields(params: Mapping[str, Any]) -> dict[str, Any]:
    """The `SessionConfig` fields a call's cache-safe parameters give (plain dicts)."""
    system = params.get("system")
    if system is not None and not isinstance(system, str):
        system = [block_dict(b) for b in system]
    thinking = params.get("thinking")
    return {
        "model": params.get("model"),
        "system": system,
        "tools": [block_dict(t) for t in params.get("tools") or []],
        "thinking": dict(plain_data(thinking)) if thinking is not None else None,
        "max_tokens": params.get("max_tokens"),
    }


def _same_system(given: Any, system: Any) -> bool:
    """Whether a call's `system` is the config's, as `canonical_system` compares them (an
    equal value, a str or dicts, is the same without canonicalising either)."""
    return bool(given == system) or canonical_system(given) == canonical_system(system)


def _same_config(params: Mapping[str, Any], config: SessionConfig) -> bool:
    """Whether a call's cache-safe parameters are `config`'s as they are: equal values of the
    shapes `_configure` copies unchanged (a str or dicts), with a valid model and max_tokens.
    Then `_config_fields(params)` are `config`'s: nothing needs rebuilding."""
    model, max_tokens = params.get("model"), params.get("max_tokens")
    if not isinstance(model, str) or not model or model != config.model:
        return False
    if max_tokens is None:
        if config.max_tokens is not None:
            return False
    elif type(max_tokens) is not int or max_tokens <= 0 or max_tokens != config.max_tokens:
        return False
    system = params.get("system")
    if system is not None and not isinstance(system, (str, list)):
        return False
    thinking = params.get("thinking")
    if thinking is not None and not isinstance(thinking, dict):
        return False
    tools = params.get("tools") or []
    return (
        isinstance(tools, list)
        and bool(system == config.system)
        and bool(tools == config.tools)
        and bool(thinking == config.thinking)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _SideCall:
    """A side call with a new system over the conversation, as the next call may adopt it."""

    base: int
    """How many of the conversation's messages it went on from (all but the last reply for
    a regenerate)."""
    fresh: tuple[MessagePrint, ...]
    """The messages it added after those (none for a regenerate)."""
    retry: bool
    """It asked again for the last reply: adopting it takes that reply out."""


_UNREPEATED_HEADERS = frozenset(
    {
        "anthropic-beta",
        "idempotency-key",
        # Trace context and request ids name the caller's own request: repeated, a tracer
        # would join the summary to the turn's span and a gateway take it for the turn's retry.
        "traceparent",
        "tracestate",
        "baggage",
        "sentry-trace",
        "b3",
        "x-b3-traceid",
        "x-b3-spanid",
        "x-b3-parentspanid",
        "x-b3-sampled",
        "x-b3-flags",
        "uber-trace-id",
        "newrelic",
        "x-cloud-trace-context",
        "x-datadog-trace-id",
        "x-datadog-parent-id",
        "x-request-id",
        "x-client-request-id",
        "x-amzn-trace-id",
        "request-id",
    }
)
"""Caller headers a summary request does not repeat as they are: the betas are merged with
the request's own (`_CallerHeaders`); an idempotency key names one request (repeated, a
server or proxy would answer the summary request with the caller's reply); the per-request
trace and request-id headers (a summary is a request of its own); and any header whose
name ends in `_UNREPEATED_SUFFIXES` (a gateway's own request or correlation id)."""

_UNREPEATED_SUFFIXES = ("-request-id", "-correlation-id", "-trace-id", "-span-id")
"""Name endings of per-request id headers (Helicone-Request-Id, X-Correlation-Id...): a
summary request repeating them would be filed under the caller's request."""


def _unrepeated(name: str) -> bool:
    """Whether the caller's header `name` (lowercase) names its one request only."""
    return (
        name in _UNREPEATED_HEADERS
        or name.endswith(_UNREPEATED_SUFFIXES)
        or name.startswith("x-stainless-")
    )


def _beta_header(headers: Any) -> list[str]:
    """The betas an `extra_headers` mapping names in its `anthropic-beta` header."""
    if not isinstance(headers, Mapping):
        return []
    value = next((v for k, v in headers.items() if str(k).lower() == "anthropic-beta"), None)
    if not isinstance(value, str):
        return []
    return [beta.strip() for beta in value.split(",") if beta.strip()]


def _repeated_headers(headers: Any) -> dict[str, str]:
    """The headers of a caller's `extra_headers` the summary requests send too (a proxy's
    auth or routing headers...): all but the per-request ones (`_unrepeated`) and the
    omitted ones."""
    if not isinstance(headers, Mapping):
        return {}
    return {
        str(name): value
        for name, value in headers.items()
        if isinstance(value, str)
        and not _unrepeated(str(name).lower())
    }


@dataclasses.dataclass(slots=True)
class _CallerState:
    """What the caller's last turn named in its `extra_headers`, kept apart from the pipeline
    (the session's summarizer reads it, and must not keep the pipeline alive)."""

    betas: list[str] = dataclasses.field(default_factory=list)
    """The betas of its `anthropic-beta` header."""
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    """Its other headers (`_repeated_headers`)."""


class _CallerHeaders(ProviderWrapper):
    """The wrapped client as the summarizer, its requests sending what the caller's last turn
    named in its `extra_headers`: the betas of its `anthropic-beta` header (a summary request
    repeats the conversation, which a beta may be what lets the API take: the 1M-token
    window's) and its other headers (a proxy's auth or routing headers), through the SDK's
    `with_options(default_headers=...)` copy of the client."""

    def __init__(
        self,
        inner: Provider,
        client: Any,
        build: Callable[[Any], Provider],
        caller: _CallerState,
        *,
        betas: bool,
    ) -> None:
        super().__init__(inner)
        self._client = client
        self._build = build
        self._caller = caller
        self._betas = betas
        self._made: tuple[tuple[tuple[str, str], ...], Provider] | None = None
        """The provider on the client copy with the last headers, while they stay."""

    def _provider(self) -> Provider:
        headers = self._caller.headers
        copy_with = getattr(self._client, "with_options", None)
        if not headers or not callable(copy_with):
            return self.inner
        key = tuple(sorted(headers.items()))
        if self._made is None or self._made[0] != key:
            self._made = (key, self._build(copy_with(default_headers=dict(headers))))
        return self._made[1]

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """The reply to `request` with the caller's betas and headers added."""
        if self._betas:
            own = [str(beta) for beta in request.get("betas") or ()]
            extra = [beta for beta in self._caller.betas if beta not in own]
            if extra:
                request = cast(ProviderRequest, {**request, "betas": [*own, *extra]})
        return await self._provider().create(request, stream=stream, heartbeat=heartbeat)


def _holds_shortened(content: Any) -> bool:
    """Whether recorded content holds a text cut on the way in (`is_shortened`)."""
    if isinstance(content, str):
        return is_shortened(content)
    if isinstance(content, Mapping):
        return any(_holds_shortened(value) for value in content.values())
    if isinstance(content, list):
        return any(_holds_shortened(value) for value in content)
    return False


def _same_or_cut(given: Any, recorded: Any) -> bool:
    """Whether the caller's `given` content is `recorded` but for texts `recorded` holds cut
    (the capped copy of the caller's whole text)."""
    if isinstance(given, str) and isinstance(recorded, str):
        return given == recorded or (is_shortened(recorded) and is_kept_copy_of(given, recorded))
    if isinstance(given, Mapping) and isinstance(recorded, Mapping):
        return given.keys() == recorded.keys() and all(
            _same_or_cut(given[key], recorded[key]) for key in recorded
        )
    if isinstance(given, list) and isinstance(recorded, list):
        return len(given) == len(recorded) and all(
            _same_or_cut(a, b) for a, b in zip(given, recorded, strict=True)
        )
    return bool(given == recorded)


def _takes_betas(method: Callable[..., Any]) -> bool:
    """Whether the SDK `method` takes `betas=` (the beta client's; a `**kwargs` one may)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - C callables, mocks without a spec
        return True
    return any(p.name == "betas" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _betas_as_header(kwargs: dict[str, Any], method: Callable[..., Any]) -> dict[str, Any]:
    """`kwargs` for `method`, whose `betas=` (the compaction beta the wire adds for a history
    holding a compaction block) goes in the `anthropic-beta` header when `method` is the plain
    client's, which takes no `betas=` (only `client.beta.messages` does); the caller's
    `extra_headers` betas are kept."""
    betas = kwargs.get("betas")
    if not betas or _takes_betas(method):
        return kwargs
    out = {key: value for key, value in kwargs.items() if key != "betas"}
    headers = out.get("extra_headers")
    given = _beta_header(headers)
    merged = [*given, *(str(beta) for beta in betas if str(beta) not in given)]
    others = {
        key: value
        for key, value in (headers.items() if isinstance(headers, Mapping) else ())
        if str(key).lower() != "anthropic-beta"
    }
    out["extra_headers"] = {**others, "anthropic-beta": ",".join(merged)}
    return out


def _require_max_tokens(kwargs: Mapping[str, Any], call: str) -> None:
    """The SDK's TypeError for a call without `max_tokens` (a required argument of the
    Anthropic SDK): the wrapper chooses no limit the caller did not."""
    if not _given(kwargs.get("max_tokens")):
        raise TypeError(
            f"messages.{call}() missing required argument 'max_tokens' (the most tokens the "
            "reply may have; the Anthropic SDK requires it)"
        )


def _paused(session: Session) -> bool:
    """Whether the conversation ends with a reply the API paused (`stop_reason` "pause_turn",
    a long server-tool turn): sent back as it is, as the last message, it continues the turn."""
    for entry in reversed(session.entries):
        if entry.role in ("user", "assistant"):
            message = entry.message or {}
            return entry.role == "assistant" and message.get("stop_reason") == "pause_turn"
    return False


def _given(value: Any) -> bool:
    """False for None and the SDK's NOT_GIVEN / omit sentinels."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


class ClientPipeline:
    """The session side of a wrapped client: what is new, the config, recording, PTL."""

    def __init__(
        self,
        client: Any,
        session: Session | None,
        *,
        folder: str | Path | None,
        model: str | None,
        context_window: int | None,
        policy: Policy | None,
        summarizer: Provider | SummarizerChoice | None,
        events: EventSink | None,
        history: HistoryMode,
        session_options: dict[str, Any],
        blocking: BlockingDriver | None = None,
    ) -> None:
        if history not in ("auto", "full", "new"):
            raise ConfigError(f"history must be 'auto', 'full' or 'new', not {history!r}")
        check_wrap_options(
            model=model, context_window=context_window, summarizer=summarizer, events=events
        )
        if session is not None and events is not None:
            # A session's events go where it was built to send them; a second sink is not added.
            raise ConfigError(
                "events come from the session you gave wrap(): pass events= to Session(...), "
                "or leave out the session and let wrap() open one"
            )
        if session is not None and session_options:
            # Options a session is built with (redaction, hooks, its model table...) cannot be
            # given to one already built; policy= and summarizer= are what reconfigure changes.
            raise ConfigError(
                f"{', '.join(f'{name}=' for name in sorted(session_options))} beside the session "
                "you gave wrap(): those are Session options, pass them to Session(...), or leave "
                "out the session and let wrap() open one"
            )
        self.client = client
        self._blocking = blocking
        """The blocking entry point this pipeline is (None: an async client's)."""
        self._release_hold: weakref.finalize[Any, Any] | None = None
        """Releases the pipeline's hold on its session (`Session.drive_blocking`): at `close`,
        or when the pipeline is collected (a drop-in nobody closed stops driving it)."""
        self.provider = self._provider_for(client)
        self.history: HistoryMode = history
        self._folder = Path(folder).expanduser() if folder is not None else None
        self._context_window = context_window
        self._policy = policy
        self._summarizer = summarizer
        self._options_summarizer = summarizer_in_options(summarizer, session_options)
        """The summarizer given in `options=`: a session the wrapper opens keeps it."""
        self._events = events
        self._options = session_options
        self._session: Session | None = None
        self._table: ModelTable | None = None
        """The model table of a session the wrapper opened with wrap()'s `context_window`."""
        self._owns_session = session is None
        self._settled = session is not None and session.config.system is not None
        """The session's config is the conversation's: a session given with its system, or
        one a call has configured (a folder resumed with wrap()'s `model=`, or a session given
        without a system, learns its system at its first call)."""
        self._sent_params: dict[str, Any] | None = None
        self._params_of: tuple[SessionConfig, dict[str, Any]] | None = None
        """A config and its cache-safe parameters (not rebuilt while the config stays)."""
        self._sends_history = False
        """The caller sent messages the session already held: it sends whole histories."""
        self._caller = _CallerState()
        """What the caller's last turn named in its `extra_headers`: the summary requests on
        the wrapped client send it too (a 1M-window beta, a proxy's auth header...)."""
        self._messages_ttl: str | None = None
        """The longest TTL the caller put on a message block in the last call."""
        self.known: list[MessagePrint] = []
        self.recall_ids: set[str] = set()
        """Ids of the recall calls in the conversation (their results are the wrapper's)."""
        self._capped_at: dict[int, list[dict[str, Any]]] = {}
        """Known messages read back from the transcript whose text was cut on the way in,
        by index (their canonical recorded content): the caller sends them whole."""
        self.runner = BlockingRunner()
        """The event loop the blocking client's calls run the pipeline on."""
        self._last_read: tuple[Any, ModelResponse] | None = None
        """The last SDK reply read, and how the session read it."""
        self._seen = SeenMessages()
        self._verified = 0
        """The caller's first messages known to match `known` (its last call continued it)."""
        self._side: _SideCall | None = None
        self._side_request: tuple[ProviderRequest, dict[str, Any]] | None = None
        """The request of the side call `begin` just passed, when it is sent managed (its
        messages continue the conversation), and the keywords it passes through."""
        """The last call when it was a side call with a new system over the conversation: the
        next call whose messages go on through its exchange adopts it (`_adopts`)."""
        if session is not None:
            if summarizer is not None:
                session.reconfigure(summarizer=self._summarizer_provider())
            if policy is not None:
                session.reconfigure(policy=policy)
            self._attach(session)
        elif model is not None:
            self._attach(self._open(SessionConfig(model=model, context_window=context_window)))

    # -- the session

    @property
    def session(self) -> Session:
        """The session (opened at the first call when the model was not known before)."""
        if self._session is None:
            raise ConfigError(
                "the session opens at the first messages.create/stream call, which names the "
                "model: pass model=... (or a Session) to wrap() to open it now"
            )
        return self._session

    @property
    def opened_session(self) -> Session | None:
        """The session, or None before the first call opens it."""
        return self._session

    def _attach(self, session: Session) -> None:
        if self._release_hold is not None:
            self._release_hold()  # a session attached before: no longer driven
        if self._blocking is not None:
            hold = session.drive_blocking(self._blocking)  # a later background_summary is refused
            self._release_hold = weakref.finalize(self, session.release_blocking, hold)
        self._session = session
        # The drop-in sends the requests itself: the session learns where they go, as `call`
        # would teach it (the native tiers read the provider's profile). `begin` binds it
        # again at each call, the provider following the API an OpenAI conversation takes.
        session.bind_call_provider(self.provider)
        self._verified = 0
        self.known = conversation_prints(session.entries)
        self.recall_ids = recall_call_ids(session.entries)
        self._note_capped(session)

    def _summarizer_provider(self) -> Provider:
        choice = self._summarizer
        if choice is None or choice == "client":
            return self._client_summarizer()
        if choice == "extractive":
            from unbounded.providers.extractive import ExtractiveSummarizer

            return ExtractiveSummarizer()
        if isinstance(choice, str):
            raise ConfigError(
                f"summarizer must be 'client', 'extractive' or a Provider, not {choice!r}"
            )
        return choice

    def _client_summarizer(self) -> Provider:
        """The wrapped client as the summarizer. Its transport retries are made by a
        `RetryingProvider` (the SDK's own turned off for these calls, as many as the client
        allows), so each one is counted against the compaction's summary requests."""
        retries = getattr(self.client, "max_retries", 0)
        copy_with = getattr(self.client, "with_options", None)
        if not callable(copy_with) or not isinstance(retries, int) or retries <= 0:
            return self._with_caller_headers(self.provider, self.client)
        quiet_client = copy_with(max_retries=0)
        quiet = self._with_caller_headers(self._provider_for(quiet_client), quiet_client)
        return RetryingProvider(quiet, max_retries=retries, events=self._events)

    def _with_caller_headers(self, provider: Provider, client: Any) -> Provider:
        """`provider` (on `client`) sending the caller's headers too (`_CallerHeaders`)."""
        betas = isinstance(provider, AnthropicProvider)
        return _CallerHeaders(provider, client, self._provider_for, self._caller, betas=betas)

    def _provider_for(self, client: Any) -> WireProvider:
        """The provider that sends the session's own requests (summaries) through `client`."""
        return AnthropicProvider(client)

    def _open(self, config: SessionConfig) -> Session:
        self._learn_unknown_model(config.model)
        if self._context_window is not None:
            # The session's own copy of the table: a model the conversation switches to later,
            # unknown to it, is added there (`_learn_switched_model`), planned with this window.
            table = session_option(self._options, "model_table") or load_model_table()
            self._table = ModelTable(dict(table.models))
            self._options = {**self._options, "model_table": self._table}
        # The summarizer given in `options=` is the caller's: the drop-in's default yields to it.
        kept = self._options_summarizer is not None
        chosen = {
            "policy": self._policy,
            "summarizer": None if kept else self._summarizer_provider(),
            "events": self._events,
        }
        # A keyword wrap() was not given must not blank the same field of an `options=`.
        options: dict[str, Any] = {
            **{name: value for name, value in chosen.items() if value is not None},
            **self._options,
        }
        if self._folder is not None:
            return Session.open(self._folder, config, **options)
        return Session(config, **options)

    def _learn_unknown_model(self, model: str) -> None:
        """A model the table does not list (a Claude model newer than the table, another
        provider's behind a proxy) is planned with `context_window` given to wrap()
        (`_unknown_model_info`), said in the log; without a window, a ConfigError naming
        wrap()'s remedies."""
        table = session_option(self._options, "model_table") or load_model_table()
        if table.find(model) is not None:
            return
        if self._context_window is None:
            priced = (
                f"{ASSUMED_MODELS['anthropic']}'s prices"
                if provider_of_name(model) == "anthropic"
                else "no prices"
            )
            raise ConfigError(
                f"model {model!r} is not in the model table, so its context window is unknown: "
                f"pass wrap(client, model={model!r}, context_window=...) to plan it with that "
                f"window and {priced}, or add its row to a models file "
                "(UNBOUNDED_MODELS_FILE, or model_table=load_model_table([FILE]))"
            )
        self._options = {
            **self._options,
            "model_table": table.with_model(self._unknown_model_info(table, model)),
        }

    def _unknown_model_info(self, table: ModelTable, model: str) -> ModelInfo:
        """The figures a model the table does not list is planned with, given wrap()'s
        `context_window` (`configuration.model_for_window`'s rule, said in the log): a
        `claude-` name the current Claude model's; any other half the window as its max
        output and no prices."""
        return model_for_window(table, model, self._context_window)

    def _learn_switched_model(self, model: str) -> None:
        """A model the conversation switches to that the table does not list is planned as
        the first call's would be (`_learn_unknown_model`): added to the session's own copy of
        the table when wrap() was given `context_window`; else the session's ConfigError."""
        table = self._table
        if table is not None and table.find(model) is None:
            table.add(self._unknown_model_info(table, model))

    def _configure(self, params: dict[str, Any]) -> Session:
        """The session for these cache-safe parameters (opened, or its config updated)."""
        model = params.get("model")
        if not isinstance(model, str) or not model:
            raise ConfigError("messages.create/stream needs model= (a model name)")
        max_tokens = params.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
            raise ConfigError(f"max_tokens must be a positive integer, not {max_tokens!r}")
        if self._session is not None and _same_config(params, self._session.config):
            self._settled = True
            self._check_sent(self._session)
            return self._session
        fields = _config_fields(params)
        if self._session is None:
            config = SessionConfig(**fields, context_window=self._context_window)
            self._attach(self._open(config))
        session = self.session
        current = session.config
        wanted = dataclasses.replace(current, **fields)
        if wanted.model != current.model:
            self._learn_switched_model(wanted.model)
        if wanted != current:
            session.reconfigure(wanted)
        self._settled = True
        self._check_sent(session)
        return session

    def _cache_params(self, config: SessionConfig) -> dict[str, Any]:
        """The cache-safe parameters of `config` (made again only when the config changed)."""
        kept = self._params_of
        if kept is None or kept[0] is not config:
            kept = self._params_of = (
                config,
                {name: getattr(config, name) for name in CACHE_SAFE_PARAMETERS},
            )
        return kept[1]

    def _check_sent(self, session: Session) -> None:
        """Emit `CacheParamsChanged` when the config differs from the last request's."""
        sent = self._sent_params
        now = self._cache_params(session.config)
        if sent is not None and sent is not now and sent != now:
            changed = tuple(name for name in CACHE_SAFE_PARAMETERS if sent[name] != now[name])
            emit(session.events_sink(), CacheParamsChanged(changed))

    def begin(self, kwargs: Mapping[str, Any], *, streaming_helper: bool) -> dict[str, Any] | None:
        """Take a call's keywords: configure the session, append what is new, and return the
        keywords to pass through to the SDK unchanged; None for a side call (one that does
        not continue the conversation), which goes to the SDK exactly as given."""
        rest = {key: value for key, value in kwargs.items() if _given(value)}
        if streaming_helper and "stream" in rest:
            raise ConfigError("messages.stream(...) takes no stream= keyword")
        if "messages" not in rest:
            raise ConfigError("messages.create/stream needs messages=")
        given = rest.pop("messages")
        # Only read during this call (`SeenMessages` keeps its own copy): a list is not copied.
        messages = given if type(given) is list else list(given)
        params = {name: rest.pop(name) for name in CACHE_SAFE_PARAMETERS if name in rest}
        relation: Continuation | None = None
        seen = self._seen
        repeated = seen.read(messages, self.recall_ids)
        verified = min(self._verified, repeated)
        self._verified = 0

        def continuation() -> Continuation:  # against what is known at the time of the call
            if self._capped_at:
                self._recognise_capped(messages)
            return new_messages(
                messages,
                self.known,
                self.history,
                self.recall_ids,
                prints=seen.prints,
                verified=verified,
            )

        remembered, self._side = self._side, None
        self._side_request = None
        discards = False  # an adopted regenerate: the recorded last reply is taken out
        if self._session is not None and self.known:
            config = self._session.config
            adopted = (
                self._adopts(remembered, messages, params, verified)
                if remembered is not None
                else None
            )
            if adopted is not None:
                relation, discards = adopted, remembered is not None and remembered.retry
            elif (
                not self._settled
                or _same_system(params.get("system"), config.system)
                # every call continues: a new system is a change, unless the call drops the
                # conversation's tools or model (a title request over it)
                or (self.history == "new" and not self._new_history_side_call(params, config))
            ):
                relation = continuation()
            else:
                # A new system prompt is a side call (a title, a judge...): one call cannot
                # tell it from a change. One over the conversation's tools on messages that
                # continue it is remembered; the next call adopts it only if it goes on
                # through its exchange (point 2 of the module docstring). One that continues
                # the conversation is sent over the session's view (`side_kwargs`).
                try:
                    relation = continuation()
                except ConfigError:
                    relation = None
                self._side = self._side_call_kept(relation, params)
                self._side_request = self._managed_side_call(relation, messages, params, rest)
                self._side_call("a different system prompt", messages)
                return None
            reason = None if discards else self._side_call_reason(relation, messages, params)
            if reason is not None:
                self._side_call(reason, messages)
                return None
        self._check_turn(rest)  # a turn of the conversation, no side call: what it may ask
        headers = rest.get("extra_headers")
        self._caller.betas = _beta_header(headers)
        self._caller.headers = _repeated_headers(headers)
        session = self._configure(params)  # may load what a session folder already knows
        session.bind_call_provider(self.provider)
        if relation is None:
            relation = continuation()
        if relation.relation == "retry" or discards:
            removed = session.discard_last_reply()
            self.known = conversation_prints(session.entries)
            self._note_capped(session)
            discarded = removed[0].message_id if removed else None
            emit(session.events_sink(), LastReplyDiscarded(discarded))
        if relation.start and relation.relation in ("continues", "window", "retry"):
            self._sends_history = True
        fresh = messages[relation.start :]
        if fresh:
            last_role = relation.prints[-1].role
        else:
            current = session.messages
            last_role = current[-1]["role"] if current else ""
        if last_role != "user" and (fresh or not _paused(session)):
            raise ConfigError(
                "the conversation must end with a user message (a prompt or tool results) "
                "for the model to answer; an assistant prefill is not supported by the wrapper"
            )
        self._messages_ttl = seen.longest_ttl
        printed_fresh = relation.prints[relation.start :]
        for index, (message, printed) in enumerate(
            zip(fresh, printed_fresh, strict=True), start=relation.start
        ):
            role, content = seen.fields(index, message)
            self._append(session, role, content)
            self.known.append(printed)
        if relation.relation == "continues" and len(self.known) == len(messages):
            self._verified = len(messages)  # known ends with this list's prints
        return rest

    def _note_capped(self, session: Session) -> None:
        """Note the known messages (read back from the transcript) whose text was cut on the
        way in (over `Policy.tool_result_max_tokens`): their prints are of the cut text."""
        capped: dict[str, list[dict[str, Any]]] = {}
        for entry in session.entries:
            if entry.type == "user" and _holds_shortened(entry.content):
                recorded = canonical_content(entry.content)
                capped[message_print("user", entry.content, self.recall_ids).exact] = recorded
        self._capped_at = (
            {i: capped[p.exact] for i, p in enumerate(self.known) if p.exact in capped}
            if capped
            else {}
        )

    def _recognise_capped(self, messages: Sequence[Any]) -> None:
        """The caller's print in place of a cut message's known one when the caller's message
        is the one recorded cut: the same but for texts the recorded form is the capped copy
        of (`is_kept_copy_of`), as a session that took it in-process knows it."""
        seen = self._seen
        for index, recorded in list(self._capped_at.items()):
            if index >= len(messages) or index >= len(seen.prints):
                continue
            if _same_or_cut(seen.canonical(index, messages[index]), recorded):
                self.known[index] = seen.prints[index]
                del self._capped_at[index]

    def _new_history_side_call(self, params: Mapping[str, Any], config: SessionConfig) -> bool:
        """Whether a `history="new"` call with a new system is a side call: it gives no tools
        while the conversation has some, or names another model."""
        dropped_tools = bool(config.tools) and not params.get("tools")
        return dropped_tools or params.get("model") != config.model

    def _side_call_kept(
        self, relation: Continuation | None, params: Mapping[str, Any]
    ) -> _SideCall | None:
        """What a side call with a new system leaves for the next call to adopt: its fresh
        messages, when it has the conversation's tools and its messages continue the
        conversation (adding some) or ask again for its last reply; else None."""
        tools = [block_dict(t) for t in params.get("tools") or []]
        if relation is None or not relation.start:
            return None
        if canonical_tools(tools) != canonical_tools(self.session.config.tools):
            return None
        known = len(self.known)
        if relation.relation == "retry":
            return _SideCall(known - 1, (), retry=True)
        fresh = tuple(relation.prints[relation.start :])
        if relation.relation in ("continues", "window") and fresh:
            return _SideCall(known, fresh, retry=False)
        return None

    def _managed_side_call(
        self,
        relation: Continuation | None,
        messages: Sequence[Any],
        params: Mapping[str, Any],
        passthrough: dict[str, Any],
    ) -> tuple[ProviderRequest, dict[str, Any]] | None:
        """The request of a side call whose messages continue the conversation (adding some,
        or asking again for its last reply), with or without the conversation's tools: the
        session's view, then the messages it adds, with its own parameters; None for one
        that does not continue it (sent as given). Nothing is recorded, nothing compacted."""
        if relation is None or (not relation.start and relation.relation != "new"):
            return None
        retry = relation.relation == "retry"
        fresh = messages[relation.start :]
        if not retry and (relation.relation not in ("continues", "window", "new") or not fresh):
            return None
        session = self.session
        read = [
            self._seen.fields(index, message)
            for index, message in enumerate(fresh, start=relation.start)
        ]
        stored = [(role, stored_content(content)) for role, content in read]
        if stored and stored[0][0] == "user" and not retry:
            # The session's answers to the recall calls the last reply left waiting.
            stored[0] = ("user", self._with_recall_answers(session, stored[0][1]))
        view = side_view(session, drop_last_reply=retry)
        messages_out = [*view, *fresh_messages(stored)]
        fields = _config_fields(params)
        recalls = bool(self.recall_ids) and calls_recall(messages_out)
        if fields["tools"]:
            if recalls:
                # The caller must never receive a `recall` call: the session's recall rounds
                # go as text (what was recalled stays for the replies built on it) and recall
                # is not declared. Answering recall inside would need a turn's loop in every
                # side-call path (create, stream, async) for a call that records nothing.
                messages_out = recall_rounds_as_text(messages_out, self.recall_ids)
        elif recalls or holds_tool_blocks(messages_out):
            # The API refuses tool_use/tool_result blocks in a request declaring no tools: a
            # title request without tools over a conversation that used tools goes with the
            # conversation's tools (and recall, when called), none of them to be called.
            # The blocks stay as the model saw them, rather than rewritten as text.
            fields = {**fields, "tools": list(session.config.tools)}
            if recalls:
                fields = with_recall_tool(fields)
            if "tool_choice" not in passthrough:
                passthrough = {**passthrough, "tool_choice": self._no_tool_choice()}
        messages_out = self._fit_side_window(messages_out, len(view), fields, passthrough)
        # The caller's 1-hour markers kept as a turn keeps them (a judge asked every ten
        # minutes reads its cache).
        request = honor_caller_markers(
            side_request(session, messages_out, fields),
            fields["system"],
            fields["tools"],
            self._seen.longest_ttl,
        )
        return request, passthrough

    def _fit_side_window(
        self,
        messages: list[MessageParam],
        view_length: int,
        fields: Mapping[str, Any],
        passthrough: Mapping[str, Any],
    ) -> list[MessageParam]:
        """A side call's messages (the view's `view_length` first) fitting the window of
        the side call's model, output reserved as a turn reserves it (`side_budget`, the
        betas it asks for read from its `betas=` and `anthropic-beta` header): the view cut
        from its oldest rounds when they do not (`fit_side_view`), for this request only;
        nothing is recorded."""
        session = self.session
        model = fields.get("model")
        betas = [
            *_beta_header(passthrough.get("extra_headers")),
            *(str(beta) for beta in passthrough.get("betas") or ()),
        ]
        fit = side_budget(session, model, fields.get("max_tokens"), betas)
        view = messages[:view_length]
        scale = session.calibration
        fitted, left_out = fit_side_view(
            view,
            messages[view_length:],
            fit.budget,
            lambda candidate: side_request_tokens(candidate, fields, scale),
        )
        if left_out:
            logger.info(
                "side call on %s: %d earlier messages of the conversation left out of its "
                "request to fit the %s-token window",
                model,
                left_out,
                f"{fit.window:,}",
            )
        return fitted

    def _no_tool_choice(self) -> Any:
        """The `tool_choice` that lets the model call no tool, in this API's shape."""
        return {"type": "none"}

    def side_kwargs(self, kwargs: Mapping[str, Any], method: Callable[..., Any]) -> dict[str, Any]:
        """The SDK keywords of the side call `begin` just passed: its managed request
        (`_managed_side_call`) with its other keywords, else its keywords as given."""
        managed = self._side_request
        self._side_request = None
        if managed is None:
            return dict(kwargs)
        request, passthrough = managed
        provider = cast(AnthropicProvider, self.provider)
        out = provider.request_kwargs(request, method)
        out.update((k, v) for k, v in passthrough.items() if k != "extra_body")
        extra = passthrough.get("extra_body")
        if isinstance(extra, Mapping):
            out["extra_body"] = {**out.get("extra_body", {}), **extra}
        return _betas_as_header(out, method)

    def _adopts(
        self,
        side: _SideCall,
        messages: Sequence[Any],
        params: Mapping[str, Any],
        verified: int,
    ) -> Continuation | None:
        """How this call continues the conversation through the side call before it, which
        it then adopts: at the side call's place its messages hold the side call's fresh
        ones, an assistant message (the side call's reply) and more; None otherwise. Its
        tools must be the conversation's."""
        tools = [block_dict(t) for t in params.get("tools") or []]
        if canonical_tools(tools) != canonical_tools(self.session.config.tools):
            return None
        try:
            relation = new_messages(
                messages,
                self.known[: side.base],
                self.history,
                self.recall_ids,
                prints=self._seen.prints,
                verified=min(verified, side.base),
            )
        except ConfigError:
            return None
        if relation.relation not in ("continues", "window") or not relation.start:
            return None
        after = relation.prints[relation.start :]
        count = len(side.fresh)
        if len(after) < count + 2 or after[count].role != "assistant":
            return None
        if not all(a.matches(f) for a, f in zip(after, side.fresh, strict=False)):
            return None
        return relation

    def _check_turn(self, passthrough: Mapping[str, Any]) -> None:
        """Refuse (`ConfigError`) what a call recorded as a turn cannot pass to the SDK; a
        side call goes as given, unchecked. Every keyword the Anthropic API takes can."""

    def _sink(self) -> EventSink | None:
        return self._session.events_sink() if self._session is not None else self._events

    def _side_call(self, reason: str, messages: Sequence[Any]) -> None:
        emit(self._sink(), SideCallPassed(reason, len(messages)))

    def _side_call_reason(
        self, relation: Continuation, messages: Sequence[Any], params: Mapping[str, Any]
    ) -> str | None:
        """Why a call with the conversation's system prompt still does not continue it (see
        the module docstring), or None when it does."""
        session = self.session
        if relation.relation == "unrelated":
            if self._sends_history:
                return "no message in common with the conversation"
            if params.get("model") != session.config.model:
                return "a different model and no message in common with the conversation"
            tools = [block_dict(t) for t in params.get("tools") or []]
            if canonical_tools(tools) != canonical_tools(session.config.tools):
                return "different tools and no message in common with the conversation"
        pending = [i for i in session.pending_tool_use_ids() if i not in self.recall_ids]
        fresh = messages[relation.start :]
        if pending and relation.relation != "retry" and fresh:
            answered = {
                str(b.get("tool_use_id"))
                for b in self._seen.canonical(relation.start, fresh[0])
                if b.get("type") == "tool_result"
            }
            if not set(pending) <= answered:
                return "it leaves the tool calls of the last reply unanswered"
        return None

    def _append(self, session: Session, role: str, content: Any) -> None:
        stored = stored_content(content)
        if role == "user":
            stored = self._with_recall_answers(session, stored)
        if role == "assistant":
            blocks = [{"type": "text", "text": stored}] if isinstance(stored, str) else stored
            session.append([Entry.assistant(blocks, model=session.config.model)])
        elif (
            isinstance(stored, list)
            and stored
            and all(b.get("type") == "tool_result" for b in stored)
        ):
            session.add_tool_results(stored)
        else:
            session.add_user(stored)

    def _with_recall_answers(
        self, session: Session, stored: str | list[dict[str, Any]]
    ) -> str | list[dict[str, Any]]:
        """The caller's message with the session's answers to the recall calls it leaves
        waiting (unanswered, or answered by the caller with anything)."""
        if not self.recall_ids.intersection(session.pending_tool_use_ids()):
            return stored  # no recall call waits (the usual turn): the history is not copied
        messages = session.messages
        if not messages or messages[-1]["role"] != "assistant":
            return stored
        last = messages[-1]["content"]
        calls: list[Mapping[str, Any]] = [
            b
            for b in (last if isinstance(last, list) else [])
            if b.get("type") == "tool_use" and b.get("id") in self.recall_ids
        ]
        if not calls:
            return stored
        answers = {str(b.get("id")): session.run_recall(b) for b in calls}
        blocks = [{"type": "text", "text": stored}] if isinstance(stored, str) else list(stored)
        kept = [
            b
            for b in blocks
            if not (b.get("type") == "tool_result" and b.get("tool_use_id") in answers)
        ]
        return [*answers.values(), *kept]

    # -- sending

    def call_kwargs(
        self, request: ProviderRequest, method: Callable[..., Any], passthrough: Mapping[str, Any]
    ) -> dict[str, Any]:
        """SDK keywords: the prepared request plus the caller's other keywords; fields this SDK
        version does not name (`temperature` in recent ones) go through `extra_body`."""
        config = self.session.config
        merged: dict[str, Any] = dict(
            honor_caller_markers(
                request,
                config.system,
                config.tools,
                self._messages_ttl,
                marked_messages=self.session.marked_messages,
            )
        )
        merged.update((k, v) for k, v in passthrough.items() if k != "extra_body")
        provider = cast(AnthropicProvider, self.provider)
        kwargs = provider.request_kwargs(cast(ProviderRequest, merged), method)
        extra = passthrough.get("extra_body")
        if isinstance(extra, Mapping):
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), **extra}
        return _betas_as_header(kwargs, method)

    def messages_api(self, request: ProviderRequest, sdk: Any) -> Any:
        """`sdk.messages`, or `sdk.beta.messages` when the request carries betas."""
        return sdk.beta.messages if request.get("betas") else sdk.messages

    def is_prompt_too_long(self, error: BaseException) -> bool:
        """Whether an SDK exception is the API refusing the prompt as over the window."""
        return isinstance(self.provider.wire.map_error(error), PromptTooLongError)

    @property
    def turn_options(self) -> TurnOptions:
        """How the drop-in runs a turn: recall rounds answered inside (the caller never sees
        them), the SDK's prompt-too-long errors recognized."""
        return TurnOptions(
            recall_rounds=MAX_RECALL_ROUNDS, is_prompt_too_long=self.is_prompt_too_long
        )

    def read_reply(
        self, message: Any, body: Any = None, folded: ModelResponse | None = None
    ) -> ModelResponse:
        """An SDK message (whole, or accumulated from a stream) as the session reads it; its
        `recall` calls are noted as the wrapper's. `body`: the reply's raw JSON, when read,
        so the blocks the library does not read are kept as the server wrote them; `folded`:
        the session's reading already made from the raw events (`message` stays the SDK's
        object, whose `content` the caller sends back)."""
        response = folded if folded is not None else self._response_of(message, body)
        if self.session.offers_recall:
            calls = response.tool_uses
            self.recall_ids.update(
                str(use.get("id")) for use in calls if use.get("name") == RECALL_TOOL_NAME
            )
        self._last_read = (message, response)
        return response

    def _response_of(self, message: Any, body: Any = None) -> ModelResponse:
        """How the session reads an SDK reply: compaction blocks from the raw body (its key
        order is what the server signed and cached; the SDK model's is not)."""
        if isinstance(message, ModelResponse):  # a raw stream's reply, folded by the format
            return message
        wire = cast(AnthropicProvider, self.provider).wire
        if body is None:
            return wire.from_response(message)
        return wire.from_response(message, raw_blocks=wire.raw_compaction_blocks(body))

    def remember_reply(self) -> None:
        """The reply just recorded is what the caller will send back as the assistant turn."""
        if self._last_read is None:
            raise RuntimeError("remember_reply needs a reply read first (read_reply)")
        message, response = self._last_read
        sdk_content = getattr(message, "content", None)
        self.known.append(self._seen.remember_reply(sdk_content, response.content))

    def record(self, message: Any, folded: ModelResponse | None = None) -> None:
        """Record a reply the caller receives as it is (a stream's, once read); `folded`: as
        in `read_reply`."""
        self.session.record(self.read_reply(message, folded=folded))
        self.remember_reply()

    def close_store(self) -> None:
        """Close the store of a session the wrapper opened from a folder (releases its lock),
        and the blocking client's event loop."""
        self.runner.close()
        if self._release_hold is not None:
            self._release_hold()  # once: a second close (or the collection) changes nothing
        if self._owns_session and self._session is not None:
            self._session.close()

    def mark_sent(self) -> None:
        """Remember the cache-safe parameters of the request that just went out."""
        self._sent_params = self._cache_params(self.session.config)


_BYPASSES = {
    "with_streaming_response": (
        "client.messages.with_streaming_response would send the call past the session (not "
        "recorded, not compacted): use client.messages.create(..., stream=True) or "
        "client.messages.stream(...), or client.client.messages for an unmanaged call"
    ),
}


def _refuse_bypass(name: str) -> None:
    reason = _BYPASSES.get(name)
    if reason is not None:
        raise ConfigError(reason)


class Messages:
    """`client.messages` of a wrapped sync client."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, *, raw: bool = False) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._raw = raw

    def _send(self, request: ProviderRequest, passthrough: Mapping[str, Any], *, raw: bool) -> Any:
        pipeline = self._pipeline
        api = pipeline.messages_api(request, self._sdk)
        kwargs = pipeline.call_kwargs(request, api.create, passthrough)
        result = _create_method(api, raw)(**kwargs)
        pipeline.mark_sent()
        return result

    @overload
    def create(self, *, stream: Literal[True], **kwargs: Any) -> RecordingStream: ...

    @overload
    def create(self, *, stream: Literal[False] = False, **kwargs: Any) -> Message: ...

    def create(self, **kwargs: Any) -> Message | RecordingStream:
        """`messages.create` through the pipeline; returns the SDK's `Message` (or stream)."""
        pipeline = self._pipeline
        if self._raw and kwargs.get("stream") is True:
            raise ConfigError(_RAW_STREAM)
        _require_max_tokens(kwargs, "create")
        passthrough = pipeline.begin(kwargs, streaming_helper=False)
        if passthrough is None:
            create = _create_method(self._sdk.messages, self._raw)
            return cast("Message", create(**pipeline.side_kwargs(kwargs, create)))
        flow = turn_flow(pipeline.session, pipeline.turn_options)
        run = pipeline.runner.run

        streams = passthrough.get("stream") is True

        def send(request: ProviderRequest) -> Any:
            # A whole reply is read raw: its body is what the next request sends back.
            return self._send(request, passthrough, raw=not streams)

        if streams:
            return RecordingStream(open_turn_blocking(flow, send, run), pipeline.record)

        def read(result: Any) -> ModelResponse:
            return pipeline.read_reply(result.parse(), result.http_response.json())

        result = drive_turn_blocking(flow, send, read, run)
        pipeline.remember_reply()
        return cast("Message", result if self._raw else result.parse())

    def stream(self, **kwargs: Any) -> StreamManager:
        """`messages.stream` through the pipeline: `with client.messages.stream(...) as s:`."""
        if self._raw:
            raise ConfigError(_RAW_STREAM)
        _require_max_tokens(kwargs, "stream")
        return StreamManager(self._pipeline, self._sdk, dict(kwargs))

    @property
    def with_raw_response(self) -> Messages:
        """`create` through the pipeline, returning the SDK's raw HTTP response (its `parse()`
        is the `Message`, recorded here)."""
        return Messages(self._pipeline, self._sdk, raw=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        _refuse_bypass(name)
        messages = self._sdk.messages
        return getattr(messages.with_raw_response if self._raw else messages, name)


class AsyncMessages:
    """`client.messages` of a wrapped async client."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, *, raw: bool = False) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._raw = raw

    async def _send(
        self, request: ProviderRequest, passthrough: Mapping[str, Any], *, raw: bool
    ) -> Any:
        pipeline = self._pipeline
        api = pipeline.messages_api(request, self._sdk)
        kwargs = pipeline.call_kwargs(request, api.create, passthrough)
        result = await _create_method(api, raw)(**kwargs)
        pipeline.mark_sent()
        return result

    @overload
    async def create(self, *, stream: Literal[True], **kwargs: Any) -> AsyncRecordingStream: ...

    @overload
    async def create(self, *, stream: Literal[False] = False, **kwargs: Any) -> Message: ...

    async def create(self, **kwargs: Any) -> Message | AsyncRecordingStream:
        """`messages.create` through the pipeline; returns the SDK's `Message` (or stream)."""
        pipeline = self._pipeline
        if self._raw and kwargs.get("stream") is True:
            raise ConfigError(_RAW_STREAM)
        _require_max_tokens(kwargs, "create")
        passthrough = pipeline.begin(kwargs, streaming_helper=False)
        if passthrough is None:
            create = _create_method(self._sdk.messages, self._raw)
            return cast("Message", await create(**pipeline.side_kwargs(kwargs, create)))
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        streams = passthrough.get("stream") is True

        async def send(request: ProviderRequest) -> Any:
            # A whole reply is read raw: its body is what the next request sends back.
            return await self._send(request, passthrough, raw=not streams)

        if streams:
            return AsyncRecordingStream(await open_turn(flow, send), pipeline.record)

        async def read(result: Any) -> ModelResponse:
            return pipeline.read_reply(await _parsed(result), result.http_response.json())

        result = await drive_turn(flow, send, read)
        pipeline.remember_reply()
        return cast("Message", result if self._raw else await _parsed(result))

    def stream(self, **kwargs: Any) -> AsyncStreamManager:
        """`messages.stream` through the pipeline: `async with client.messages.stream(...)`."""
        if self._raw:
            raise ConfigError(_RAW_STREAM)
        _require_max_tokens(kwargs, "stream")
        return AsyncStreamManager(self._pipeline, self._sdk, dict(kwargs))

    @property
    def with_raw_response(self) -> AsyncMessages:
        """`create` through the pipeline, returning the SDK's raw HTTP response."""
        return AsyncMessages(self._pipeline, self._sdk, raw=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        _refuse_bypass(name)
        messages = self._sdk.messages
        return getattr(messages.with_raw_response if self._raw else messages, name)


_RAW_STREAM = (
    "with_raw_response.create(stream=True) and with_raw_response.stream are not supported by "
    "the wrapper: use client.messages.create(..., stream=True) or client.messages.stream(...)"
)


def _create_method(messages_api: Any, raw: bool) -> Any:
    return messages_api.with_raw_response.create if raw else messages_api.create


async def _parsed(raw: Any) -> Any:
    """The SDK object of an async raw response (`parse()` is a coroutine in recent SDKs, a
    value in older ones; the SDK keeps what it parsed)."""
    parsed = raw.parse()
    return await parsed if inspect.isawaitable(parsed) else parsed


_CLIENT_BYPASS_ADVICE = (
    "would send calls past the session (not recorded, not compacted): use "
    "client.messages.with_raw_response for a raw response, or client.client for unmanaged calls"
)


class UnboundedAnthropic(SyncWrappedClient[ClientPipeline]):
    """An `anthropic.Anthropic` whose `messages.create/stream` run the unbounded pipeline."""

    bypass_advice = _CLIENT_BYPASS_ADVICE

    def __init__(self, pipeline: ClientPipeline, sdk: Any | None = None) -> None:
        super().__init__(pipeline, sdk)
        self.messages = Messages(pipeline, self._sdk)


class AsyncUnboundedAnthropic(AsyncWrappedClient[ClientPipeline]):
    """An `anthropic.AsyncAnthropic` whose `messages.create/stream` run the unbounded pipeline."""

    bypass_advice = _CLIENT_BYPASS_ADVICE

    def __init__(self, pipeline: ClientPipeline, sdk: Any | None = None) -> None:
        super().__init__(pipeline, sdk)
        self.messages = AsyncMessages(pipeline, self._sdk)


@overload
def wrap_anthropic(
    client: anthropic.AsyncAnthropic,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> AsyncUnboundedAnthropic: ...


@overload
def wrap_anthropic(
    client: anthropic.Anthropic,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> UnboundedAnthropic: ...


def wrap_anthropic(
    client: anthropic.Anthropic | anthropic.AsyncAnthropic,
    session: Session | SyncSession | None = None,
    *,
    session_folder: str | Path | None = None,
    model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    summarizer: Provider | SummarizerChoice | None = None,
    events: EventSink | None = None,
    history: HistoryMode = "auto",
    **session_options: Any,
) -> UnboundedAnthropic | AsyncUnboundedAnthropic:
    """Wrap an Anthropic SDK client so its `messages.create/stream` run one unbounded session.

    `session` (a Session you built) or `session_folder` (opened, or resumed when it exists;
    without either the session lives in memory). `model`/`context_window` open the session
    now instead of at the first call. `policy`, `events`, `summarizer` (default: the wrapped
    client, or the one in `options=SessionOptions(...)`; not both) and any other `Session`
    keyword apply to a session the wrapper opens; `summarizer` and `policy` also replace those
    of a session you give (`events` or any other `Session` keyword beside it is a
    ConfigError: the session was built with its own).
    `history`: see the module docstring.
    """
    try:
        import anthropic
    except ImportError:
        raise ConfigError(
            "wrap() needs the anthropic SDK: pip install 'unbounded[anthropic]'"
        ) from None
    check_wrap_keywords(wrap_anthropic, policy, session_options)
    given = bound_session(
        session, session_folder=session_folder, model=model, context_window=context_window
    )
    if isinstance(client, anthropic.AsyncAnthropic):
        wrapper: type[UnboundedAnthropic] | type[AsyncUnboundedAnthropic] = AsyncUnboundedAnthropic
    elif isinstance(client, anthropic.Anthropic):
        wrapper = UnboundedAnthropic
    else:
        raise ConfigError(
            f"wrap() takes an anthropic.Anthropic, anthropic.AsyncAnthropic, openai.OpenAI or "
            f"openai.AsyncOpenAI client, not {type(client).__name__}"
        )
    if wrapper is UnboundedAnthropic:
        refuse_blocking_background_summary(given, policy, session_options)
    pipeline = ClientPipeline(
        client,
        given,
        folder=session_folder,
        model=model,
        context_window=context_window,
        policy=policy,
        summarizer=summarizer,
        events=events,
        history=history,
        session_options=session_options,
        blocking=BLOCKING_DROP_IN if wrapper is UnboundedAnthropic else None,
    )
    return wrapper(pipeline)


# Content, markers, prints and streams live in the `_anthropic_*` modules; listed here are the
# drop-in and the types its methods take and return.
__all__ = [
    "CACHE_SAFE_PARAMETERS",
    "AsyncRecordingStream",
    "AsyncStreamManager",
    "AsyncUnboundedAnthropic",
    "HistoryMode",
    "RecordingStream",
    "StreamManager",
    "UnboundedAnthropic",
    "wrap_anthropic",
]
