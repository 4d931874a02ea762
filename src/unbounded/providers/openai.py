"""The OpenAI-compatible provider: a `ProviderRequest` sent as a Chat Completions call, or as
a Responses API call (`api="responses"`).

Works with OpenAI and with any server speaking Chat Completions (vLLM, Ollama, llama.cpp
server, LiteLLM...) through the official `openai` SDK and a `base_url`. The conversion, both
ways, and the error mapping are the `OpenAIChat` and `OpenAIResponses` wire formats
(`unbounded.wire`); this module holds the SDK clients and makes the calls.

The SDK is an optional extra (`pip install unbounded[openai]`), imported when a provider is
built, never when this module is imported.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from unbounded.errors import ConfigError
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import call_with_heartbeat
from unbounded.providers.anthropic import DEFAULT_HEARTBEAT_INTERVAL, SdkClients
from unbounded.providers.base import Heartbeat, ModelResponse, ProviderError, SdkProvider
from unbounded.wire.context_edits import OPENAI_CONTEXT_EDITS
from unbounded.wire.openai_chat import OpenAIChat
from unbounded.wire.openai_responses import OpenAIResponses
from unbounded.wire.sse import SseDecoder

OpenAIApi = Literal["chat", "responses"]
"""Which OpenAI endpoint a provider calls: Chat Completions or the Responses API."""

if TYPE_CHECKING:
    import openai

LOCAL_SERVER_API_KEY = "unbounded-no-key"
"""Sent when a base_url is given without any API key (local servers ignore it)."""

OPENAI_API_HOST = "api.openai.com"
RESPONSES_PROFILE = ProviderProfile(native_context_edits=OPENAI_CONTEXT_EDITS)
"""The Responses API's profile: it compacts on the server (`compaction.native`) for a model
that declares it; Chat Completions has no such thing (the plain model profile). Declared for
OpenAI's own API only: another server speaking Responses may refuse `context_management`
(opt in with `ServerCompaction(profile=RESPONSES_PROFILE)`)."""


def is_openai_api(base_url: object) -> bool:
    """Whether requests to `base_url` go to OpenAI's own API: none given, or one on its host."""
    if base_url is None:
        return True
    return (urlsplit(str(base_url)).hostname or "") == OPENAI_API_HOST


def default_max_tokens_param(base_url: str | None) -> str:
    """`max_completion_tokens` for OpenAI's own API (no `base_url`, or one on its host): its
    reasoning models refuse `max_tokens` and every chat model takes the newer name;
    `max_tokens` for other Chat Completions servers (vLLM, Ollama, llama.cpp), some of which
    know only that one."""
    return "max_completion_tokens" if is_openai_api(base_url) else "max_tokens"


def _import_sdk() -> Any:
    try:
        import openai
    except ImportError:
        raise ConfigError(
            "the OpenAI provider needs the openai SDK: pip install 'unbounded[openai]'"
        ) from None
    return openai


# --------------------------------------------------------------------------- the provider


class OpenAIProvider(SdkProvider):
    """Sends `ProviderRequest`s to a Chat Completions endpoint with the official `openai` SDK."""

    name = "openai"
    supports_cache_edits = False

    def __init__(
        self,
        client: openai.AsyncOpenAI | openai.OpenAI | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 0,
        heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
        max_tokens_param: str | None = None,
        stream_usage: bool = True,
        api: OpenAIApi = "chat",
        prompt_cache_key: str | Callable[[], str] | None = None,
    ) -> None:
        # Where the requests go (the client's URL, else the argument's, else the
        # environment's) decides the defaults that only OpenAI's own API is known to take.
        where = getattr(client, "base_url", None) if client is not None else None
        where = where or base_url or os.environ.get("OPENAI_BASE_URL")
        if max_tokens_param is None:
            max_tokens_param = default_max_tokens_param(where)
        if api not in ("chat", "responses"):
            raise ConfigError(f"api must be 'chat' or 'responses', not {api!r}")
        self.api: OpenAIApi = api
        self.profile = (
            RESPONSES_PROFILE if api == "responses" and is_openai_api(where) else MODEL_PROFILE
        )
        """Server compaction declared on OpenAI's own Responses API only (`RESPONSES_PROFILE`)."""
        self.wire: OpenAIChat | OpenAIResponses = (
            OpenAIChat(max_tokens_param=max_tokens_param, stream_usage=stream_usage)
            if api == "chat"
            else OpenAIResponses()
        )
        """The format the requests and replies go through (`api` chooses it)."""
        self.prompt_cache_key = prompt_cache_key
        """Sent with every request so OpenAI routes them to one cache (a callable: read at
        each request, for a key known only later, such as a session's)."""
        self._sdk = _import_sdk()
        self.heartbeat_interval = heartbeat_interval
        options: dict[str, Any] | None = None
        if client is None:
            options = {"max_retries": max_retries}
            if api_key is None and base_url is not None and not os.environ.get("OPENAI_API_KEY"):
                api_key = LOCAL_SERVER_API_KEY
            if api_key is not None:
                options["api_key"] = api_key
            if base_url is not None:
                options["base_url"] = base_url
            if timeout is not None:
                options["timeout"] = timeout
        self._clients = SdkClients(self._sdk, "AsyncOpenAI", "OpenAI", client, options)
        if client is None:
            try:  # fail now, not at the first call, when credentials are missing
                self._clients.prebuild()
            except self._sdk.OpenAIError as exc:
                raise ConfigError(f"cannot build an OpenAI client: {exc}") from None

    async def _create(
        self,
        request: ProviderRequest,
        *,
        stream: bool,
        heartbeat: Heartbeat | None,
        want_async: bool,
    ) -> ModelResponse:
        client, is_async, borrowed = self._clients.acquire(want_async)
        kwargs = self.wire.to_request(request, stream=stream)
        key = self.prompt_cache_key() if callable(self.prompt_cache_key) else self.prompt_cache_key
        if key:
            kwargs["prompt_cache_key"] = key
        fit_body_fields(kwargs, self._endpoint(client).create)
        seen: dict[str, Any] = {}
        call: Awaitable[ModelResponse]
        if is_async:
            call = self._async_call(client, kwargs, stream, seen)
        else:
            call = asyncio.to_thread(self._sync_call, client, kwargs, stream, seen)
        try:
            return await call_with_heartbeat(call, heartbeat, self.heartbeat_interval)
        except ProviderError:
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

    def _endpoint(self, client: Any) -> Any:
        """`client.chat.completions` or `client.responses`, as `api` says."""
        return client.chat.completions if self.api == "chat" else client.responses

    async def _async_call(
        self, client: Any, kwargs: dict[str, Any], stream: bool, seen: dict[str, Any]
    ) -> ModelResponse:
        if self.api == "responses":
            return await self._async_raw_call(client, kwargs, stream, seen)
        result = await self._endpoint(client).create(**kwargs)
        if not stream:
            return self.wire.from_response(result)
        collector = self.wire.stream_assembler()
        seen["request_id"] = _request_id(result)
        try:
            async for chunk in result:
                collector.add(chunk)
        finally:
            await result.close()
        return collector.finish(seen.get("request_id"))

    async def _async_raw_call(
        self, client: Any, kwargs: dict[str, Any], stream: bool, seen: dict[str, Any]
    ) -> ModelResponse:
        """A Responses call read from its raw body, so the items the library does not read
        keep the server's bytes (`unbounded.wire.openai_responses`)."""
        async with client.responses.with_streaming_response.create(**kwargs) as raw:
            seen["request_id"] = raw.headers.get("x-request-id")
            if not stream:
                return self.wire.from_response(json.loads(await raw.read()))
            collector, decoder = self.wire.stream_assembler(), SseDecoder()
            async for line in raw.iter_lines():
                event = decoder.feed(line)
                if event is not None:
                    collector.add(event)
                # The terminal event (or a [DONE] after it): the connection may stay open.
                if collector.stopped or decoder.finished:
                    break
            return collector.finish(seen.get("request_id"))

    def _sync_raw_call(
        self, client: Any, kwargs: dict[str, Any], stream: bool, seen: dict[str, Any]
    ) -> ModelResponse:
        """`_async_raw_call` on a blocking client."""
        with client.responses.with_streaming_response.create(**kwargs) as raw:
            seen["request_id"] = raw.headers.get("x-request-id")
            if not stream:
                return self.wire.from_response(json.loads(raw.read()))
            collector, decoder = self.wire.stream_assembler(), SseDecoder()
            for line in raw.iter_lines():
                event = decoder.feed(line)
                if event is not None:
                    collector.add(event)
                # The terminal event (or a [DONE] after it): the connection may stay open.
                if collector.stopped or decoder.finished:
                    break
            return collector.finish(seen.get("request_id"))

    def _sync_call(
        self, client: Any, kwargs: dict[str, Any], stream: bool, seen: dict[str, Any]
    ) -> ModelResponse:
        if self.api == "responses":
            return self._sync_raw_call(client, kwargs, stream, seen)
        result = self._endpoint(client).create(**kwargs)
        if not stream:
            return self.wire.from_response(result)
        collector = self.wire.stream_assembler()
        seen["request_id"] = _request_id(result)
        try:
            for chunk in result:
                collector.add(chunk)
        finally:
            result.close()
        return collector.finish(seen.get("request_id"))


NEWER_BODY_FIELDS = ("prompt_cache_key", "context_management")
"""Body fields unbounded sends that older `openai` SDKs do not name as keywords
(`context_management` arrived in 2.18; the project allows `openai>=1.50`)."""


def fit_body_fields(kwargs: dict[str, Any], method: Callable[..., Any]) -> None:
    """Move each of `NEWER_BODY_FIELDS` in an SDK call's keywords that this SDK version's
    `method` does not name into `extra_body` (the wire body is the same), so an older SDK
    sends it instead of raising `TypeError`."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # not introspectable: trust the current SDK's names
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    moved = {
        name: kwargs.pop(name)
        for name in NEWER_BODY_FIELDS
        if name in kwargs and name not in parameters
    }
    if moved:
        kwargs["extra_body"] = {**(kwargs.get("extra_body") or {}), **moved}


def _request_id(stream: Any) -> str | None:
    response = getattr(stream, "response", None)
    headers = getattr(response, "headers", None)
    return None if headers is None else headers.get("x-request-id")
