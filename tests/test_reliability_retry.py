"""RetryingProvider: what is retried, how long it waits, when it gives up (in process and
through the real anthropic SDK against the scripted local server)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

import apiserver
from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    auth_error,
    bad_request,
    cut_stream,
    malformed,
    message,
    overloaded,
    prompt_too_long,
    rate_limited,
    server_error,
    stream_error,
)
from unbounded.errors import ConfigError
from unbounded.events import Event, ProviderRetried
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.providers.base import (
    AuthenticationError,
    BadRequestError,
    ModelResponse,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    RetryableError,
    ServerError,
)
from unbounded.providers.retry import RetryingProvider

REQUEST: ProviderRequest = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
OK = ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


class Scripted:
    """A provider that raises the scripted errors in order, then answers."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, *script: BaseException | ModelResponse) -> None:
        self.script = list(script)
        self.calls = 0
        self.streams: list[bool] = []

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        self.streams.append(stream)
        item = self.script.pop(0) if self.script else OK
        if isinstance(item, BaseException):
            raise item
        return item


class Sleeps:
    """An injected sleep that records what was asked and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def wrap(inner: Any, **options: Any) -> tuple[RetryingProvider, Sleeps]:
    sleeps = Sleeps()
    options.setdefault("seed", 1)
    return RetryingProvider(inner, sleep=sleeps, **options), sleeps


def test_retry_after_is_honoured_exactly_never_earlier() -> None:
    inner = Scripted(RateLimitedError("slow down", retry_after=7.0, status=429), OverloadedError("busy", retry_after=0.25))
    provider, sleeps = wrap(inner, base_delay=1.0, max_delay=2.0)
    assert asyncio.run(provider.create(REQUEST)) is OK
    assert sleeps.delays == [7.0, 0.25]  # the server's wait, even above max_delay
    assert inner.calls == 3 and provider.stats.retries == 2 and provider.stats.succeeded == 1


def test_exponential_backoff_with_seeded_jitter_and_a_cap() -> None:
    errors = [ServerError("boom", status=500) for _ in range(6)]
    provider, sleeps = wrap(Scripted(*errors), max_retries=6, base_delay=0.5, max_delay=4.0, jitter=0.25, seed=42)
    asyncio.run(provider.create(REQUEST))
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert len(sleeps.delays) == 6
    for delay, ceiling in zip(sleeps.delays, ceilings, strict=True):
        assert 0.75 * ceiling <= delay <= ceiling
    again, again_sleeps = wrap(Scripted(*[ServerError("boom") for _ in range(6)]), max_retries=6, base_delay=0.5, max_delay=4.0, jitter=0.25, seed=42)
    asyncio.run(again.create(REQUEST))
    assert again_sleeps.delays == sleeps.delays  # seeded: reproducible
    assert len(set(sleeps.delays[3:])) == 3  # jittered: capped delays still differ


def test_an_injected_rng_drives_the_jitter() -> None:
    provider, sleeps = wrap(Scripted(ServerError("x")), rng=random.Random(5), base_delay=1.0, max_delay=1.0, jitter=1.0)
    asyncio.run(provider.create(REQUEST))
    assert sleeps.delays == [1.0 - random.Random(5).random()]


@pytest.mark.parametrize(
    "error",
    [
        PromptTooLongError("prompt is too long: 300 tokens > 200 maximum", actual_tokens=300, limit_tokens=200),
        AuthenticationError("invalid x-api-key", status=401),
        BadRequestError("messages.0.content: Field required", status=400),
        ProviderError("insufficient_quota", status=429),
        KeyError("a bug, not a provider error"),
    ],
    ids=["prompt_too_long", "auth", "bad_request", "plain_provider_error", "bug"],
)
def test_non_retryable_errors_are_raised_at_once(error: BaseException) -> None:
    inner = Scripted(error)
    provider, sleeps = wrap(inner)
    with pytest.raises(type(error)) as raised:
        asyncio.run(provider.create(REQUEST))
    assert raised.value is error and inner.calls == 1 and sleeps.delays == []


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    errors = [ServerError(f"failure {i}", status=500) for i in range(10)]
    inner = Scripted(*errors)
    provider, sleeps = wrap(inner, max_retries=3)
    with pytest.raises(ServerError) as raised:
        asyncio.run(provider.create(REQUEST))
    assert raised.value is errors[3]  # four attempts: the first and three retries
    assert inner.calls == 4 and len(sleeps.delays) == 3
    assert provider.stats.gave_up == 1 and provider.stats.errors == {"ServerError": 4}


def test_zero_retries_means_one_attempt() -> None:
    inner = Scripted(OverloadedError("busy"))
    provider, sleeps = wrap(inner, max_retries=0)
    with pytest.raises(OverloadedError):
        asyncio.run(provider.create(REQUEST))
    assert inner.calls == 1 and sleeps.delays == []


def test_a_wait_longer_than_max_retry_after_is_left_to_the_caller() -> None:
    error = RateLimitedError("daily quota", retry_after=3600.0)
    provider, sleeps = wrap(Scripted(error), max_retry_after=60.0)
    with pytest.raises(RateLimitedError) as raised:
        asyncio.run(provider.create(REQUEST))
    assert raised.value.retry_after == 3600.0 and sleeps.delays == []


def test_max_elapsed_bounds_the_whole_call() -> None:
    now = [0.0]

    async def sleep(delay: float) -> None:
        now[0] += delay

    inner = Scripted(*[ServerError("x") for _ in range(10)])
    provider = RetryingProvider(inner, max_retries=10, base_delay=1.0, max_delay=1.0, jitter=0.0, max_elapsed=3.5, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(ServerError):
        asyncio.run(provider.create(REQUEST))
    assert inner.calls == 4 and now[0] == 3.0


def test_events_stream_flag_name_and_sync_facade() -> None:
    events: list[Event] = []
    inner = Scripted(RateLimitedError("x", retry_after=2.0, status=429))
    provider, _ = wrap(inner, events=events.append)
    assert provider.name == "scripted" and provider.supports_cache_edits is False
    assert provider.create_sync(REQUEST, stream=True) is OK
    assert inner.streams == [True, True]
    assert events == [ProviderRetried("scripted", 1, 2.0, "RateLimitedError", 429, 2.0)]


def test_cancellation_during_a_wait_is_not_swallowed() -> None:
    async def main() -> None:
        provider = RetryingProvider(Scripted(ServerError("x")), base_delay=30.0, max_delay=30.0)
        task = asyncio.ensure_future(provider.create(REQUEST))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@pytest.mark.parametrize(
    "options",
    [{"max_retries": -1}, {"base_delay": -1.0}, {"base_delay": 5.0, "max_delay": 1.0}, {"jitter": 1.5}, {"max_retry_after": -1.0}, {"max_elapsed": -1.0}],
)
def test_bad_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RetryingProvider(Scripted(), **options)


# -- through the real SDK ---------------------------------------------------------------------

anthropic = pytest.importorskip("anthropic")


@pytest.fixture(autouse=True)
def _no_nagle(monkeypatch: pytest.MonkeyPatch) -> None:
    # The test server writes headers and body separately; without TCP_NODELAY each reply
    # waits ~40 ms for a delayed ACK.
    monkeypatch.setattr(apiserver._Handler, "disable_nagle_algorithm", True)


SDK_TIMEOUT = 10.0
"""The SDK's read timeout in these tests: long enough that a loaded CI machine never times out a
scripted reply (a timed-out first attempt still pops the fault, and the count goes wrong)."""

FIRST_TIMEOUT = 0.5
"""The read timeout of the first request alone, in the case that times out on purpose."""


class FirstRequestTimesOut:
    """An HTTP transport that gives the first request alone a short read timeout, so the
    scripted slow reply times out and the retry after it has the whole `SDK_TIMEOUT`."""

    def __init__(self) -> None:
        self.inner = apiserver.sdk_http_package().AsyncHTTPTransport()
        self.sent = 0

    async def handle_async_request(self, request: Any) -> Any:
        self.sent += 1
        if self.sent == 1:
            apiserver.with_read_timeout(request, FIRST_TIMEOUT)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _sdk_provider(api: ApiServer, first_times_out: bool = False, **options: Any) -> tuple[RetryingProvider, Sleeps]:
    from unbounded.providers.anthropic import AnthropicProvider

    client_options: dict[str, Any] = {"timeout": SDK_TIMEOUT}
    if first_times_out:
        client_options["http_client"] = anthropic.DefaultAsyncHttpxClient(transport=FirstRequestTimesOut())
    return wrap(AnthropicProvider(api.anthropic_client(**client_options)), **options)


@pytest.mark.parametrize(
    ("fault", "error_type"),
    [
        (rate_limited("3"), RateLimitedError),
        (overloaded(), OverloadedError),
        (server_error(500), ServerError),
        (server_error(503), OverloadedError),
        (cut_stream(message("partial reply " * 20, chunk_size=16)), ServerError),
        (stream_error(), OverloadedError),
        (malformed(), ServerError),
        (message("too slow", delay=SDK_TIMEOUT), ServerError),
    ],
    ids=["429", "529", "500", "503", "cut_stream", "error_event", "malformed", "timeout"],
)
def test_every_transient_fault_is_retried_through_the_sdk(api_server: ApiServer, fault: Any, error_type: type[RetryableError]) -> None:
    api_server.anthropic.push(fault, message("recovered", chunk_size=64))
    events: list[Event] = []
    # Only the slow reply's case times out on purpose, on its first request alone.
    slow = isinstance(fault, apiserver.Message) and fault.delay >= SDK_TIMEOUT
    provider, sleeps = _sdk_provider(api_server, first_times_out=slow, events=events.append)
    response = asyncio.run(provider.create(REQUEST, stream=True))
    assert response.text == "recovered"
    assert len(api_server.requests) == 2 and len(sleeps.delays) == 1
    retried = events[0]
    assert isinstance(retried, ProviderRetried) and retried.error == error_type.__name__
    if isinstance(fault, apiserver.ApiError) and fault.headers.get("retry-after"):
        assert sleeps.delays == [3.0]


@pytest.mark.parametrize("fault", [prompt_too_long(), auth_error(), bad_request()], ids=["ptl", "401", "400"])
def test_refusals_are_not_retried_through_the_sdk(api_server: ApiServer, fault: Any) -> None:
    api_server.anthropic.push(fault)
    provider, sleeps = _sdk_provider(api_server)
    with pytest.raises(ProviderError) as raised:
        asyncio.run(provider.create(REQUEST, stream=True))
    assert not isinstance(raised.value, RetryableError)
    assert len(api_server.requests) == 1 and sleeps.delays == []


def test_sdk_gives_up_with_the_last_error(api_server: ApiServer) -> None:
    api_server.anthropic.push(overloaded(), server_error(500), rate_limited("1"))
    provider, sleeps = _sdk_provider(api_server, max_retries=2)
    with pytest.raises(RateLimitedError) as raised:
        asyncio.run(provider.create(REQUEST))
    assert raised.value.retry_after == 1.0 and raised.value.status == 429
    assert len(api_server.requests) == 3 and len(sleeps.delays) == 2
