"""The Anthropic provider: a `ProviderRequest` through the official `anthropic` SDK.

The request is already in Messages API shape, so the mapping is direct: every field the SDK
method accepts is passed as a keyword (model, max_tokens, system, tools, messages, thinking,
metadata, tool_choice…), and fields this SDK version does not name (`temperature` in recent
versions, `context_management` outside the beta endpoint) go through `extra_body`, so the
wire body is the same whatever the SDK version. `betas` selects `client.beta.messages` and
becomes the `anthropic-beta` header. `cache_edits` is dropped unless the provider was built
with `supports_cache_edits=True`, and then sent as a top-level `cache_edits` body field.

SDK errors are mapped onto the hierarchy in `unbounded.providers.base`. The SDK is an optional
extra (`pip install unbounded[anthropic]`): it is imported when a provider is built, never when
this module is imported.

`retry_after_seconds` is shared with the OpenAI provider, and so is `call_with_heartbeat`
(defined in `unbounded.model.response`, importable from here).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import importlib
import inspect
import json
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from unbounded.errors import ConfigError
from unbounded.model.content import ContentBlock, Usage
from unbounded.model.request import ProviderRequest
from unbounded.model.response import call_with_heartbeat as call_with_heartbeat
from unbounded.providers.base import (
    AuthenticationError,
    BadRequestError,
    Heartbeat,
    ModelResponse,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    SdkProvider,
    ServerError,
    is_prompt_too_long_message,
    parse_prompt_too_long,
)

if TYPE_CHECKING:
    import anthropic

T = TypeVar("T")

DEFAULT_HEARTBEAT_INTERVAL = 30.0
"""Seconds between heartbeat calls while a model call runs."""

_UNBOUNDED_ONLY = ("betas", "cache_edits")

NO_API_KEY = (
    "no Anthropic API key: set ANTHROPIC_API_KEY in the environment, or pass "
    "AnthropicProvider(api_key=...) or a client of your own"
)
"""What a call without any credentials fails with."""


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError:
        raise ConfigError(
            "the Anthropic provider needs the anthropic SDK: pip install 'unbounded[anthropic]'"
        ) from None
    return anthropic


# --------------------------------------------------------------------------- shared helpers


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _response_headers(exc: BaseException) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return cast("Mapping[str, str] | None", headers)


def is_transport_error(exc: BaseException) -> bool:
    """Whether `exc` comes from the HTTP stack (httpx/httpcore, any major version)."""
    return any(cls.__module__.startswith(("httpx", "httpcore")) for cls in type(exc).__mro__)


def _error_details(body: Any) -> tuple[str | None, str | None]:
    """(error type, message) from an Anthropic error body."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            kind, message = error.get("type"), error.get("message")
            return (
                kind if isinstance(kind, str) else None,
                message if isinstance(message, str) else None,
            )
    return None, None


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


def _is_missing_credentials(exc: BaseException) -> bool:
    """The SDK's refusal to send a request that has no authentication at all."""
    return isinstance(exc, TypeError) and "Could not resolve authentication method" in str(exc)


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

    # -- request mapping

    def request_kwargs(
        self, request: ProviderRequest, method: Callable[..., Any]
    ) -> dict[str, Any]:
        """SDK keyword arguments for `method`: accepted fields by name, the rest in extra_body."""
        accepted = _signature_names(method)
        kwargs: dict[str, Any] = {}
        extra_body: dict[str, Any] = {}
        for key, value in request.items():
            if key in _UNBOUNDED_ONLY:
                continue
            if key in accepted or "*" in accepted:
                kwargs[key] = value
            else:
                extra_body[key] = value
        if request.get("betas"):
            kwargs["betas"] = list(request["betas"])
        if self.supports_cache_edits and request.get("cache_edits"):
            extra_body["cache_edits"] = [dict(edit) for edit in request["cache_edits"]]
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    def _messages_api(self, client: Any, request: ProviderRequest) -> Any:
        return client.beta.messages if request.get("betas") else client.messages

    # -- calls

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
        call: Awaitable[Any]
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
            message = await call_with_heartbeat(call, heartbeat, self.heartbeat_interval)
        except ProviderError:
            raise
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            if mapped.request_id is None:
                mapped.request_id = seen.get("request_id")
            raise mapped from exc
        finally:
            if borrowed:
                await client.close()
        return self.to_response(message)

    async def _once_async(self, api: Any, request: ProviderRequest, seen: dict[str, Any]) -> Any:
        try:
            return await api.create(**self.request_kwargs(request, api.create))
        except ValueError as exc:
            if not _streaming_required(exc):
                raise
        return await self._stream_async(api, request, seen)

    def _once_sync(self, api: Any, request: ProviderRequest, seen: dict[str, Any]) -> Any:
        try:
            return api.create(**self.request_kwargs(request, api.create))
        except ValueError as exc:
            if not _streaming_required(exc):
                raise
        return self._stream_sync(api, request, seen)

    async def _stream_async(self, api: Any, request: ProviderRequest, seen: dict[str, Any]) -> Any:
        async with api.stream(**self.request_kwargs(request, api.stream)) as events:
            seen["request_id"] = getattr(events, "request_id", None)
            async for event in events:
                seen["last"] = event.type
            self._check_complete(seen)
            return await events.get_final_message()

    def _stream_sync(self, api: Any, request: ProviderRequest, seen: dict[str, Any]) -> Any:
        with api.stream(**self.request_kwargs(request, api.stream)) as events:
            seen["request_id"] = getattr(events, "request_id", None)
            for event in events:
                seen["last"] = event.type
            self._check_complete(seen)
            return events.get_final_message()

    @staticmethod
    def _check_complete(seen: dict[str, Any]) -> None:
        if seen.get("last") != "message_stop":
            raise ServerError(
                "the stream ended before message_stop (connection cut mid-reply)",
                request_id=seen.get("request_id"),
            )

    # -- response mapping

    def to_response(self, message: Any) -> ModelResponse:
        """A ModelResponse from an SDK `Message` (or `BetaMessage`)."""
        return ModelResponse(
            content=[_block(b) for b in message.content],
            stop_reason=message.stop_reason,
            usage=_usage(message.usage),
            model=str(message.model),
            id=str(message.id),
            raw=message.model_dump(mode="json"),
        )

    # -- error mapping

    def map_error(self, exc: BaseException) -> ProviderError | None:
        """The unbounded error for an SDK or transport exception (None: not a provider error)."""
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            return _status_error(
                exc.status_code,
                exc.body,
                str(exc),
                request_id=exc.request_id,
                headers=_response_headers(exc),
            )
        if isinstance(exc, sdk.APITimeoutError):
            return ServerError(f"request timed out: {exc}")
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__
            return ServerError(f"connection error: {cause or exc}")
        if isinstance(exc, sdk.APIResponseValidationError):
            return ServerError(f"malformed response: {exc}", status=exc.status_code, body=exc.body)
        if is_transport_error(exc):
            return ServerError(f"connection error: {type(exc).__name__}: {exc}")
        if isinstance(exc, json.JSONDecodeError):
            return ServerError(f"malformed response (not JSON): {exc}")
        if _is_missing_credentials(exc):
            return AuthenticationError(NO_API_KEY, status=None)
        if isinstance(exc, ValueError):
            text = str(exc)
            if "Unable to parse" in text:
                return ServerError(f"malformed response: {text}")
            return BadRequestError(text, status=None)
        credentials_error = getattr(sdk, "CredentialsError", None)
        if credentials_error is not None and isinstance(exc, credentials_error):
            return AuthenticationError(str(exc), status=None)
        if isinstance(exc, RuntimeError) and "Unexpected event order" in str(exc):
            return ServerError(f"malformed stream: {exc}")
        return None


def _status_error(
    status: int,
    body: Any,
    text: str,
    *,
    request_id: str | None,
    headers: Mapping[str, str] | None,
) -> ProviderError:
    kind, api_message = _error_details(body)
    message = api_message or text
    retry_after = retry_after_seconds(headers)
    common: dict[str, Any] = {"status": status, "request_id": request_id, "body": body}
    if status in (400, 413, 422) or (status == 200 and kind == "invalid_request_error"):
        if is_prompt_too_long_message(message):
            parsed = parse_prompt_too_long(message)
            return PromptTooLongError(
                message,
                actual_tokens=parsed[0] if parsed else None,
                limit_tokens=parsed[1] if parsed else None,
                **common,
            )
        return BadRequestError(message, **common)
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return AuthenticationError(message, **common)
    if status == 429 or kind == "rate_limit_error":
        return RateLimitedError(message, retry_after=retry_after, **common)
    if status in (503, 529) or kind == "overloaded_error":
        return OverloadedError(message, retry_after=retry_after, **common)
    if status >= 500 or status in (200, 408, 409) or kind in ("api_error", "timeout_error"):
        return ServerError(message, retry_after=retry_after, **common)
    return BadRequestError(message, **common)


def _block(block: Any) -> ContentBlock:
    kind = getattr(block, "type", None)
    if kind == "text":
        text: dict[str, Any] = {"type": "text", "text": block.text}
        if getattr(block, "citations", None):
            text["citations"] = [c.model_dump(mode="json") for c in block.citations]
        return cast(ContentBlock, text)
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return cast(ContentBlock, block.model_dump(mode="json", exclude_none=True))


def _usage(usage: Any) -> Usage:
    data: dict[str, Any] = usage.model_dump(mode="json") if usage is not None else {}
    out: Usage = {
        "input_tokens": int(data.get("input_tokens") or 0),
        "output_tokens": int(data.get("output_tokens") or 0),
        "cache_creation_input_tokens": int(data.get("cache_creation_input_tokens") or 0),
        "cache_read_input_tokens": int(data.get("cache_read_input_tokens") or 0),
    }
    split = data.get("cache_creation")
    if isinstance(split, Mapping):
        out["cache_creation"] = {k: int(v or 0) for k, v in split.items()}
    deleted = data.get("cache_deleted_input_tokens")
    if deleted is not None:
        out["cache_deleted_input_tokens"] = int(deleted)
    return out
