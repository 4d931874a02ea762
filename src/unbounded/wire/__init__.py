"""Wire formats: pure adapters between the project's request and reply and one API's shapes.

A format (`WireFormat`, in `base`) converts a `ProviderRequest` to an SDK call's keyword
arguments, the reply and its stream events back to a `ModelResponse`, the SDK's exceptions to
the project's errors, and a caller's messages to the project's. Providers and the drop-in
client do the I/O around one. Adding a format is one module and one line in `FORMATS`
(docs/providers.md, "Adding a wire format").
"""

from __future__ import annotations

from collections.abc import Callable

from unbounded.errors import ConfigError
from unbounded.wire.anthropic import AnthropicMessages
from unbounded.wire.base import InboundMessages, StreamAssembler, WireFormat
from unbounded.wire.openai_chat import OpenAIChat
from unbounded.wire.openai_responses import OpenAIResponses

FORMATS: dict[str, Callable[[], WireFormat]] = {
    "anthropic-messages": AnthropicMessages,
    "openai-chat": OpenAIChat,
    "openai-responses": OpenAIResponses,
}
"""Every wire format by name, each built with its default options (the conformance tests run
over this table)."""


def wire_format(name: str) -> WireFormat:
    """The format registered as `name`, with its default options."""
    try:
        factory = FORMATS[name]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise ConfigError(f"no wire format {name!r}; the formats are: {known}") from None
    return factory()


__all__ = [
    "FORMATS",
    "AnthropicMessages",
    "InboundMessages",
    "OpenAIChat",
    "OpenAIResponses",
    "StreamAssembler",
    "WireFormat",
    "wire_format",
]
