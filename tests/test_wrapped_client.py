"""The wrapped clients' shared lifecycle (`integrations/_wrapped_client.py`): the session the
wrapper binds, `with_options` on the same conversation, the bypasses refused with the SDK's own
advice, closing the session store and the SDK client, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from unbounded.errors import ConfigError
from unbounded.integrations._wrapped_client import (
    AsyncWrappedClient,
    SyncWrappedClient,
    bound_session,
)
from unbounded.integrations.anthropic_client import ClientPipeline
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession


class _Sdk:
    """A stand-in SDK client: `with_options` copies it, `close` is counted."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}
        self.closed = 0
        self.models = "the SDK's models"

    def with_options(self, **options: Any) -> _Sdk:
        return _Sdk({**self.options, **options})

    def close(self) -> None:
        self.closed += 1


class _AsyncSdk(_Sdk):
    async def close(self) -> None:  # type: ignore[override]
        self.closed += 1


class _Pipeline:
    """What the wrapped clients use of their pipeline."""

    def __init__(self, client: _Sdk) -> None:
        self.client = client
        self.session = Session(SessionConfig(model="claude-sonnet-4-5"))
        self.stores_closed = 0

    def close_store(self) -> None:
        self.stores_closed += 1


class _Client(SyncWrappedClient[ClientPipeline]):
    bypass_advice = "is refused here: use the other door"


class _AsyncClient(AsyncWrappedClient[ClientPipeline]):
    bypass_advice = "is refused here too"


def _pipeline(sdk: _Sdk) -> Any:
    return cast(ClientPipeline, _Pipeline(sdk))


def test_with_options_keeps_the_conversation_on_the_sdks_copy() -> None:
    pipeline = _pipeline(_Sdk())
    client = _Client(pipeline)
    quick = client.with_options(timeout=3)
    assert type(quick) is _Client
    assert quick.session is client.session is pipeline.session
    assert quick.client.options == {"timeout": 3} and client.client.options == {}
    assert quick.with_options(max_retries=0).client.options == {"timeout": 3, "max_retries": 0}


def test_bypasses_are_refused_with_the_clients_advice_and_the_rest_is_the_sdks() -> None:
    client = _Client(_pipeline(_Sdk()))
    client.session.add_user("what the status counts")
    for name in ("with_raw_response", "with_streaming_response"):
        with pytest.raises(ConfigError, match=rf"^client\.{name} is refused here: use the other"):
            getattr(client, name)
    assert client.models == "the SDK's models"
    with pytest.raises(AttributeError):
        client._hidden  # noqa: B018 - private names are not forwarded
    assert client.status().tokens > 0 and client.status() == client.session.status()


def test_close_releases_the_store_and_the_sdk_client() -> None:
    sdk = _Sdk()
    pipeline = _pipeline(sdk)
    with _Client(pipeline) as client:
        copy = client.with_options(timeout=1)
    assert (pipeline.stores_closed, sdk.closed) == (1, 1)
    copy.close()  # closes the pipeline's own client, the one wrap() was given
    assert (pipeline.stores_closed, sdk.closed, copy.client.closed) == (2, 2, 0)


def test_async_close_releases_the_store_and_the_sdk_client() -> None:
    sdk = _AsyncSdk()
    pipeline = _pipeline(sdk)

    async def main() -> None:
        async with _AsyncClient(pipeline) as client:
            with pytest.raises(
                ConfigError, match=r"^client\.with_raw_response is refused here too"
            ):
                client.with_raw_response  # noqa: B018
            assert type(client.with_options(timeout=1)) is _AsyncClient

    asyncio.run(main())
    assert (pipeline.stores_closed, sdk.closed) == (1, 1)


def test_bound_session_checks_wraps_arguments() -> None:
    session = Session(SessionConfig(model="claude-sonnet-4-5"))
    assert bound_session(None, session_folder="x", model="m", context_window=9) is None
    assert bound_session(session, session_folder=None, model=None, context_window=None) is session
    blocking = SyncSession(Session(SessionConfig(model="claude-sonnet-4-5")))
    given = bound_session(blocking, session_folder=None, model=None, context_window=None)
    assert given is blocking.session
    with pytest.raises(ConfigError, match="a session or a session_folder, not both"):
        bound_session(session, session_folder="x", model=None, context_window=None)
    for model, window in (("m", None), (None, 1000)):
        with pytest.raises(ConfigError, match="come from the session you gave"):
            bound_session(session, session_folder=None, model=model, context_window=window)
