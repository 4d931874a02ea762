"""Server-sent events from a stream's raw lines, as JSON objects in the server's key order.

The providers read a streamed reply from its raw lines rather than the SDK's event objects
where an SDK object would re-order what must go back byte-for-byte (a Responses item, a
compaction block): `SseDecoder` is that reading, for any API whose events carry their type
in their data.
"""

from __future__ import annotations

import json
from typing import Any

from unbounded.errors import ServerError

_DONE = "[DONE]"
"""The data of the event that ends an OpenAI-style stream (it is not JSON)."""


class SseDecoder:
    """Server-sent events from a stream's raw lines: `feed` each line (without its line end);
    an event's `data` lines, parsed as JSON when a blank line ends it, come back as a dict
    in the server's key order (comments, `event:` and `id:` lines are not needed: a
    Responses event names its type in its data). A `data: [DONE]` event, which
    OpenAI-compatible servers send last, ends the stream: `finished`, and later lines are
    ignored."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self.finished = False
        """True once a `[DONE]` event ended the stream."""

    def feed(self, line: str) -> dict[str, Any] | None:
        """The event a blank line completes, else None (always None after `[DONE]`);
        ServerError for data that is not a JSON object."""
        if self.finished:
            return None
        if line:
            if line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))
            return None
        if not self._data:
            return None
        text, self._data = "\n".join(self._data), []
        if text.strip() == _DONE:
            self.finished = True
            return None
        try:
            event = json.loads(text)
        except ValueError:
            raise ServerError(f"malformed stream event (not JSON): {text[:200]!r}") from None
        if not isinstance(event, dict):
            raise ServerError(f"malformed stream event (not an object): {text[:200]!r}")
        return event


__all__ = ["SseDecoder"]
