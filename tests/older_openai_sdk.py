"""A real `openai` client made to look like an older SDK release: its Responses methods do
not name some keywords (`context_management` before 2.18), and refuse them with the
`TypeError` the older release raises; everything else goes to the real SDK unchanged."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def without_keywords(method: Callable[..., Any], missing: tuple[str, ...]) -> Callable[..., Any]:
    """`method` with the signature of a release that lacks the `missing` keywords."""
    signature = inspect.signature(method)
    older = signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in missing])

    def call(*args: Any, **kwargs: Any) -> Any:
        older.bind(*args, **kwargs)  # TypeError: got an unexpected keyword argument, as the old SDK
        return method(*args, **kwargs)

    call.__signature__ = older  # type: ignore[attr-defined]
    return call


def with_older_responses(client: Any, missing: tuple[str, ...] = ("context_management",)) -> Any:
    """`client` (sync or async) with `client.responses` of a release lacking `missing`."""
    real = client.responses
    client.responses = SimpleNamespace(
        create=without_keywords(real.create, missing),
        stream=without_keywords(real.stream, missing),
        with_raw_response=SimpleNamespace(create=without_keywords(real.with_raw_response.create, missing)),
        with_streaming_response=SimpleNamespace(create=without_keywords(real.with_streaming_response.create, missing)),
    )
    return client
