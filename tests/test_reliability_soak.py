"""A 500-turn soak with 10% of the calls faulted and two summary outages: no message is lost,
the transcript on disk loads and its view validates at every turn, every retry waits as it
must, and the circuit breaker holds after three consecutive failed compactions.

The first `HTTP_TURNS` turns go through the real anthropic SDK to the scripted local server
(faults as HTTP errors, cut streams, malformed bodies, real client timeouts); the rest go
through an in-process provider that raises the errors the Anthropic provider maps those
faults to, so the soak runs in seconds. One session, one folder, both halves. Sleeps are
injected (recorded, not waited).

Each HTTP request's fault is decided in the client's transport, before it is sent: only a
request scripted to time out gets the short read timeout (against a reply far slower), and
every other one a generous timeout, so a stalled test process or server thread cannot turn
a good reply into an unscripted timeout (which would also shift the script's draws).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from summaries import nine_section_summary

import apiserver
from apiserver import (
    ApiServer,
    RecordedRequest,
    Reply,
    cut_stream,
    malformed,
    message,
    overloaded,
    prompt_too_long,
    rate_limited,
    server_error,
    start_server,
    tool_use_block,
)
from unbounded.compaction.auto import CIRCUIT_BREAKER_FAILURES
from unbounded.events import CompactionFinished, CompactionStarted, Event, ProviderRetried
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import (
    ModelResponse,
    OverloadedError,
    PromptTooLongError,
    RateLimitedError,
    ServerError,
)
from unbounded.providers.retry import RetryingProvider
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore
from unbounded.transcripts.claude_code import read_claude_code, validate_record

anthropic = pytest.importorskip("anthropic")

TURNS = 500
HTTP_TURNS = 120
FAULT_RATE = 0.10
SEED = 20_240_8
CLIENT_TIMEOUT = 0.15
"""The read timeout of a request scripted to time out (its reply waits `LATE_REPLY` seconds)."""
LATE_REPLY = 30.0
GENEROUS_TIMEOUT = 60.0
"""Every other request's timeout: far beyond any stall of a loaded machine."""
FAULT_HEADER = "x-soak-fault"
MAX_RETRIES = 3
BASE_DELAY, MAX_DELAY, JITTER = 0.5, 8.0, 0.25
PTL_EVERY = 5
"""Every fifth summary request (outside an outage) is answered prompt-too-long."""
OUTAGES = {"server_error": 60, "prompt_too_long": 300}
"""Turn at which the summary call starts failing every time, until the breaker trips."""
SUMMARY = (
    nine_section_summary("run every step; pending: the next step")
)
CONFIG = SessionConfig(
    model="claude-sonnet-5-5",
    system="You are a soak-test agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=40_000,  # auto-compaction at 26,800 tokens
    validate_requests=True,
)


def _last_text(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    if not messages:
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


@dataclass
class FaultScript:
    """Decides every reply: an answer, a random fault (10%), prompt-too-long on every fifth
    summary request, or an outage of the summarizer."""

    rng: random.Random
    outage: str | None = None
    turn: int = 0
    requests: int = 0
    summary_requests: int = 0
    random_faults: Counter[str] = field(default_factory=Counter)
    outage_faults: Counter[str] = field(default_factory=Counter)

    MAIN_FAULTS = ("rate_limited", "overloaded", "server_error", "cut_stream", "malformed", "timeout")
    ALL_FAULTS = (*MAIN_FAULTS, "prompt_too_long")

    def decide(self, body: Any) -> tuple[str, bool]:
        """("ok" or the fault's kind, whether this is a summary request)."""
        self.requests += 1
        summary = "<summary>" in _last_text(body)
        if summary:
            self.summary_requests += 1
            if self.outage is not None:
                self.outage_faults[self.outage] += 1
                return self.outage, True
            if self.summary_requests % PTL_EVERY == 0:
                self.random_faults["prompt_too_long"] += 1
                return "prompt_too_long", True
        if self.rng.random() < FAULT_RATE:
            kind = self.rng.choice(self.MAIN_FAULTS)
            self.random_faults[kind] += 1
            return kind, summary
        return "ok", summary

    def retry_after(self) -> str:
        """A retry-after header value for a 429, in seconds."""
        return self.rng.choice(["1", "2.5", "7"])

    def answer(self, summary: bool, body_bytes: int) -> tuple[str, dict[str, Any] | None, dict[str, Any]]:
        """(text, tool_use block or None, usage) of a good reply."""
        if summary:
            return SUMMARY, None, {"input_tokens": body_bytes // 4, "output_tokens": 60}
        tool = tool_use_block("Bash", {"command": f"make step{self.turn}"}, id=f"toolu_{self.requests:05d}")
        return f"step {self.turn}", tool, {"input_tokens": max(1, body_bytes // 4), "output_tokens": 30}

    # -- over HTTP: the apiserver reply for the decision the client's transport sent

    def __call__(self, request: RecordedRequest) -> Reply:
        kind, _, flag = request.headers[FAULT_HEADER].partition(":")
        summary = flag == "summary"
        if kind == "ok":
            text, tool, usage = self.answer(summary, len(request.body))
            blocks: list[Any] = [text] if tool is None else [text, tool]
            return message(*blocks, usage=usage, chunk_size=4096, id=f"msg_{self.requests:05d}")
        if kind == "rate_limited":
            return rate_limited(self.retry_after())
        if kind == "overloaded":
            return overloaded()
        if kind == "server_error":
            return server_error(500)
        if kind == "cut_stream":
            return cut_stream(message("a reply that is cut " * 10, chunk_size=8), after_events=4)
        if kind == "malformed":
            return malformed()
        if kind == "timeout":
            return message("too late", delay=LATE_REPLY)
        return prompt_too_long()


class DecidingTransport:
    """Decides each request's fault as it is sent, names it to the server in a header, and
    gives the short read timeout only to a request that is to time out (an HTTP transport,
    wrapping the SDK's HTTP package's own)."""

    def __init__(self, script: FaultScript) -> None:
        self.script = script
        self.inner = apiserver.sdk_http_package().AsyncHTTPTransport()

    async def handle_async_request(self, request: Any) -> Any:
        kind, summary = self.script.decide(orjson.loads(request.content))
        request.headers[FAULT_HEADER] = f"{kind}:{'summary' if summary else 'main'}"
        if kind == "timeout":
            apiserver.with_read_timeout(request, CLIENT_TIMEOUT)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class InProcessProvider:
    """The same script without HTTP: raises what AnthropicProvider maps each fault to."""

    name = "anthropic"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, script: FaultScript) -> None:
        self.script = script

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        body = orjson.dumps(request)
        kind, summary = self.script.decide(request)
        if kind == "ok":
            text, tool, usage = self.script.answer(summary, len(body))
            content: list[Any] = [{"type": "text", "text": text}] + ([tool] if tool else [])
            stop = "tool_use" if tool else "end_turn"
            return ModelResponse(content, stop, usage, "claude-sonnet-5-5", id=f"msg_{self.script.requests:05d}")
        if kind == "rate_limited":
            raise RateLimitedError("rate limited", retry_after=float(self.script.retry_after()), status=429)
        if kind == "overloaded":
            raise OverloadedError("Overloaded", status=529)
        if kind == "server_error":
            raise ServerError("Internal server error", status=500)
        if kind == "cut_stream":
            raise ServerError("the stream ended before message_stop (connection cut mid-reply)")
        if kind == "malformed":
            raise ServerError("malformed response (not JSON)")
        if kind == "timeout":
            raise ServerError("request timed out")
        raise PromptTooLongError("prompt is too long: 212345 tokens > 200000 maximum", actual_tokens=212_345, limit_tokens=200_000)


class DiskMirror:
    """Reads the transcript's new bytes after every turn: whole lines only, each valid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.entries: list[Entry] = []

    def refresh(self) -> None:
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        assert not data or data.endswith(b"\n"), "the transcript ends in a partial line"
        for raw in data.splitlines():
            record = orjson.loads(raw)
            validate_record(record, self.path, len(self.entries) + 1)
            self.entries.append(Entry(record, len(self.entries) + 1))
        self.offset += len(data)

    def check_view(self) -> None:
        view = messages_after_compact_boundary(self.entries)
        validate_request(normalize_messages(view))


@dataclass
class Figures:
    """What the soak did."""

    turns: int = 0
    calls: int = 0
    http_calls: int = 0
    random_faults: int = 0
    outage_faults: int = 0
    retries: int = 0
    compactions: int = 0
    extractive_takeovers: int = 0
    failed_compactions: int = 0
    max_consecutive_failures: int = 0
    messages_added: int = 0
    messages_lost: int = 0


def _compaction_outcomes(events: list[Event]) -> list[tuple[bool, str | None]]:
    """(succeeded, summarizer) per compaction attempt, from the event stream."""
    outcomes: list[tuple[bool, str | None]] = []
    open_attempt = False
    for event in events:
        if isinstance(event, CompactionStarted):
            if open_attempt:
                outcomes.append((False, None))
            open_attempt = True
        elif isinstance(event, CompactionFinished) and open_attempt:
            outcomes.append((True, event.summarizer))
            open_attempt = False
    if open_attempt:
        outcomes.append((False, None))
    return outcomes


def run_soak(folder: Path, api: ApiServer, *, turns: int = TURNS, http_turns: int = HTTP_TURNS) -> Figures:
    from unbounded.providers.anthropic import AnthropicProvider

    script = FaultScript(random.Random(SEED))
    api.anthropic.push(*([script] * 20 * http_turns))
    sleeps: list[float] = []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    events: list[Event] = []

    def sink(event: Event) -> None:
        events.append(event)
        if event.kind == "circuit_breaker_tripped":
            script.outage = None

    http = anthropic.DefaultAsyncHttpxClient(transport=DecidingTransport(script))
    client = api.anthropic_client(timeout=GENEROUS_TIMEOUT, http_client=http)
    options: dict[str, Any] = dict(
        max_retries=MAX_RETRIES, base_delay=BASE_DELAY, max_delay=MAX_DELAY, jitter=JITTER, sleep=sleep, events=sink
    )
    over_http = AnthropicProvider(client)
    in_process = InProcessProvider(script)
    main = RetryingProvider(over_http, seed=SEED, **options)
    summarizer = RetryingProvider(over_http, seed=SEED + 1, **options)
    # The breaker is what this soak checks: a summary-request budget large enough never to
    # decide first (with the default budget an outage hands over after 2 runs instead).
    policy = Policy(compact_max_summary_requests=1_000)
    session = Session.open(folder, CONFIG, policy=policy, summarizer=summarizer, events=sink, allowed_roots=[str(folder)])
    mirror = DiskMirror(folder / "transcript.jsonl")
    added: list[str] = []
    figures = Figures()

    async def drive() -> None:
        previous_tools: list[str] = []
        for turn in range(turns):
            script.turn = turn
            if turn == http_turns:  # the rest in process: same session, same retry wrappers
                main.inner = summarizer.inner = in_process
            for kind, start in OUTAGES.items():
                if turn == start:
                    script.outage = kind
            if previous_tools:
                entry = session.add_tool_results(
                    [{"type": "tool_result", "tool_use_id": tool_id, "content": f"output of turn {turn}\n" + "ok line\n" * 700} for tool_id in previous_tools]
                )
                added.append(str(entry.uuid))
            if turn % 10 == 0:
                added.append(str(session.add_user(f"Task {turn}: please carry on with step {turn}.").uuid))
            # Before every call: the view on disk is a valid request.
            mirror.refresh()
            mirror.check_view()
            response = await session.call(main, stream=True)
            assert response.text != "too late", "a reply scripted to time out was read"
            previous_tools = [str(block["id"]) for block in response.tool_uses]
            figures.turns += 1
            # After every turn: whole lines on disk, every record valid, and every message
            # the driver added present, in order.
            mirror.refresh()
            on_disk = [e.uuid for e in mirror.entries]
            positions = {uuid: index for index, uuid in enumerate(on_disk)}
            assert len(positions) == len(on_disk), "a record was written twice"
            missing = [uuid for uuid in added if uuid not in positions]
            assert not missing, f"turn {turn}: lost {missing}"
            order = [positions[uuid] for uuid in added]
            assert order == sorted(order), "messages out of order"
            if turn % 100 == 99:  # a full reload, as a restart would do it
                reloaded = read_claude_code(folder / "transcript.jsonl")
                assert [e.uuid for e in reloaded.entries] == on_disk and not reloaded.warnings

    asyncio.run(drive())
    assert isinstance(session.store, FolderStore)
    # Real client timeouts happened over HTTP, and a reply scripted to arrive too late never
    # was read (the short read timeout applies to those requests).
    assert any(r.headers[FAULT_HEADER] == "timeout:main" for r in api.requests)
    session.store.close()

    # Every wait: the server's retry-after exactly, else a jittered exponential backoff.
    retried = [e for e in events if isinstance(e, ProviderRetried)]
    assert len(retried) == len(sleeps) == main.stats.retries + summarizer.stats.retries
    for event, slept in zip(retried, sleeps, strict=True):
        assert slept == event.delay
        if event.retry_after is not None:
            assert slept == event.retry_after >= 1.0
        else:
            ceiling = min(MAX_DELAY, BASE_DELAY * 2 ** (event.attempt - 1))
            assert (1 - JITTER) * ceiling <= slept <= ceiling
    assert any(e.retry_after is not None for e in retried)

    # The breaker: never more than three failed compactions in a row; the third hands over
    # to the extractive summarizer at once.
    outcomes = _compaction_outcomes(events)
    run = 0
    for index, (ok, _) in enumerate(outcomes):
        run = 0 if ok else run + 1
        figures.max_consecutive_failures = max(figures.max_consecutive_failures, run)
        if run == CIRCUIT_BREAKER_FAILURES:
            assert outcomes[index + 1] == (True, "extractive")
    assert CIRCUIT_BREAKER_FAILURES == 3
    assert figures.max_consecutive_failures == 3  # both outages tripped it, at the third

    figures.calls = script.requests
    figures.http_calls = len(api.requests)
    figures.random_faults = sum(script.random_faults.values())
    figures.outage_faults = sum(script.outage_faults.values())
    figures.retries = len(sleeps)
    figures.compactions = sum(1 for ok, _ in outcomes if ok)
    figures.extractive_takeovers = sum(1 for ok, name in outcomes if ok and name == "extractive")
    figures.failed_compactions = sum(1 for ok, _ in outcomes if not ok)
    figures.messages_added = len(added)
    figures.messages_lost = sum(1 for uuid in added if uuid not in {e.uuid for e in mirror.entries})
    assert set(script.random_faults) == set(FaultScript.ALL_FAULTS), script.random_faults
    return figures


@pytest.fixture(autouse=True)
def _quiet_fast_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # TCP_NODELAY: the server writes headers and body separately, and each reply would
    # otherwise wait ~40 ms for a delayed ACK. Resets by timed-out clients are expected.
    monkeypatch.setattr(apiserver._Handler, "disable_nagle_algorithm", True)
    monkeypatch.setattr(apiserver._Server, "handle_error", lambda self, request, address: None)


def test_soak_500_turns_with_faults_loses_nothing(tmp_path: Path) -> None:
    with start_server() as api:
        figures = run_soak(tmp_path / "session", api)
        assert not api.unscripted
    random_share = figures.random_faults / figures.calls
    print(f"\nsoak: {figures}; random fault share {random_share:.1%}")
    assert figures.turns == TURNS and figures.messages_lost == 0 and figures.http_calls >= HTTP_TURNS
    assert 0.06 <= random_share <= 0.14  # 10 % drawn per call; the call count varies with compactions
    assert figures.compactions >= 20 and figures.extractive_takeovers >= 2
