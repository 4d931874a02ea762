"""The Responses API read raw (for byte-exact opaque items) still maps every HTTP error to the
library's own error, with its status and request id, streamed and not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    auth_error,
    bad_request,
    overloaded,
    rate_limited,
    server_error,
)
from test_provider_openai import _request
from unbounded.providers import (
    AuthenticationError,
    BadRequestError,
    OverloadedError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from unbounded.providers.openai import OpenAIProvider


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("reply", "expected", "status"),
    [
        (bad_request(), BadRequestError, 400),
        (auth_error(), AuthenticationError, 401),
        (overloaded(), OverloadedError, 503),
        (server_error(), ServerError, 500),
        (rate_limited("3"), RateLimitedError, 429),
    ],
)
def test_a_responses_error_is_the_librarys_own(
    api_server: ApiServer, reply: Any, expected: type[ProviderError], status: int, stream: bool
) -> None:
    api_server.responses.push(reply)
    provider = OpenAIProvider(api_server.openai_client(), api="responses")
    with pytest.raises(expected) as caught:
        asyncio.run(provider.create(_request(), stream=stream))
    assert type(caught.value) is expected
    assert caught.value.status == status
    assert caught.value.request_id == api_server.last.request_id
