"""OpenTelemetry spans and metrics for the pipeline (the optional extra `unbounded[telemetry]`).

With `opentelemetry-api` installed, a `Session` reports through the tracer and meter providers
you configure (the global ones by default, which do nothing until an SDK is set up):

    unbounded.prepare                 one per prepared request
      unbounded.compaction            an automatic compaction (session memory or a summary)
        chat <model>                  the summary call (GenAI semantic conventions)
      unbounded.microcompaction       clearing stale tool results
    unbounded.compaction              a manual compaction (`Session.compact`)
    unbounded.record                  a recorded reply: its token usage
      unbounded.cache_break           the reply read less from the prompt cache than expected

Token usage follows the GenAI semantic conventions (`gen_ai.usage.input_tokens`,
`gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`,
`gen_ai.usage.cache_creation.input_tokens`, `gen_ai.request.model`, `gen_ai.operation.name`).
The gauge `unbounded.context.usage` is the share of the window the next request takes, and
`unbounded.context.tokens` its size. Without the package every call here does nothing, and
nothing else changes.
"""

from __future__ import annotations

import copy
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from unbounded.model.request import ProviderRequest
from unbounded.model.response import ProviderWrapper
from unbounded.providers.base import Heartbeat, ModelResponse, Provider

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - exercised only without the extra
    otel_metrics = None  # type: ignore[assignment]
    otel_trace = None  # type: ignore[assignment]

INSTRUMENTATION_NAME = "unbounded"
Attributes = Mapping[str, str | int | float | bool]

_USAGE_ATTRIBUTES = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_creation_input_tokens": "gen_ai.usage.cache_creation.input_tokens",
}


def usage_attributes(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """GenAI token-usage attributes of an API usage object (whole numbers only)."""
    out: dict[str, int] = {}
    for key, name in _USAGE_ATTRIBUTES.items():
        value = (usage or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    return out


def available() -> bool:
    """Whether `opentelemetry-api` is installed."""
    return otel_trace is not None


class Telemetry:
    """Where a session's spans and metrics go (see the module docstring)."""

    def __init__(self, tracer_provider: Any | None = None, meter_provider: Any | None = None):
        self._tracer: Any = None
        self._tokens: Any = None
        self._usage: Any = None
        self._redact: Callable[[str], str] | None = None
        self._global_tracer = tracer_provider is None
        if otel_trace is None or otel_metrics is None:
            return
        self._tracer = otel_trace.get_tracer(
            INSTRUMENTATION_NAME, tracer_provider=tracer_provider
        )
        meter = otel_metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self._tokens = meter.create_gauge(
            "unbounded.context.tokens", unit="{token}", description="Tokens of the next request"
        )
        self._usage = meter.create_gauge(
            "unbounded.context.usage",
            unit="1",
            description="Share of the context window the next request takes",
        )

    @property
    def enabled(self) -> bool:
        """Whether spans are made (the API is installed)."""
        return self._tracer is not None

    def redacting(self, redact: Callable[[str], str]) -> Telemetry:
        """A copy (same providers) whose spans pass every text attribute, and the message of
        an exception they record, through `redact`."""
        twin = copy.copy(self)
        twin._redact = redact
        return twin

    @contextmanager
    def span(self, name: str, attributes: Attributes | None = None) -> Iterator[Any]:
        """A span around a step (a do-nothing context without the API); yields the span."""
        if self._tracer is None or (self._global_tracer and not _global_tracing()):
            yield None  # nothing would record it: a no-op span costs ~10 us, a turn ~200
            return
        redact = self._redact
        if redact is None:
            given = dict(attributes or {})
            with self._tracer.start_as_current_span(name, attributes=given) as span:
                yield span
            return
        with self._tracer.start_as_current_span(
            name, attributes=_redacted(attributes or {}, redact), record_exception=False
        ) as span:
            try:
                yield _RedactingSpan(span, redact)
            except BaseException as error:
                trace = "".join(traceback.format_exception(error))
                shown = {
                    "exception.message": redact(str(error)),
                    "exception.stacktrace": redact(trace),
                }
                span.record_exception(error, shown)
                raise

    def context_usage(self, tokens: int, window: int, attributes: Attributes) -> None:
        """Record the context gauges for the request about to go out."""
        if self._tokens is None or self._usage is None:
            return
        self._tokens.set(tokens, attributes=dict(attributes))
        self._usage.set(tokens / window if window else 0.0, attributes=dict(attributes))

    def traced(self, provider: Provider) -> Provider:
        """The provider with each call in a GenAI `chat <model>` span (itself without the API)."""
        if self._tracer is None:
            return provider
        return _TracedProvider(provider, self)


def _global_tracing() -> bool:
    """An SDK tracer provider has been set globally (the default proxy records nothing)."""
    return otel_trace is not None and not isinstance(
        otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider
    )


def _redacted(attributes: Attributes, redact: Callable[[str], str]) -> dict[str, Any]:
    return {k: redact(v) if isinstance(v, str) else v for k, v in attributes.items()}


class _RedactingSpan:
    """A span whose text attributes are redacted as they are set."""

    def __init__(self, span: Any, redact: Callable[[str], str]) -> None:
        self._span = span
        self._redact = redact

    def set_attributes(self, attributes: Attributes) -> None:
        """Set attributes, text redacted."""
        self._span.set_attributes(_redacted(attributes, self._redact))

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute, text (and text in a list) redacted."""
        if isinstance(value, str):
            value = self._redact(value)
        elif isinstance(value, (list, tuple)):
            value = [self._redact(v) if isinstance(v, str) else v for v in value]
        self._span.set_attribute(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)


def set_attributes(span: Any, attributes: Attributes) -> None:
    """Set attributes on a span yielded by `Telemetry.span` (None: nothing to do)."""
    if span is not None:
        span.set_attributes(dict(attributes))


class _TracedProvider(ProviderWrapper):
    """A provider whose calls are GenAI client spans; everything else is the provider's."""

    def __init__(self, inner: Provider, telemetry: Telemetry) -> None:
        super().__init__(inner)
        self._telemetry = telemetry

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """The wrapped call inside a `chat <model>` span with its token usage."""
        model = str(request.get("model", ""))
        attributes: dict[str, str | int | float | bool] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.inner.name,
            "gen_ai.request.model": model,
            "unbounded.purpose": "compaction_summary",
        }
        max_tokens = request.get("max_tokens")
        if isinstance(max_tokens, int):
            attributes["gen_ai.request.max_tokens"] = max_tokens
        with self._telemetry.span(f"chat {model}", attributes) as span:
            if heartbeat is None:
                response = await self.inner.create(request, stream=stream)
            else:
                response = await self.inner.create(request, stream=stream, heartbeat=heartbeat)
            done: dict[str, str | int | float | bool] = dict(usage_attributes(response.usage))
            if response.model:
                done["gen_ai.response.model"] = response.model
            if response.id:
                done["gen_ai.response.id"] = response.id
            set_attributes(span, done)
            if span is not None and response.stop_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
            return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_DEFAULT: Telemetry | None = None


def default_telemetry() -> Telemetry:
    """The telemetry of sessions given none: the global OpenTelemetry providers."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Telemetry()
    return _DEFAULT
