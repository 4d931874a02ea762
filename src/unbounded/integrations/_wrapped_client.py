"""What every wrapped SDK client shares, whichever SDK it wraps: the session it is bound to,
the SDK client underneath (its other attributes passed through, the ones that would bypass
the session refused), `with_options` / `copy`, and closing (`close`, `with` / `async with`). The
Anthropic and OpenAI drop-ins specialize these classes only by the endpoints they manage."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from typing_extensions import Self

from unbounded.blocking import BlockingDriver, BlockingRunner
from unbounded.compaction.conversation import CompactionResult
from unbounded.errors import ConfigError
from unbounded.integrations._support import as_session
from unbounded.model.response import Provider
from unbounded.policy import Policy
from unbounded.session import Session, SessionStatus
from unbounded.session_options import SessionOptions, chosen_policy
from unbounded.sync_session import SyncSession


class ClientSide(Protocol):
    """What a wrapped client needs of its pipeline (`ClientPipeline` is one), so this module
    does not import the drop-ins that build on it."""

    @property
    def session(self) -> Session:
        """The session the client runs."""
        ...

    @property
    def client(self) -> Any:
        """The SDK client `wrap()` was given."""
        ...

    @property
    def opened_session(self) -> Session | None:
        """The session, or None before the first call opens it."""
        ...

    @property
    def runner(self) -> BlockingRunner:
        """The event loop the blocking client's calls run the pipeline on."""
        ...

    def close_store(self) -> None:
        """Release what the wrapper opened (the session folder's lock, its event loop)."""
        ...


PipelineT = TypeVar("PipelineT", bound=ClientSide)

_CLIENT_BYPASSES = ("with_raw_response", "with_streaming_response")
"""The client's attributes that would send calls past the session."""


def bound_session(
    session: Session | SyncSession | None,
    *,
    session_folder: str | Path | None,
    model: str | None,
    context_window: int | None,
) -> Session | None:
    """The session `wrap()` binds the client to (None: the wrapper opens one), its arguments
    checked: a session you give comes with its own folder, model and window."""
    if session is not None and session_folder is not None:
        raise ConfigError("give wrap() a session or a session_folder, not both")
    if session is not None and (model is not None or context_window is not None):
        raise ConfigError("model and context_window come from the session you gave wrap()")
    return as_session(session) if session is not None else None


def refuse_unknown_options(
    session_options: Mapping[str, Any], own: list[str], prefix: str = "", whose: str = "the"
) -> None:
    """A `TypeError`, as a wrong keyword is, for each of `session_options` that is neither
    one of `own` (the entry point's options) nor a `Session` option, with the closest name
    and both lists."""
    known = [field.name for field in dataclasses.fields(SessionOptions)]
    unknown = sorted(set(session_options) - {*known, "options"})
    if not unknown:
        return
    close = {
        name: match[0]
        for name in unknown
        if (match := difflib.get_close_matches(name, [*own, *known], n=1))
    }
    hint = "".join(f" ({name}: did you mean {close[name]}?)" for name in close)
    raise TypeError(
        f"{prefix}unknown option(s) {', '.join(unknown)}{hint}; {whose} options are: "
        f"{', '.join(own)}; and Session's: "
        f"{', '.join([*(name for name in known if name not in own), 'options'])}"
    )


def check_wrap_keywords(
    entry: Callable[..., Any], policy: object, session_options: Mapping[str, Any]
) -> None:
    """Refuse at `wrap()` what its first call would: a keyword neither wrap() (`entry`, the
    wrap function) nor `Session` takes (`TypeError`, as a wrong keyword is, naming both lists)
    and a `policy` that is no `Policy` (`ConfigError`)."""
    own = [
        name
        for name, parameter in inspect.signature(entry).parameters.items()
        if name != "client" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    refuse_unknown_options(session_options, own, "wrap() got ", "wrap()'s")
    if policy is not None and not isinstance(policy, Policy):
        raise ConfigError(
            f"wrap() policy must be a Policy (Policy(...), or Policy.from_file(PATH) for a "
            f"policy file), not {type(policy).__name__} {policy!r}"
        )


def check_wrap_options(
    *, model: object, context_window: object, summarizer: object, events: object
) -> None:
    """Refuse at `wrap()` (`ConfigError`, naming the option and its fix) the option values its
    first call, first event or first compaction would trip over."""
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(
            f"wrap() model must be a model name (a str such as 'claude-sonnet-4-6'), not "
            f"{type(model).__name__} {model!r}"
        )
    if context_window is not None and (type(context_window) is not int or context_window <= 0):
        raise ConfigError(
            f"wrap() context_window must be a positive int (tokens, e.g. 200_000), not "
            f"{type(context_window).__name__} {context_window!r}"
        )
    named = isinstance(summarizer, str) and summarizer in ("client", "extractive")
    if summarizer is not None and not named and not isinstance(summarizer, Provider):
        raise ConfigError(
            f"wrap() summarizer must be 'client', 'extractive' or a Provider (an object with "
            f"name, supports_cache_edits, profile and create()), not "
            f"{type(summarizer).__name__} {summarizer!r}"
        )
    if events is not None and not callable(events):
        raise ConfigError(
            f"wrap() events must be a callable taking each Event (events.append, or a "
            f"function), not {type(events).__name__} {events!r}"
        )


BLOCKING_DROP_IN = BlockingDriver(
    "a drop-in wrapping a blocking SDK client",
    "wrap the SDK's async client (anthropic.AsyncAnthropic, openai.AsyncOpenAI)",
)
"""The blocking drop-ins' name and advice when they refuse `Policy.background_summary`."""


def refuse_blocking_background_summary(
    session: Session | None, policy: Policy | None, session_options: Mapping[str, Any]
) -> None:
    """ConfigError when `wrap()` of a blocking SDK client would run `Policy.background_summary`
    (the session's given, else the policy it opens one with: `policy`, else the one in the
    `options=` among `session_options`, else the environment's), before anything is opened."""
    if session is not None:
        chosen = session.policy
    elif policy is not None:
        chosen = policy
    else:
        given = session_options.get("options")
        chosen = chosen_policy(given if isinstance(given, SessionOptions) else SessionOptions())
    BLOCKING_DROP_IN.refuse_background_summary(chosen)


def session_option(session_options: Mapping[str, Any], name: str) -> Any:
    """A `Session` option among `wrap()`'s session keywords: given as a keyword, else in
    their `options=SessionOptions(...)`; None when neither sets it."""
    if session_options.get(name) is not None:
        return session_options[name]
    given = session_options.get("options")
    return getattr(given, name) if isinstance(given, SessionOptions) else None


def summarizer_in_options(
    summarizer: object, session_options: Mapping[str, Any]
) -> Provider | None:
    """The summarizer of the `options=` (a `SessionOptions`) among `wrap()`'s session keywords,
    which a session the wrapper opens keeps (None: none there). Given there and as `wrap()`'s
    own `summarizer=` too, it is a ConfigError: which one should write the summaries?"""
    chosen: Provider | None = session_option(session_options, "summarizer")
    if chosen is not None and summarizer is not None:
        raise ConfigError(
            "wrap() got a summarizer twice, as summarizer= and in options=SessionOptions("
            "summarizer=...): give it in one place"
        )
    return chosen


class WrappedClient(Generic[PipelineT]):
    """A wrapped SDK client: its pipeline (the session side) and the SDK client its calls go
    through. `with_options` gives the same conversation on the SDK's `with_options` copy."""

    bypass_advice: ClassVar[str]
    """Why `client.with_raw_response` and the like are refused, and what to use instead
    (the error names the attribute first)."""

    def __init__(self, pipeline: PipelineT, sdk: Any | None = None) -> None:
        self._pipeline = pipeline
        self._sdk = sdk if sdk is not None else pipeline.client

    @property
    def session(self) -> Session:
        """The unbounded session behind this client."""
        return self._pipeline.session

    @property
    def client(self) -> Any:
        """The SDK client underneath (calls on it bypass the pipeline)."""
        return self._sdk

    def status(self) -> SessionStatus:
        """Tokens, percent left and warning level of the conversation now."""
        return self._pipeline.session.status()

    def idle_deadline(self) -> datetime | None:
        """When the host, idle since the last reply, should call `idle()` (`Session.idle_deadline`:
        a share of the cache TTL after that reply); None before the session has a reply."""
        session = self._pipeline.opened_session
        return None if session is None else session.idle_deadline()

    def with_options(self, **options: Any) -> Self:
        """The SDK's `with_options` (timeout, retries, headers…) on the same conversation."""
        return type(self)(self._pipeline, self._sdk.with_options(**options))

    def copy(self, **options: Any) -> Self:
        """The SDK's `copy` (same as `with_options`) on the same conversation."""
        return self.with_options(**options)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _CLIENT_BYPASSES:
            raise ConfigError(f"client.{name} {self.bypass_advice}")
        return getattr(self._sdk, name)


class SyncWrappedClient(WrappedClient[PipelineT]):
    """A wrapped blocking client: `close()` or `with` releases the session and the SDK client."""

    def idle(self) -> CompactionResult | None:
        """Compact the idle conversation when that costs less than resuming it would
        (`Session.idle`); None when it does not pay, or before the session is opened."""
        session = self._pipeline.opened_session
        return None if session is None else self._pipeline.runner.run(session.idle())

    def close(self) -> None:
        """Release the session folder the wrapper opened (its lock) and the SDK client."""
        self._pipeline.close_store()
        self._pipeline.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncWrappedClient(WrappedClient[PipelineT]):
    """A wrapped async client: `await close()` or `async with` releases the session and the
    SDK client."""

    async def idle(self) -> CompactionResult | None:
        """Compact the idle conversation when that costs less than resuming it would
        (`Session.idle`); None when it does not pay, or before the session is opened."""
        session = self._pipeline.opened_session
        return None if session is None else await session.idle()

    async def close(self) -> None:
        """Release the session folder the wrapper opened (its lock) and the SDK client."""
        self._pipeline.close_store()
        await self._pipeline.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


__all__ = [
    "BLOCKING_DROP_IN",
    "AsyncWrappedClient",
    "ClientSide",
    "SyncWrappedClient",
    "WrappedClient",
    "bound_session",
    "check_wrap_keywords",
    "check_wrap_options",
    "refuse_blocking_background_summary",
    "session_option",
    "summarizer_in_options",
]
