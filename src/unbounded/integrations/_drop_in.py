"""What the drop-in's stream managers need of its pipeline (`ClientPipeline` is one), so the
stream module depends on this shape rather than on `anthropic_client.py`, which imports it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from unbounded.blocking import BlockingRunner
from unbounded.engine import TurnOptions
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse, Provider
from unbounded.session import Session
from unbounded.wire.base import WireFormat


class WireProvider(Provider, Protocol):
    """A provider sending through an SDK client in one wire format: the drop-in reads the
    client's replies and errors with that format."""

    @property
    def wire(self) -> WireFormat:
        """The format its requests and replies go through."""
        ...


class DropInPipeline(Protocol):
    """The drop-in's per-client pipeline, as its stream managers use it."""

    @property
    def runner(self) -> BlockingRunner:
        """The event loop the blocking client's calls run the pipeline on."""
        ...

    @property
    def session(self) -> Session:
        """The session the client runs."""
        ...

    def begin(self, kwargs: Mapping[str, Any], *, streaming_helper: bool) -> dict[str, Any] | None:
        """Take a call's keywords; None for a side call."""
        ...

    def side_kwargs(self, kwargs: Mapping[str, Any], method: Callable[..., Any]) -> dict[str, Any]:
        """The SDK keywords of the side call `begin` just passed (managed, or as given)."""
        ...

    def call_kwargs(
        self, request: ProviderRequest, method: Callable[..., Any], passthrough: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The SDK keywords of a prepared request."""
        ...

    def messages_api(self, request: ProviderRequest, sdk: Any) -> Any:
        """`sdk.messages`, or `sdk.beta.messages` when the request carries betas."""
        ...

    @property
    def turn_options(self) -> TurnOptions:
        """How the drop-in runs a turn (its SDK's prompt-too-long errors recognized)."""
        ...

    def mark_sent(self) -> None:
        """Remember the cache-safe parameters of the request that just went out."""
        ...

    def record(self, message: Any, folded: ModelResponse | None = None) -> None:
        """Record a reply the caller received (a stream's, once read); `folded`: the session's
        reading of it, when already made (from the raw events under the SDK's stream)."""
        ...


__all__ = ["DropInPipeline", "WireProvider"]
