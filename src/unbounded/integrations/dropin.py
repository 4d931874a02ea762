"""`wrap(client)`: the one entry point for the SDK drop-ins, chosen by the client's type.

An `anthropic.Anthropic`/`AsyncAnthropic` goes to `anthropic_client.wrap_anthropic`, an
`openai.OpenAI`/`AsyncOpenAI` to `openai_client.wrap_openai`; each takes its own keywords
(the OpenAI one also `prices=` and `api=`). The choice lives here, above both, so neither
drop-in imports the other's entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, overload

from unbounded.integrations.anthropic_client import (
    AsyncUnboundedAnthropic,
    UnboundedAnthropic,
    wrap_anthropic,
)
from unbounded.integrations.openai_client import (
    AsyncUnboundedOpenAI,
    UnboundedOpenAI,
    is_openai_client,
    wrap_openai,
)
from unbounded.session import Session
from unbounded.sync_session import SyncSession

if TYPE_CHECKING:
    import anthropic
    import openai


@overload
def wrap(
    client: openai.AsyncOpenAI, session: Session | SyncSession | None = None, **options: Any
) -> AsyncUnboundedOpenAI: ...


@overload
def wrap(
    client: openai.OpenAI, session: Session | SyncSession | None = None, **options: Any
) -> UnboundedOpenAI: ...


@overload
def wrap(
    client: anthropic.AsyncAnthropic, session: Session | SyncSession | None = None, **options: Any
) -> AsyncUnboundedAnthropic: ...


@overload
def wrap(
    client: anthropic.Anthropic, session: Session | SyncSession | None = None, **options: Any
) -> UnboundedAnthropic: ...


def wrap(
    client: anthropic.Anthropic | anthropic.AsyncAnthropic | openai.OpenAI | openai.AsyncOpenAI,
    session: Session | SyncSession | None = None,
    **options: Any,
) -> UnboundedAnthropic | AsyncUnboundedAnthropic | UnboundedOpenAI | AsyncUnboundedOpenAI:
    """Wrap an Anthropic or OpenAI SDK client so its calls run one unbounded session.

    Anthropic: `messages.create/stream`; OpenAI: `chat.completions.create/stream` and
    `responses.create/stream`. `session` (a Session you built) or `session_folder=` (opened,
    or resumed when it exists; without either the session lives in memory); the other
    keywords are those of `wrap_anthropic` / `wrap_openai`.
    """
    wrapped: UnboundedAnthropic | AsyncUnboundedAnthropic | UnboundedOpenAI | AsyncUnboundedOpenAI
    if is_openai_client(client):
        wrapped = wrap_openai(
            cast("openai.OpenAI | openai.AsyncOpenAI", client), session, **options
        )
    else:
        wrapped = wrap_anthropic(
            cast("anthropic.Anthropic | anthropic.AsyncAnthropic", client), session, **options
        )
    return wrapped


__all__ = ["wrap"]
