"""Cache-break detection on scripted sessions: the simulator produces the usage the API would
report, the detector must explain each drop the script induces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unbounded.caching.break_detector import (
    PromptCacheBreakDetector,
    compare_prompt_states,
    is_cache_break,
    snapshot_request,
)
from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.caching.simulator import CacheSimulator
from unbounded.caching.ttl import CacheTtl
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.events import CacheBreak, Event, ExpectedCacheDrop
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy

TABLE = load_model_table()
SYSTEM = "You are a careful coding agent. Prefer small, verified steps. " * 300
TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}},
]
GREP = {"name": "Grep", "description": "Search files.", "input_schema": {"type": "object"}}


def conversation(turns: int, *, summary: bool = False) -> list[dict[str, Any]]:
    if summary:
        return [{"role": "user", "content": "Summary of the earlier conversation: " + "s" * 800}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the login bug. " * 20}]
    for turn in range(turns):
        tool_id = f"toolu_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading file {turn}."},
                    {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"n": turn}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_id, "content": f"{turn}" * 4000}
                ],
            }
        )
    return messages


def build(
    turns: int,
    *,
    model: str = "claude-sonnet-4-5",
    system: str = SYSTEM,
    tools: list[dict[str, Any]] | None = None,
    ttl: CacheTtl = "5m",
    prefix_ttl: CacheTtl | None = None,
    summary: bool = False,
    **extra: Any,
) -> ProviderRequest:
    body: dict[str, Any] = {
        "model": model,
        "system": system,
        "tools": TOOLS if tools is None else tools,
        "messages": conversation(turns, summary=summary),
        **extra,
    }
    return plan_cache_breakpoints(body, ttl=ttl, prefix_ttl=prefix_ttl).request  # type: ignore[arg-type]


class Session:
    """A simulated API plus the detector, the way the pipeline wires them."""

    def __init__(self, tmp_path: Path | None = None, **kwargs: Any) -> None:
        self.events: list[Event] = []
        self.api = CacheSimulator(TABLE)
        self.detector = PromptCacheBreakDetector(
            diff_dir=tmp_path, sink=self.events.append, **kwargs
        )

    def call(
        self, time: float, request: ProviderRequest, source: str = "repl_main_thread"
    ) -> CacheBreak | ExpectedCacheDrop | None:
        self.detector.record_prompt_state(request, query_source=source, now=time)
        usage = self.api.step(time, request, query_source=source).usage()
        return self.detector.check_response_for_cache_break(usage, query_source=source, now=time)


def warm(session: Session, turns: int = 4, start: float = 0.0, **kwargs: Any) -> float:
    time = start
    for turn in range(1, turns + 1):
        assert session.call(time, build(turn, **kwargs)) is None
        time += 20
    return time


def test_scripted_session_explains_every_break(tmp_path: Path, capsys: Any) -> None:
    session = Session(tmp_path)
    time = warm(session)
    found: list[tuple[str, ...]] = []

    # 1. model change (the session stays on the new model)
    opus = "claude-opus-4-6"
    event = session.call(time, build(5, model=opus))
    assert isinstance(event, CacheBreak)
    assert event.reason == "model changed (claude-sonnet-4-5 → claude-opus-4-6)"
    found.append(event.causes)
    time += 20
    assert session.call(time, build(6, model=opus)) is None
    time += 20

    # 2. system prompt change
    system = SYSTEM + "x" * 142
    event = session.call(time, build(7, model=opus, system=system))
    assert isinstance(event, CacheBreak)
    assert event.changes == ("system prompt changed (+142 chars)",)
    found.append(event.causes)
    time += 20
    assert session.call(time, build(8, model=opus, system=system)) is None
    time += 20

    # 3. tools change
    grown = [*TOOLS, GREP]
    event = session.call(time, build(9, model=opus, system=system, tools=grown))
    assert isinstance(event, CacheBreak)
    assert event.changes == ("tools changed (+1/-0 tools; added Grep)",)
    found.append(event.causes)
    time += 20
    assert session.call(time, build(10, model=opus, system=system, tools=grown)) is None

    # 4. a TTL gap of 6 minutes
    time += 360
    event = session.call(time, build(11, model=opus, system=system, tools=grown))
    assert isinstance(event, CacheBreak)
    assert event.changes == ("possible 5min TTL expiry (6.0 min since the last call)",)
    assert event.gap_seconds == pytest.approx(360)
    found.append(event.causes)
    time += 20
    assert session.call(time, build(12, model=opus, system=system, tools=grown)) is None
    time += 20

    # 5. compaction: announced, so excused (the system prompt and tools are still read)
    session.detector.notify_compaction("repl_main_thread")
    event = session.call(time, build(0, model=opus, system=system, tools=grown, summary=True))
    assert isinstance(event, ExpectedCacheDrop)
    assert event.reason == "compaction"
    assert event.current_read > 4_000
    time += 20

    # 6. cache deletion: announced by the cached-microcompact tier, so excused
    for turn in (1, 2, 3, 4, 5, 6):
        assert session.call(time, build(turn, model=opus, system=system, tools=grown)) is None
        time += 20
    edited = build(7, model=opus, system=system, tools=grown)
    edited["cache_edits"] = [{"type": "delete", "cache_reference": f"toolu_{i}"} for i in range(5)]
    session.detector.notify_cache_deletion("repl_main_thread", deleted_tokens=5 * 1000)
    event = session.call(time, edited)
    assert isinstance(event, ExpectedCacheDrop)
    assert event.reason == "cache_deletion"
    time += 20

    # 7. nothing changed, short gap: the server dropped it
    session.api = CacheSimulator(TABLE)  # an eviction we did not cause
    event = session.call(time, build(8, model=opus, system=system, tools=grown))
    assert isinstance(event, CacheBreak)
    assert event.changes == ("likely server-side (prompt unchanged, <5min gap)",)
    found.append(event.causes)

    assert found == [("model",), ("system",), ("tools",), ("ttl_expiry",), ("server_side",)]
    breaks = [e for e in session.events if isinstance(e, CacheBreak)]
    assert len(breaks) == 5
    assert sum(isinstance(e, ExpectedCacheDrop) for e in session.events) == 2
    for index, event in enumerate(breaks, start=1):
        assert event.diff_path is not None and event.diff_path.exists()
        assert event.diff_path.name.startswith(f"cache-break-{index:04d}-repl_main_thread")
    system_diff = breaks[1].diff_path
    assert system_diff is not None
    text = system_diff.read_text()
    assert "system prompt changed (+142 chars)" in text
    assert text.count("\n+") >= 1
    assert "+++ this request" in text
    assert "added Grep" in breaks[2].reason
    assert capsys.readouterr() == ("", "")  # the library never prints


def test_one_hour_ttl_gap(tmp_path: Path) -> None:
    session = Session(tmp_path)
    time = warm(session, ttl="1h")
    assert session.call(time + 600, build(5, ttl="1h")) is None  # 10 minutes: still cached
    event = session.call(time + 600 + 3700, build(6, ttl="1h"))
    assert isinstance(event, CacheBreak)
    assert event.changes == ("possible 1h TTL expiry (61.7 min since the last call)",)


def test_a_pause_that_keeps_only_the_one_hour_prefix_is_a_5min_expiry(tmp_path: Path) -> None:
    session = Session(tmp_path)
    time = warm(session, prefix_ttl="1h")
    event = session.call(time + 14 * 60, build(5, prefix_ttl="1h"))
    assert isinstance(event, CacheBreak)
    # The 1-hour tools and system entry is still read; the messages' 5-minute one expired.
    assert 0 < event.current_read < event.previous_read
    assert event.changes == ("possible 5min TTL expiry (14.3 min since the last call)",)
    assert session.detector.snapshot() is not None
    assert session.detector.snapshot().ttl == "5m"  # type: ignore[union-attr]


def test_ttl_flip_is_a_cache_control_change(tmp_path: Path) -> None:
    session = Session(tmp_path)
    time = warm(session)
    event = session.call(time, build(5, ttl="1h"))
    assert isinstance(event, CacheBreak)
    assert event.causes == ("cache_control",)
    assert event.reason == "cache_control changed (scope or TTL)"


def test_messages_changed_without_announcement() -> None:
    session = Session()
    time = warm(session)
    changed = build(5)
    changed["messages"][2]["content"][0]["content"] = "[Old tool result content cleared]"  # type: ignore[index]
    event = session.call(time, changed)
    assert isinstance(event, CacheBreak)
    assert event.causes == ("messages",)
    assert "message #2" in event.reason
    assert event.diff_path is None  # no directory given: nothing written


def test_deletion_reported_by_usage_is_excused_without_notice() -> None:
    session = Session()
    time = warm(session, turns=6)
    edited = build(7)
    edited["cache_edits"] = [{"type": "delete", "cache_reference": f"toolu_{i}"} for i in range(5)]
    event = session.call(time, edited)
    assert isinstance(event, ExpectedCacheDrop)
    assert event.deleted_tokens is not None and event.deleted_tokens > 2000


def test_deletion_of_unknown_size_excuses_the_drop() -> None:
    detector = PromptCacheBreakDetector()
    detector.record_prompt_state(build(1), now=0)
    detector.check_response_for_cache_break({"cache_read_input_tokens": 50_000}, now=0)
    detector.notify_cache_deletion()
    detector.record_prompt_state(build(1), now=1)
    event = detector.check_response_for_cache_break({"cache_read_input_tokens": 1_000}, now=1)
    assert isinstance(event, ExpectedCacheDrop) and event.deleted_tokens is None
    # The notice covers one call only.
    detector.record_prompt_state(build(1), now=2)
    detector.check_response_for_cache_break({"cache_read_input_tokens": 50_000}, now=2)
    detector.record_prompt_state(build(1), now=3)
    assert isinstance(
        detector.check_response_for_cache_break({"cache_read_input_tokens": 1_000}, now=3),
        CacheBreak,
    )


def test_deletion_smaller_than_the_drop_is_still_a_break() -> None:
    detector = PromptCacheBreakDetector()
    detector.record_prompt_state(build(1), now=0)
    detector.check_response_for_cache_break({"cache_read_input_tokens": 50_000}, now=0)
    detector.notify_cache_deletion(deleted_tokens=3_000)
    detector.record_prompt_state(build(1), now=1)
    event = detector.check_response_for_cache_break({"cache_read_input_tokens": 10_000}, now=1)
    assert isinstance(event, CacheBreak)


@pytest.mark.parametrize(
    ("previous", "current", "flagged"),
    [
        (100_000, 95_001, False),  # 4.999% drop
        (100_000, 94_000, True),  # 6% and 6,000 tokens
        (30_000, 28_100, False),  # 6.3% but 1,900 tokens
        (30_000, 27_999, True),  # 6.7% and 2,001 tokens
        (1_000, 0, False),  # 100% but only 1,000 tokens
    ],
)
def test_thresholds(previous: int, current: int, flagged: bool) -> None:
    assert is_cache_break(previous, current, Policy()) is flagged
    detector = PromptCacheBreakDetector()
    detector.record_prompt_state(build(1), now=0)
    assert (
        detector.check_response_for_cache_break({"cache_read_input_tokens": previous}, now=0)
        is None
    )
    detector.record_prompt_state(build(1), now=1)
    event = detector.check_response_for_cache_break({"cache_read_input_tokens": current}, now=1)
    assert isinstance(event, CacheBreak) is flagged


def test_policy_thresholds_are_used() -> None:
    policy = Policy(cache_break_min_drop_fraction=0.5, cache_break_min_drop_tokens=100)
    assert not is_cache_break(10_000, 6_000, policy)
    assert is_cache_break(10_000, 4_000, policy)


def test_haiku_is_excluded() -> None:
    detector = PromptCacheBreakDetector()
    detector.record_prompt_state(build(1, model="claude-haiku-4-5"), now=0)
    detector.check_response_for_cache_break({"cache_read_input_tokens": 80_000}, now=0)
    detector.record_prompt_state(build(1, model="claude-haiku-4-5"), now=1)
    assert detector.check_response_for_cache_break({"cache_read_input_tokens": 0}, now=1) is None


def test_query_sources_are_tracked_separately() -> None:
    session = Session()
    time = warm(session)
    # A sub-agent's first call reads nothing: not a break of the main thread.
    assert (
        session.call(time, build(1, system="You are a sub-agent. " * 300), "agent:explore") is None
    )
    assert session.call(time + 5, build(5)) is None
    assert session.detector.snapshot("agent:explore") is not None


def test_snapshot_and_compare() -> None:
    a = snapshot_request(
        build(2, betas=["b1"], thinking={"type": "enabled", "budget_tokens": 1024})
    )
    b = snapshot_request(
        build(
            2,
            betas=["b2"],
            thinking={"type": "enabled", "budget_tokens": 2048},
            output_config={"effort": "high"},
            tool_choice={"type": "any"},
        )
    )
    causes = [c.cause for c in compare_prompt_states(a, b)]
    assert causes == ["betas", "thinking", "effort", "extra_body"]
    descriptions = [c.description for c in compare_prompt_states(a, b)]
    assert descriptions[0] == "betas changed (+1/-1: +b2, -b1)"
    assert descriptions[2] == "effort changed (None → high)"
    assert descriptions[3] == "extra body params changed (tool_choice)"
    assert a.global_cache_strategy == "org"
    assert a.tools_names == ("Read", "Bash")
    assert "== tools (2) ==" in a.diffable
    edited_tool = [dict(TOOLS[0], description="Read any file."), TOOLS[1]]
    c = snapshot_request(build(2, tools=edited_tool))
    d = snapshot_request(build(2, tools=list(reversed(TOOLS))))
    base = snapshot_request(build(2))
    assert [x.description for x in compare_prompt_states(base, c)] == [
        "tools changed (+0/-0 tools; schema changed: Read)"
    ]
    assert (
        compare_prompt_states(base, d)[0].description
        == "tools changed (+0/-0 tools; order changed)"
    )
    assert compare_prompt_states(base, snapshot_request(build(3))) == []


def test_wrong_parameters() -> None:
    with pytest.raises(ConfigError):
        PromptCacheBreakDetector(policy="strict")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        PromptCacheBreakDetector(excluded_models=[""])
    detector = PromptCacheBreakDetector()
    with pytest.raises(ConfigError):
        detector.notify_cache_deletion(deleted_tokens=-1)
    with pytest.raises(ConfigError):
        detector.record_prompt_state(build(1), query_source="", now=0)


def test_custom_diff_writer(tmp_path: Path) -> None:
    written: dict[Path, str] = {}
    detector = PromptCacheBreakDetector(
        diff_dir=tmp_path, write_diff=lambda path, text: written.__setitem__(path, text)
    )
    detector.record_prompt_state(build(1), query_source="agent:a b", now=0)
    detector.check_response_for_cache_break(
        {"cache_read_input_tokens": 90_000}, query_source="agent:a b", now=0
    )
    detector.record_prompt_state(build(1, model="claude-opus-4-6"), query_source="agent:a b", now=1)
    event = detector.check_response_for_cache_break(
        {"cache_read_input_tokens": 0}, query_source="agent:a b", now=1
    )
    assert isinstance(event, CacheBreak)
    assert event.diff_path == tmp_path / "cache-break-0001-agent_a_b.diff"
    assert "-model: claude-sonnet-4-5" in written[event.diff_path]
    assert not list(tmp_path.iterdir())
    assert event.kind == "cache_break"
    assert event.drop == 90_000
