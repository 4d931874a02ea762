"""The summary written in the background and swapped in at the threshold (issue 28, point 1).

The summaries come from the real `anthropic` SDK talking to the local server (tests/apiserver.py);
the turns' own requests are built with `prepare()` and answered with `record()`, so the only
calls the server sees are the summaries'. Token counts follow the usage each reply reports:
with `autocompact_pct_override=5` a 200K window compacts at 9,000 tokens, and with
`background_summary_fraction=0.5` the summary starts near 4,500.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import ApiServer, after, api_server_fixture, message, text_block  # noqa: F401  (registers the api_server fixture)
from unbounded.events import (
    BackgroundSummaryDiscarded,
    BackgroundSummaryStarted,
    BackgroundSummarySwapped,
    Event,
    SummaryStall,
)
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

anthropic = pytest.importorskip("anthropic")

CONFIG = SessionConfig(model="claude-sonnet-5-5", system="You are careful.", context_window=200_000)
POLICY = Policy(
    autocompact_pct_override=5,
    background_summary=True,
    background_summary_fraction=0.5,
    compact_heartbeat_seconds=0.05,
)
LOG = "Here is the log:\n" + "a line of the build log\n" * 800


def _open(api_server: ApiServer, tmp_path: Path, events: list[Event], policy: Policy = POLICY) -> Session:
    from unbounded.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_server.anthropic_client())
    return Session.open(tmp_path / "s", CONFIG, policy=policy, summarizer=provider, events=events.append)


def _reply(session: Session, text: str, input_tokens: int) -> None:
    session.record({"content": [{"type": "text", "text": text}], "usage": {"input_tokens": input_tokens, "output_tokens": 10}})


def _texts(request: Any) -> list[str]:
    out: list[str] = []
    for m in request["messages"]:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(str(b.get("text", "")) for b in content)
    return out


def _summary_reply(delay: float = 0.0) -> Any:
    return message(text_block(nine_section_summary("the build")), delay=delay, chunk_size=400 if not delay else 8)


async def _until(condition: Callable[[], bool], limit: float = 30.0) -> None:
    """Poll `condition` until it holds, at most `limit` seconds (a hang guard, not a timing:
    the assertions after it say what went wrong)."""
    deadline = time.monotonic() + limit
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def _past_the_mark(session: Session) -> None:
    session.add_user(LOG)
    _reply(session, "The build fails at the link step.", 5_000)
    session.add_user("Fix it.")
    await session.prepare()  # past the mark: the summary starts, the turn does not wait for it


def test_background_summary_is_swapped_in_and_keeps_the_turns_recorded_meanwhile(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    written = threading.Event()  # the server answers the summary request once it is set
    api_server.anthropic.push(after(written, _summary_reply()))

    async def scenario() -> Any:
        await _past_the_mark(session)
        assert session.background.pending and [type(e) for e in events].count(BackgroundSummaryStarted) == 1
        assert session.status().compactions == 0
        # A turn recorded while the summary is still being written.
        await _until(lambda: bool(api_server.requests))  # the summary request is under way
        assert api_server.requests and not any(isinstance(e, BackgroundSummarySwapped) for e in events)
        _reply(session, "Linker flags updated in the Makefile.", 6_000)
        session.add_user("Now run the tests, please.")
        await session.prepare()  # under the threshold: nothing swapped yet
        _reply(session, "Tests: 3 failures in test_io.", 9_500)
        session.add_user("Fix test_io.")
        assert session.background.pending  # all of it recorded while the summary was written
        written.set()
        await session.background.settle()
        return await session.prepare()  # at the threshold: swapped in, no wait

    request = asyncio.run(scenario())
    validate_request(request["messages"])
    swapped = [e for e in events if isinstance(e, BackgroundSummarySwapped)]
    assert len(swapped) == 1 and swapped[0].kept_since == 4
    assert not any(isinstance(e, SummaryStall) for e in events)
    assert len(api_server.requests) == 1  # one summary call, made in the background
    texts = _texts(request)
    joined = "\n".join(texts)
    assert "This session continues an earlier conversation" in texts[0]
    assert "a line of the build log\na line" not in joined  # the log is summarized away
    for said in ("Linker flags updated in the Makefile.", "Now run the tests, please.", "Tests: 3 failures in test_io.", "Fix test_io."):
        assert joined.count(said) == 1, said  # kept once, verbatim
    assert session.status().compactions == 1
    session.close()
    # Read back from the folder: the swapped compaction relinks the records kept after it.
    reopened = Session.open(tmp_path / "s", CONFIG, policy=POLICY)
    validate_request(reopened.messages)
    reread = "\n".join(_texts({"messages": reopened.messages}))
    for said in ("Linker flags updated in the Makefile.", "Tests: 3 failures in test_io.", "Fix test_io."):
        assert reread.count(said) == 1, said
    reopened.close()


def test_a_superseded_summary_is_discarded_and_written_again(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    api_server.anthropic.push(_summary_reply(delay=0.05), _summary_reply(), _summary_reply())

    async def scenario() -> Any:
        await _past_the_mark(session)
        await _until(lambda: bool(api_server.requests))
        await session.compact()  # a manual compaction replaces what the summary covers
        assert not session.background.pending
        session.add_user(LOG)
        _reply(session, "The second build fails too.", 7_000)
        session.add_user("Look again.")
        await session.prepare()  # past the mark again: written again
        await session.background.settle()
        _reply(session, "Found it.", 9_500)
        session.add_user("Go on.")
        return await session.prepare()

    request = asyncio.run(scenario())
    validate_request(request["messages"])
    assert [e.reason for e in events if isinstance(e, BackgroundSummaryDiscarded)] == ["superseded"]
    assert [type(e) for e in events].count(BackgroundSummaryStarted) == 2
    assert len([e for e in events if isinstance(e, BackgroundSummarySwapped)]) == 1
    assert len(api_server.requests) == 3  # background, manual, background again
    assert "Go on." in str(request["messages"][-1]["content"])
    session.close()


def test_a_stale_summary_is_not_swapped_in(api_server: ApiServer, tmp_path: Path) -> None:
    """What the summary replaced changed under it (its last record is another object now):
    it is discarded at the threshold and written again, and the turn does not wait."""
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    api_server.anthropic.push(_summary_reply(), _summary_reply())

    async def scenario() -> Any:
        await _past_the_mark(session)
        await session.background.settle()
        last = session.entries[-1]
        session.entries[-1] = type(last)(dict(last.data), last.line)  # the same record, rewritten
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        request = await session.prepare()
        await session.background.settle()
        return request

    request = asyncio.run(scenario())
    validate_request(request["messages"])
    assert [e.reason for e in events if isinstance(e, BackgroundSummaryDiscarded)] == ["stale"]
    assert [type(e) for e in events].count(BackgroundSummaryStarted) == 2  # written again
    assert session.status().compactions == 0 and not any(isinstance(e, SummaryStall) for e in events)
    assert len(api_server.requests) == 2
    session.close()


def test_a_summary_that_would_leave_the_context_over_the_threshold_is_not_swapped_in(api_server: ApiServer, tmp_path: Path) -> None:
    """What was recorded since the summary started is kept verbatim: when that alone keeps
    the context over the threshold, the summary is dropped and written again."""
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    api_server.anthropic.push(_summary_reply(), _summary_reply())

    async def scenario() -> Any:
        await _past_the_mark(session)
        await session.background.settle()
        _reply(session, "Here is the whole module.", 9_500)
        session.add_user("And its twin:\n" + "a long line of the second module\n" * 1_500)  # ~12,000 tokens
        request = await session.prepare()
        await session.background.settle()
        return request

    request = asyncio.run(scenario())
    validate_request(request["messages"])
    assert [e.reason for e in events if isinstance(e, BackgroundSummaryDiscarded)] == ["too_large"]
    assert session.status().compactions == 0
    assert [type(e) for e in events].count(BackgroundSummaryStarted) == 2
    session.close()


def test_a_turn_at_the_window_edge_waits_and_that_is_a_stall(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    written = threading.Event()
    api_server.anthropic.push(after(written, _summary_reply()))

    async def scenario() -> Any:
        await _past_the_mark(session)
        _reply(session, "Huge output.", 185_000)  # past the effective window (180,000)
        session.add_user("Go on.")
        # The summary can end only once this coroutine waits, in prepare(): it is in flight
        # there however soon the server answers.
        written.set()
        return await session.prepare()  # must wait for the summary in flight

    request = asyncio.run(scenario())
    validate_request(request["messages"])
    stalls = [e for e in events if isinstance(e, SummaryStall)]
    assert [(s.background, s.tokens >= 180_000) for s in stalls] == [(True, True)]
    assert len([e for e in events if isinstance(e, BackgroundSummarySwapped)]) == 1
    session.close()


def test_without_the_background_summary_a_compaction_at_the_threshold_is_a_stall(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    session = _open(api_server, tmp_path, events, POLICY.with_changes(background_summary=False))
    api_server.anthropic.push(_summary_reply())

    async def scenario() -> None:
        await _past_the_mark(session)
        assert not session.background.pending
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        await session.prepare()

    asyncio.run(scenario())
    assert [(type(e).__name__, e.background) for e in events if isinstance(e, SummaryStall)] == [("SummaryStall", False)]
    assert session.status().compactions == 1
    session.close()


def test_closing_the_session_cancels_the_summary_call(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    api_server.anthropic.push(_summary_reply(delay=0.2))

    async def scenario() -> tuple[list[asyncio.Task[object]], int]:
        await _past_the_mark(session)
        # Until the reply is streaming (its first event written). A background summary holds
        # its events (heartbeats included) until it is swapped in: none reaches `events` here.
        await _until(lambda: bool(api_server.requests and api_server.requests[0].reply))
        assert api_server.requests, "the summary request never reached the server"
        task = next(t for t in asyncio.all_tasks() if t.get_name() == "unbounded-background-summary")
        session.close()
        for _ in range(100):  # the cancellation reaches the call at the task's next steps
            if task.done():
                break
            await asyncio.sleep(0)
        assert task.cancelled()
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
        await _until(lambda: bool(api_server.abandoned))  # the server noticed the hang-up
        return left, len(api_server.abandoned)

    left, abandoned = asyncio.run(scenario())
    assert [e.reason for e in events if isinstance(e, BackgroundSummaryDiscarded)] == ["closed"]
    assert left == []  # nothing runs on after close
    assert abandoned == 1
    reopened = Session.open(tmp_path / "s", CONFIG, policy=POLICY)
    assert reopened.status().compactions == 0 and len(reopened.entries) == 3  # nothing half-written
    reopened.close()


# -- any interleaving ----------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

STEP = st.tuples(
    st.sampled_from(["tool", "text"]),
    st.sampled_from([3_000, 5_000, 7_000, 9_500, 12_000, 185_000]),  # below, past the mark, at the threshold, at the edge
    st.booleans(),  # the summary in flight finishes before the next request (or not)
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=2, max_size=12))
def test_every_request_is_valid_and_keeps_each_record_once_whatever_the_interleaving(steps: list[tuple[str, int, bool]]) -> None:
    """Records, finished summaries and swaps in any order: every request is valid, holds the
    records of the turn that triggers it, and never holds a record twice."""
    from unbounded.providers.extractive import ExtractiveSummarizer

    events: list[Event] = []
    session = Session(CONFIG, policy=POLICY, summarizer=ExtractiveSummarizer(), events=events.append)

    async def scenario() -> None:
        session.add_user(LOG)
        for number, (kind, tokens, settle) in enumerate(steps):
            said = f"reply number {number} here"
            if kind == "tool":
                call_id = f"toolu_{number:03d}"
                session.record({"content": [{"type": "text", "text": said}, {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": f"make {number}"}}], "usage": {"input_tokens": tokens, "output_tokens": 10}})
                session.add_tool_results([{"type": "tool_result", "tool_use_id": call_id, "content": f"result number {number} here"}])
                latest = f"result number {number} here"
            else:
                _reply(session, said, tokens)
                latest = f"prompt number {number} here"
                session.add_user(latest)
            if settle:
                await session.background.settle()
            request = await session.prepare()
            validate_request(request["messages"])
            assert latest in str(request["messages"][-1]["content"])
            # The records themselves (the summary may name what it covers, kept tail included).
            verbatim = str([m for m in request["messages"] if "This session continues" not in str(m["content"])])
            for earlier in range(number + 1):
                for text in (f"reply number {earlier} here", f"result number {earlier} here", f"prompt number {earlier} here"):
                    assert verbatim.count(text) <= 1, text
        session.background.discard("closed")

    asyncio.run(scenario())
    swaps = [e for e in events if isinstance(e, BackgroundSummarySwapped)]
    assert all(s.kept_since >= 0 for s in swaps)


def test_idle_swaps_in_the_background_summary_instead_of_paying_for_another(api_server: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.compaction.idle import ResumeCosts

    # The break-even is tested in test_idle_compaction.py; here idle compaction is due.
    monkeypatch.setattr("unbounded.session_compaction.idle_compaction_pays", lambda *a, **k: ResumeCosts(1.0, 0.5))
    events: list[Event] = []
    session = _open(api_server, tmp_path, events)
    api_server.anthropic.push(_summary_reply())
    api_server.anthropic.push(_summary_reply())

    async def scenario() -> Any:
        await _past_the_mark(session)
        await session.background.settle()
        return await session.idle()

    result = asyncio.run(scenario())
    assert result is not None and session.status().compactions == 1
    assert len(api_server.requests) == 1  # the background summary's call, and no second one
    assert [type(e) for e in events].count(BackgroundSummarySwapped) == 1
    assert not any(isinstance(e, BackgroundSummaryDiscarded) for e in events)
    session.close()


# -- hooks and events at the swap ----------------------------------------------------------------

from dataclasses import dataclass  # noqa: E402

from unbounded.events import CompactionFinished, CompactionStarted  # noqa: E402


@dataclass(frozen=True)
class _Answer:
    blocked: bool = False
    block_reason: str | None = None
    new_custom_instructions: str | None = None
    user_display_message: str | None = None


class _Hooks:
    """Compaction hooks writing each call into `log` (beside the session's events)."""

    def __init__(self, log: list[object], answer: _Answer = _Answer()) -> None:
        self.log = log
        self.answer = answer

    async def arun_pre_compact(self, trigger: str, custom_instructions: str | None = None, /) -> _Answer:
        self.log.append(("PreCompact", trigger))
        return self.answer

    async def arun_session_start(self, source: str = "compact", /) -> list[str]:
        self.log.append(("SessionStart", source))
        return ["Project context reloaded after the compaction."]

    async def arun_post_compact(self, trigger: str, compact_summary: str = "", /) -> object:
        self.log.append(("PostCompact", "the build" in compact_summary))
        return None


def _open_with_hooks(api_server: ApiServer, tmp_path: Path, log: list[object], answer: _Answer = _Answer()) -> Session:
    from unbounded.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_server.anthropic_client())
    return Session.open(tmp_path / "s", CONFIG, policy=POLICY, summarizer=provider, events=log.append, hooks=_Hooks(log, answer))


def _compaction_log(log: list[object]) -> list[object]:
    """The hook calls and compaction events, in order, by name."""
    names: list[object] = []
    for item in log:
        if isinstance(item, tuple):
            names.append(item[0])
        elif isinstance(item, (CompactionStarted, CompactionFinished, BackgroundSummarySwapped, BackgroundSummaryDiscarded)):
            names.append(type(item).__name__)
    return names


def test_the_hooks_and_compaction_events_fire_at_the_swap_not_when_the_summary_is_written(api_server: ApiServer, tmp_path: Path) -> None:
    log: list[object] = []
    session = _open_with_hooks(api_server, tmp_path, log)
    api_server.anthropic.push(_summary_reply())

    async def scenario() -> tuple[list[object], Any]:
        await _past_the_mark(session)
        await session.background.settle()  # written: nothing is compacted yet
        before_swap = _compaction_log(log)
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        return before_swap, await session.prepare()

    before_swap, request = asyncio.run(scenario())
    assert before_swap == []
    assert _compaction_log(log) == ["PreCompact", "CompactionStarted", "SessionStart", "PostCompact", "CompactionFinished", "BackgroundSummarySwapped"]
    assert ("PostCompact", True) in log  # told the summary it swapped in
    assert "Project context reloaded after the compaction." in str(request["messages"])
    finished = next(e for e in log if isinstance(e, CompactionFinished))
    assert finished.post_tokens == next(e for e in log if isinstance(e, BackgroundSummarySwapped)).post_tokens
    validate_request(request["messages"])
    session.close()


def test_a_stale_summary_fires_no_hook_and_sends_none_of_its_events(api_server: ApiServer, tmp_path: Path) -> None:
    log: list[object] = []
    session = _open_with_hooks(api_server, tmp_path, log)
    api_server.anthropic.push(_summary_reply(), _summary_reply())

    async def scenario() -> None:
        await _past_the_mark(session)
        await session.background.settle()
        last = session.entries[-1]
        session.entries[-1] = type(last)(dict(last.data), last.line)  # the same record, rewritten
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        await session.prepare()  # stale: discarded, written again
        await session.background.settle()
        session.background.discard("closed")

    asyncio.run(scenario())
    assert _compaction_log(log) == ["BackgroundSummaryDiscarded", "BackgroundSummaryDiscarded"]
    assert [e.reason for e in log if isinstance(e, BackgroundSummaryDiscarded)] == ["stale", "closed"]
    assert session.status().compactions == 0
    session.close()


def test_a_precompact_hook_that_adds_instructions_at_the_swap_gets_them_in_a_summary_asked_once(api_server: ApiServer, tmp_path: Path) -> None:
    """The background summary was written without the hook's instructions: it is discarded
    and the turn compacts with them; the hook is asked once."""
    log: list[object] = []
    session = _open_with_hooks(api_server, tmp_path, log, _Answer(new_custom_instructions="Keep the failing test names."))
    api_server.anthropic.push(_summary_reply(), _summary_reply())

    async def scenario() -> None:
        await _past_the_mark(session)
        await session.background.settle()
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        await session.prepare()

    asyncio.run(scenario())
    assert _compaction_log(log) == ["PreCompact", "BackgroundSummaryDiscarded", "CompactionStarted", "SessionStart", "PostCompact", "CompactionFinished"]
    assert [e.reason for e in log if isinstance(e, BackgroundSummaryDiscarded)] == ["hook"]
    assert len(api_server.requests) == 2 and "Keep the failing test names." in str(api_server.requests[1].body)
    assert "Keep the failing test names." not in str(api_server.requests[0].body)
    assert session.status().compactions == 1
    assert [e.background for e in log if isinstance(e, SummaryStall)] == [True]  # the turn waited for that call
    session.close()


def test_a_precompact_hook_that_blocks_at_the_swap_stops_the_compaction_asked_once(api_server: ApiServer, tmp_path: Path) -> None:
    log: list[object] = []
    session = _open_with_hooks(api_server, tmp_path, log, _Answer(blocked=True, block_reason="not now"))
    api_server.anthropic.push(_summary_reply())

    async def scenario() -> None:
        await _past_the_mark(session)
        await session.background.settle()
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        await session.prepare()

    asyncio.run(scenario())
    assert [n for n in _compaction_log(log) if n != "CompactionStarted"] == ["PreCompact", "BackgroundSummaryDiscarded"]
    assert session.status().compactions == 0 and len(api_server.requests) == 1
    session.close()


def test_an_offline_summary_in_the_turn_is_no_stall(tmp_path: Path) -> None:
    """The offline hand-over writes without a call: the turn that compacts waits for nothing."""
    from unbounded.providers.extractive import ExtractiveSummarizer

    events: list[Event] = []
    policy = POLICY.with_changes(background_summary=False)
    session = Session.open(tmp_path / "s", CONFIG, policy=policy, summarizer=ExtractiveSummarizer(), events=events.append)

    async def scenario() -> None:
        await _past_the_mark(session)
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        await session.prepare()

    asyncio.run(scenario())
    assert session.status().compactions == 1
    assert not any(isinstance(e, SummaryStall) for e in events)
    session.close()


def test_a_failed_summary_sends_its_failure_at_the_threshold_and_fires_no_hook(api_server: ApiServer, tmp_path: Path) -> None:
    from apiserver import server_error
    from unbounded.events import CompactionFailed

    log: list[object] = []
    session = _open_with_hooks(api_server, tmp_path, log)
    api_server.anthropic.push(server_error(), server_error(), _summary_reply())

    async def scenario() -> list[object]:
        await _past_the_mark(session)
        await session.background.settle()  # failed: nothing said yet
        held = [e for e in log if isinstance(e, (CompactionStarted, CompactionFailed))]
        _reply(session, "Done.", 9_500)
        session.add_user("Next.")
        await session.prepare()  # taken: its failure reported, the summary started again
        session.background.discard("closed")
        return held

    held = asyncio.run(scenario())
    assert held == []
    assert [type(e).__name__ for e in log if isinstance(e, (CompactionStarted, CompactionFailed, BackgroundSummaryDiscarded))][:3] == ["CompactionStarted", "CompactionFailed", "BackgroundSummaryDiscarded"]
    assert not any(isinstance(item, tuple) for item in log)  # no hook fired
    assert [e.reason for e in log if isinstance(e, BackgroundSummaryDiscarded)] == ["failed", "closed"]  # written again, then closed
    session.close()
