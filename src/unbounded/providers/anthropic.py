"""The Anthropic provider: a `ProviderRequest` through the official `anthropic` SDK.

The request and reply mapping and the error mapping are the `AnthropicMessages` wire format
(`unbounded.wire.anthropic`); this module holds the SDK clients (`SdkClients`, shared with the
OpenAI provider) and makes the calls: `client.beta.messages` when the request has `betas`,
streamed when asked or when the SDK requires it for a large `max_tokens`.

The SDK is an optional extra (`pip install unbounded[anthropic]`): it is imported when a
provider is built, never when this module is imported.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from unbounded.errors import ConfigError
from unbounded.model.profile import ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import call_with_heartbeat
from unbounded.providers.base import (
    Heartbeat,
    ModelResponse,
    ProviderError,
    SdkProvider,
)
from unbounded.wire.anthropic import NO_API_KEY, AnthropicMessages, AnthropicStreamAssembler
from unbounded.wire.context_edits import ANTHROPIC_CONTEXT_EDITS
from unbounded.wire.sse import SseDecoder

if TYPE_CHECKING:
    import anthropic

DEFAULT_HEARTBEAT_INTERVAL = 30.0
"""Seconds between heartbeat calls while a model call runs."""


def with_tools_declared(request: ProviderRequest) -> ProviderRequest:
    """`request`, or a copy declaring the tools its messages call when it declares none: the
    API refuses tool_use / tool_result blocks in a request without tools (a summary or a
    probe over a conversation sent without the agent's tools). Declared with an open schema
    and `tool_choice` none, they cannot be called."""
    if request.get("tools"):
        return request
    names: dict[str, None] = {}
    results = False
    for message in request.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names[str(block.get("name") or "tool")] = None
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                results = True
    if not names and not results:
        return request
    declared = [
        {"name": name, "input_schema": {"type": "object"}} for name in names or {"tool": None}
    ]
    return {**request, "tools": declared, "tool_choice": {"type": "none"}}


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError:
        raise ConfigError(
            "the Anthropic provider needs the anthropic SDK: pip install 'unbounded[anthropic]'"
        ) from None
    return anthropic


def _signature_names(method: Callable[..., Any]) -> frozenset[str]:
    """Keyword names `method` accepts ("*" when it takes **kwargs)."""
    return _function_parameters(getattr(method, "__func__", method))


@functools.lru_cache(maxsize=64)
def _function_parameters(method: Callable[..., Any]) -> frozenset[str]:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - C callables, mocks without a spec
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return frozenset(p.name for p in parameters) | {"*"}
    return frozenset(p.name for p in parameters)


def _has_credentials(client: Any) -> bool:
    """Whether an Anthropic client has a key, a token or a credentials provider to send."""
    return any(getattr(client, name, None) for name in ("api_key", "auth_token", "credentials"))


def _streaming_required(exc: BaseException) -> bool:
    """The SDK's refusal to send `max_tokens` this large without streaming (a request that
    could run past its 10-minute non-streaming timeout); raised before anything is sent."""
    return isinstance(exc, ValueError) and "Streaming is required" in str(exc)


@functools.lru_cache(maxsize=4)
def _shared_ssl_context(http_module: str) -> Any:
    """One default SSL context per HTTP library: building one costs ~50 ms, sharing is safe."""
    return importlib.import_module(http_module).create_ssl_context()


def _fresh_async_http(sdk: Any) -> Any:
    """A new default async HTTP client for `sdk` (its own pool, the shared SSL context)."""
    factory = sdk.DefaultAsyncHttpxClient
    base = next((c for c in factory.__mro__ if c.__name__ == "AsyncClient"), None)
    module = base.__module__.split(".")[0] if base is not None else ""
    if module.startswith("httpx"):
        return factory(verify=_shared_ssl_context(module))
    return factory()  # pragma: no cover - an SDK on another HTTP library


class SdkClients:
    """The SDK clients a provider calls through, kept safe across event loops.

    An async SDK client holds a connection pool bound to the event loop it first ran on, so:
    a caller's async client is used as is on that loop and, on any other loop (the sync
    facade's, a second `asyncio.run`), a copy with a fresh pool is borrowed for the call;
    clients the provider built itself are rebuilt per loop. A caller's sync client runs in a
    worker thread.
    """

    def __init__(
        self,
        sdk: Any,
        async_class: str,
        sync_class: str,
        client: Any,
        options: dict[str, Any] | None,
    ) -> None:
        self._sdk = sdk
        self._async_class = getattr(sdk, async_class)
        self._sync_class = getattr(sdk, sync_class)
        self._options = options
        self._async: Any = None
        self._sync: Any = None
        self._home: weakref.ref[asyncio.AbstractEventLoop] | None = None
        if client is None:
            if options is None:
                raise ConfigError("give a client or the options to build one")
        elif isinstance(client, self._async_class):
            self._async = client
        elif isinstance(client, self._sync_class):
            self._sync = client
        else:
            raise ConfigError(f"expected a {sdk.__name__}.{async_class} or {sync_class} client")

    def build(self, want_async: bool) -> Any:
        """A new client from the constructor options."""
        factory = self._async_class if want_async else self._sync_class
        return factory(**(self._options or {}))

    def acquire(self, want_async: bool) -> tuple[Any, bool, bool]:
        """(client, is_async, borrowed) for a call on the running loop; close borrowed ones."""
        loop = asyncio.get_running_loop()
        home = self._home() if self._home is not None else None
        if self._options is None:  # the caller's client
            if self._async is None:
                return self._sync, False, False
            if want_async and (self._home is None or home is loop):
                self._home = weakref.ref(loop)
                return self._async, True, False
            return self._async.copy(http_client=_fresh_async_http(self._sdk)), True, True
        if not want_async:
            if self._sync is None:
                self._sync = self.build(False)
            return self._sync, False, False
        if self._async is None or (home is not loop and self._home is not None):
            self._async = self.build(True)
        self._home = weakref.ref(loop)
        return self._async, True, False

    def prebuild(self) -> Any:
        """Build the async client now (not yet bound to a loop), so bad options fail early;
        returns it."""
        if self._options is not None and self._async is None:
            self._async = self.build(True)
        return self._async


# --------------------------------------------------------------------------- the provider


class AnthropicProvider(SdkProvider):
    """Sends `ProviderRequest`s to Claude with the official SDK (async or sync client)."""

    name = "anthropic"
    profile = ProviderProfile(native_context_edits=ANTHROPIC_CONTEXT_EDITS)
    """Its API compacts and edits context on the server (`compaction.native`)."""

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | anthropic.Anthropic | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 0,
        supports_cache_edits: bool = False,
        heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
    ) -> None:
        self._sdk = _import_sdk()
        self.supports_cache_edits = supports_cache_edits
        self.wire = AnthropicMessages(cache_edits=supports_cache_edits)
        """The Messages format the requests and replies go through."""
        self.heartbeat_interval = heartbeat_interval
        options: dict[str, Any] | None = None
        if client is None:
            options = {"max_retries": max_retries}
            if api_key is not None:
                options["api_key"] = api_key
            if base_url is not None:
                options["base_url"] = base_url
            if timeout is not None:
                options["timeout"] = timeout
        self._clients = SdkClients(self._sdk, "AsyncAnthropic", "Anthropic", client, options)
        # Fail here, not with a puzzling error at the first call, when no key is set.
        if client is None and not _has_credentials(self._clients.prebuild()):
            raise ConfigError(NO_API_KEY)

    # -- calls

    def request_kwargs(
        self, request: ProviderRequest, method: Callable[..., Any]
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK `method` (`create` or `stream`) for `request`."""
        return self.wire.to_request(
            with_tools_declared(request), stream=False, accepted=_signature_names(method)
        )

    def _messages_api(self, client: Any, request: ProviderRequest) -> Any:
        return client.beta.messages if self.wire.betas(request) else client.messages

    async def _create(
        self,
        request: ProviderRequest,
        *,
        stream: bool,
        heartbeat: Heartbeat | None,
        want_async: bool,
    ) -> ModelResponse:
        client, is_async, borrowed = self._clients.acquire(want_async)
        api = self._messages_api(client, request)
        seen: dict[str, Any] = {}
        call: Awaitable[ModelResponse]
        if is_async:
            call = (
                self._stream_async(api, request, seen)
                if stream
                else self._once_async(api, request, seen)
            )
        else:
            call = asyncio.to_thread(
                self._stream_sync if stream else self._once_sync, api, request, seen
            )
        try:
            return await call_with_heartbeat(call, heartbeat, self.heartbeat_interval)
        except ProviderError as error:
            if error.request_id is None:
                error.request_id = seen.get("request_id")
            raise
        except Exception as exc:
            mapped = self.wire.map_error(exc)
            if mapped is None:
                raise
            if mapped.request_id is None:
                mapped.request_id = seen.get("request_id")
            raise mapped from exc
        finally:
            if borrowed:
                await client.close()

    # Replies are read from their raw JSON (the body, or the stream's raw events) so that a
    # compaction block keeps the server's bytes (`unbounded.wire.anthropic`).

    def _reply(self, raw: Any, message: Any) -> ModelResponse:
        blocks = self.wire.raw_compaction_blocks(raw.http_response.json())
        return self.wire.from_response(message, raw_blocks=blocks)

    async def _once_async(
        self, api: Any, request: ProviderRequest, seen: dict[str, Any]
    ) -> ModelResponse:
        try:
            raw = await api.with_raw_response.create(**self.request_kwargs(request, api.create))
        except ValueError as exc:
            if not _streaming_required(exc):
                raise
            return await self._stream_async(api, request, seen)
        message = raw.parse()  # awaitable on the SDK's async responses
        return self._reply(raw, await message if inspect.isawaitable(message) else message)

    def _once_sync(
        self, api: Any, request: ProviderRequest, seen: dict[str, Any]
    ) -> ModelResponse:
        try:
            raw = api.with_raw_response.create(**self.request_kwargs(request, api.create))
        except ValueError as exc:
            if not _streaming_required(exc):
                raise
            return self._stream_sync(api, request, seen)
        return self._reply(raw, raw.parse())

    async def _stream_async(
        self, api: Any, request: ProviderRequest, seen: dict[str, Any]
    ) -> ModelResponse:
        kwargs = {**self.request_kwargs(request, api.create), "stream": True}
        async with api.with_streaming_response.create(**kwargs) as raw:
            fold, decoder = self._open_stream(raw, seen)
            async for line in raw.iter_lines():
                self._take(fold, decoder.feed(line), raw, seen)
                if fold.stopped or decoder.finished:  # the connection may stay open after it
                    break
            return fold.finish(seen.get("request_id"))

    def _stream_sync(
        self, api: Any, request: ProviderRequest, seen: dict[str, Any]
    ) -> ModelResponse:
        kwargs = {**self.request_kwargs(request, api.create), "stream": True}
        with api.with_streaming_response.create(**kwargs) as raw:
            fold, decoder = self._open_stream(raw, seen)
            for line in raw.iter_lines():
                self._take(fold, decoder.feed(line), raw, seen)
                if fold.stopped or decoder.finished:  # the connection may stay open after it
                    break
            return fold.finish(seen.get("request_id"))

    def _open_stream(
        self, raw: Any, seen: dict[str, Any]
    ) -> tuple[AnthropicStreamAssembler, SseDecoder]:
        seen["request_id"] = raw.headers.get("request-id")
        return self.wire.stream_assembler(), SseDecoder()

    def _take(
        self,
        fold: AnthropicStreamAssembler,
        event: dict[str, Any] | None,
        raw: Any,
        seen: dict[str, Any],
    ) -> None:
        """Fold one raw event; an `error` event raises its error."""
        if event is None:
            return
        if event.get("type") == "error":
            raise self.wire.stream_error(event, seen.get("request_id"), raw.headers)
        fold.add(event)
