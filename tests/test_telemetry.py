"""OpenTelemetry spans and metrics of a scripted session, read with the SDK's in-memory
exporter and reader; and the library without the API installed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.telemetry import Telemetry

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

MODEL = "claude-sonnet-4-5"
CONFIG = SessionConfig(
    model=MODEL,
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=60_000,
    max_tokens=4_096,
)


class Summarizer:
    """A model that answers every summary request with a nine-section summary."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        usage = {"input_tokens": 120, "cache_read_input_tokens": 30_000, "output_tokens": 1_700}
        return ModelResponse([{"type": "text", "text": nine_section_summary("the build")}], "end_turn", usage, MODEL, id="msg_summary")


def reply(turn: int, cache_read: int) -> ModelResponse:
    use = {"type": "tool_use", "id": f"t{turn}", "name": "Bash", "input": {"command": f"make step{turn}"}}
    usage = {"input_tokens": 50, "cache_read_input_tokens": cache_read, "output_tokens": 40}
    return ModelResponse([use], "tool_use", usage, MODEL, id=f"msg_{turn}")


async def scripted_session(session: Session, turns: int) -> None:
    session.add_user("Please build the thing.")
    for turn in range(turns):
        await session.prepare()
        # the prompt cache keeps growing, except on turn 3, when almost nothing is read back
        read = 200 if turn == 3 else 1_000 + 1_500 * turn
        session.record(reply(turn, read))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "line\n" * 1_200}])


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_span_tree_of_a_scripted_session() -> None:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    telemetry = Telemetry(tracer_provider=tracing, meter_provider=MeterProvider(metric_readers=[reader]))
    session = Session(CONFIG, policy=Policy(), summarizer=Summarizer(), telemetry=telemetry)
    asyncio.run(scripted_session(session, 30))
    assert session.status().compactions >= 1 and session.status().microcompacts >= 1

    spans = list(exporter.get_finished_spans())
    roots = [s for s in spans if s.parent is None]
    assert {s.name for s in roots} == {"unbounded.prepare", "unbounded.record"}
    prepares = [s for s in roots if s.name == "unbounded.prepare"]
    assert len(prepares) == 30
    for span in prepares:
        names = [c.name for c in children(spans, span)]
        assert "unbounded.microcompaction" in names  # every turn runs the microcompaction step
        assert span.attributes["gen_ai.request.model"] == MODEL
        assert span.attributes["unbounded.context.tokens"] > 0

    compactions = [s for s in spans if s.name == "unbounded.compaction"]
    assert compactions and all(s.parent is not None for s in compactions)
    compacted = [s for s in compactions if s.attributes["unbounded.compaction.succeeded"]]
    assert compacted and compacted[0].attributes["unbounded.compaction.trigger"] == "auto"
    summary_calls = children(spans, compacted[0])
    assert [s.name for s in summary_calls] == [f"chat {MODEL}"]
    call = summary_calls[0].attributes
    assert call["gen_ai.operation.name"] == "chat" and call["gen_ai.request.model"] == MODEL
    assert call["gen_ai.usage.input_tokens"] == 120 and call["gen_ai.usage.output_tokens"] == 1_700
    assert call["gen_ai.usage.cache_read.input_tokens"] == 30_000

    cleared = [s for s in spans if s.name == "unbounded.microcompaction" and s.attributes["unbounded.microcompaction.cleared"] > 0]
    assert cleared and cleared[0].attributes["unbounded.microcompaction.tier"] == "count"

    records = [s for s in roots if s.name == "unbounded.record"]
    assert len(records) == 30 and records[0].attributes["gen_ai.usage.output_tokens"] == 40
    breaks = [s for s in spans if s.name == "unbounded.cache_break"]
    assert len(breaks) == 1 and breaks[0].parent is not None
    assert breaks[0].parent.span_id == records[3].context.span_id
    assert breaks[0].attributes["unbounded.cache_break.current_read"] == 200

    metrics = reader.get_metrics_data()
    points = {
        metric.name: [p.value for p in metric.data.data_points]
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    usage, tokens = points["unbounded.context.usage"][0], points["unbounded.context.tokens"][0]
    assert 0 < usage < 1 and tokens > 0
    assert usage == pytest.approx(tokens / session.model_info.context_window)


def test_the_library_works_without_opentelemetry() -> None:
    script = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # as if the extra were not installed
from unbounded.session import Session, SessionConfig
from unbounded.telemetry import available
assert not available()
session = Session(SessionConfig(model="claude-sonnet-4-5", tools=[{"name": "Bash", "input_schema": {"type": "object"}}]))
session.add_user("hi")
request = asyncio.run(session.prepare())
session.record({"content": [{"type": "text", "text": "hello"}], "usage": {"input_tokens": 10, "output_tokens": 2}})
assert not session.deps.telemetry.enabled and [t["name"] for t in request["tools"]] == ["Bash"]
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
