"""A host that cancels `prepare()` while the summary call runs stops that call too.

Before the fix the summary request went on in the background (3 of 3 cancellations): the
compaction awaited it through a heartbeat loop that never cancelled it. Here the local server
streams a slow summary through the real SDK; the host cancels once the request has arrived;
the call's task must be gone at once and the server must see the client hang up."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from summaries import nine_section_summary

from apiserver import ApiServer, api_server_fixture, message, text_block  # noqa: F401  (registers the api_server fixture)
from unbounded.events import CompactionHeartbeat, CompactionStarted, Event
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

anthropic = pytest.importorskip("anthropic")  # a third-party extra; the project's own imports above fail loudly

CONFIG = SessionConfig(model="claude-sonnet-5-5", system="You are careful.", context_window=200_000)


async def _cancel_during_the_summary(session: Session, api_server: ApiServer, events: list[Event]) -> tuple[list[asyncio.Task[object]], int]:
    prepare = asyncio.ensure_future(session.prepare())
    deadline = time.monotonic() + 30  # until the call is under way (a hang guard, not a timing)
    while not (api_server.requests and any(isinstance(e, CompactionHeartbeat) for e in events)) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert api_server.requests, "the summary request never reached the server"
    # cancelled inside the heartbeat loop, the place that once let the call run on
    assert any(isinstance(e, CompactionHeartbeat) for e in events), "no heartbeat came"
    prepare.cancel()
    with pytest.raises(asyncio.CancelledError):
        await prepare
    left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    deadline = time.monotonic() + 30  # until the server notices the hang-up
    while not api_server.abandoned and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return left, len(api_server.abandoned)


def test_cancelling_prepare_cancels_the_summary_call(api_server: ApiServer, tmp_path: Path) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    events: list[Event] = []
    provider = AnthropicProvider(api_server.anthropic_client())
    policy = Policy(autocompact_pct_override=5, compact_heartbeat_seconds=0.05)
    session = Session.open(tmp_path / "s", CONFIG, policy=policy, summarizer=provider, events=events.append)
    session.add_user("Here is the log:\n" + "a line of the build log\n" * 3_000)
    session.record({"content": [{"type": "text", "text": "The build fails at the link step."}], "usage": {"input_tokens": 18_000, "output_tokens": 10}})
    session.add_user("Fix it.")
    slow = message(text_block(nine_section_summary("the build")), delay=0.2, chunk_size=4)
    api_server.anthropic.push(slow)
    left, abandoned = asyncio.run(_cancel_during_the_summary(session, api_server, events))
    assert any(isinstance(e, CompactionStarted) for e in events)
    assert left == []  # no request left running in the background
    assert abandoned == 1 and api_server.abandoned[0] is api_server.requests[0]
    assert session.status().compactions == 0 and len(session.entries) == 3  # nothing half-applied
    session.close()
