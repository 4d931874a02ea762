"""Full and partial compaction: prompts, PTL retry, reply checks, relinking, the orchestrator."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded import ConfigError
from unbounded.compaction.conversation import (
    CacheSafeParams,
    compact_conversation,
    strip_images_and_documents,
)
from unbounded.compaction.prompts import (
    SUBAGENT_CONTINUATION_PROMPT,
    TEXT_ONLY_INSTRUCTION,
    full_compact_prompt,
    merge_instructions,
    partial_compact_prompt,
    summary_message_text,
)
from unbounded.compaction.ptl import (
    PTL_RETRY_MARKER,
    group_by_api_round,
    truncate_head_for_ptl_retry,
)
from unbounded.compaction.summary_text import check_summary_reply, format_compact_summary
from unbounded.errors import CompactionError
from unbounded.events import CompactionFailed, CompactionFinished, CompactionRetried, Event
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse, PromptTooLongError, ServerError
from unbounded.tokens.estimate import estimate_messages_tokens

SUMMARY = nine_section_summary("fix it", chars=1_600)
SECTIONS = [
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
]


# -- prompts ---------------------------------------------------------------------------------


def test_full_prompt_structure() -> None:
    prompt = full_compact_prompt()
    assert prompt.startswith(TEXT_ONLY_INSTRUCTION) and prompt.endswith(TEXT_ONLY_INSTRUCTION)
    assert "<analysis>" in prompt and "<summary>" in prompt
    for number, name in enumerate([*SECTIONS, "Current Work", "Optional Next Step"], 1):
        assert f"{number}. {name}" in prompt
    assert "Additional instructions" not in prompt


def test_custom_and_hook_instructions() -> None:
    merged = merge_instructions("focus on auth", "mention the failing test")
    assert merged == "focus on auth\n\nmention the failing test"
    assert merge_instructions(None, " ") is None
    prompt = full_compact_prompt(merged)
    assert prompt.index("focus on auth") < prompt.index("mention the failing test")
    assert prompt.index("Additional instructions") > prompt.index("9. Optional Next Step")
    assert prompt.endswith(TEXT_ONLY_INSTRUCTION)


def test_partial_prompts() -> None:
    up_to = partial_compact_prompt("up_to")
    assert "8. Work Completed" in up_to and "9. Context for Continuing Work" in up_to
    assert "Current Work" not in up_to
    recent = partial_compact_prompt("from")
    assert "RECENT" in recent and "8. Current Work" in recent
    with pytest.raises(ValueError):
        partial_compact_prompt("sideways")  # type: ignore[arg-type]


def test_subagent_prompt_and_summary_message() -> None:
    for part in (
        "Task Overview",
        "Current State",
        "Important Discoveries",
        "Next Steps",
        "Context to Preserve",
    ):
        assert part in SUBAGENT_CONTINUATION_PROMPT
    manual = summary_message_text("Summary:\nx", transcript_path="/t.jsonl")
    assert "/t.jsonl" in manual and "without asking" not in manual
    auto = summary_message_text("Summary:\nx", automatic=True, messages_preserved=True)
    assert "without asking the user" in auto and "unchanged" in auto


# -- reply checks and formatting -----------------------------------------------------------------


def reply(text: str, stop: str = "end_turn", tool: bool = False) -> ModelResponse:
    content: list[Any] = [{"type": "text", "text": text}] if text else []
    if tool:
        content.append({"type": "tool_use", "id": "t", "name": "Read", "input": {}})
    return ModelResponse(
        content=content, stop_reason=stop, usage={"input_tokens": 10, "output_tokens": 5}, model="m"
    )


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (reply(""), "no_summary"),
        (reply("", tool=True), "tool_use"),
        (reply("API Error: 500 overloaded"), "api_error"),
        (reply(SUMMARY, stop="max_tokens"), "truncated"),
    ],
)
def test_bad_replies_are_refused(response: ModelResponse, reason: str) -> None:
    with pytest.raises(CompactionError) as info:
        check_summary_reply(response)
    assert info.value.reason == reason


def test_formatting_drops_analysis() -> None:
    raw = "<analysis>scratch notes</analysis>\n<summary>\n1. Primary Request and Intent: fix it\n</summary>"
    formatted = format_compact_summary(check_summary_reply(reply(raw, tool=True)))
    assert formatted == "Summary:\n1. Primary Request and Intent: fix it"
    assert "scratch" not in formatted


# -- PTL truncation -----------------------------------------------------------------------------


def conversation(rounds: int, size: int = 400) -> list[MessageParam]:
    messages: list[MessageParam] = [{"role": "user", "content": "start the task"}]
    for n in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls"}}
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * size}],
            }
        )
    return messages


def test_grouping_by_api_round() -> None:
    groups = group_by_api_round(conversation(3))
    assert [len(g) for g in groups] == [1, 2, 2, 2]
    assert all(g[0]["role"] == "assistant" for g in groups[1:])


def test_drop_by_token_gap() -> None:
    messages = conversation(10)
    truncated = truncate_head_for_ptl_retry(messages, 250)
    assert truncated is not None
    assert truncated[0]["content"] == PTL_RETRY_MARKER
    validate_request(truncated)
    # rounds are ~105 tokens: the opening prompt and three rounds cover the 250-token gap
    assert len(truncated) == 1 + 2 * 7


def test_twenty_percent_fallback_and_the_marker_bug() -> None:
    messages = conversation(10)
    first = truncate_head_for_ptl_retry(messages, None)
    assert first is not None and first[0]["content"] == PTL_RETRY_MARKER
    # The marker must not become its own group: each retry keeps making progress.
    second = truncate_head_for_ptl_retry(first, None)
    assert second is not None and len(second) < len(first)
    third = truncate_head_for_ptl_retry(second, None)
    assert third is not None and len(third) < len(second)
    assert sum(1 for m in third if m["content"] == PTL_RETRY_MARKER) == 1
    validate_request(third)


def test_gives_up_when_everything_would_go() -> None:
    assert truncate_head_for_ptl_retry(conversation(2), 10_000_000) is None
    assert truncate_head_for_ptl_retry(conversation(0), None) is None


# -- media stripping ----------------------------------------------------------------------------


def test_strip_images_and_documents_inside_tool_results() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    messages: list[MessageParam] = [
        {"role": "user", "content": [image, {"type": "text", "text": "see"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [
                        {"type": "document", "source": {}},
                        {"type": "text", "text": "pdf"},
                    ],
                }
            ],
        },
        {"role": "assistant", "content": "plain"},
    ]
    stripped = strip_images_and_documents(messages)
    assert stripped[0]["content"][0] == {"type": "text", "text": "[image]"}
    assert stripped[2]["content"][0]["content"][0] == {"type": "text", "text": "[document]"}
    assert stripped[1] is messages[1] and stripped[3] is messages[3]
    assert messages[0]["content"][0]["type"] == "image"  # input untouched


# -- the orchestrator ---------------------------------------------------------------------------


class ScriptedProvider:
    """A Provider answering from a script: each item is a reply or an exception (or a callable)."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.requests: list[ProviderRequest] = []

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        self.requests.append(request)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if callable(item):
            item = item(request)
        if isinstance(item, Exception):
            raise item
        return item


def identity_planner(request: ProviderRequest, skip_cache_write: bool) -> ProviderRequest:
    return request


def session_entries(turns: int = 6, size: int = 200) -> list[Entry]:
    entries: list[Entry] = []
    for n in range(turns):
        entries.append(Entry.user(f"request number {n}: please handle part {n}"))
        entries.append(
            Entry.assistant(
                [
                    {
                        "type": "tool_use",
                        "id": f"tool{n}",
                        "name": "Bash",
                        "input": {"command": f"make part{n}"},
                    }
                ],
                message_id=f"m{n}",
                usage={"input_tokens": 100 * n, "output_tokens": 10},
            )
        )
        entries.append(
            Entry.user(
                [{"type": "tool_result", "tool_use_id": f"tool{n}", "content": "ok " * size}]
            )
        )
        entries.append(
            Entry.assistant([{"type": "text", "text": f"part {n} done"}], message_id=f"m{n}b")
        )
    return entries


def run(coro: Any) -> Any:
    return asyncio.run(coro)


PARAMS = CacheSafeParams(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
)


def test_full_compaction_result_and_view() -> None:
    provider = ScriptedProvider([reply(SUMMARY)])
    events: list[Event] = []
    entries = session_entries()
    result = run(
        compact_conversation(
            entries,
            provider,
            params=PARAMS,
            trigger="auto",
            transcript_path="/s.jsonl",
            planner=identity_planner,
            events=events.append,
        )
    )
    boundary = result.boundary
    assert boundary.is_compact_boundary
    assert boundary.compact_metadata["trigger"] == "auto"
    assert boundary.compact_metadata["preTokens"] == result.pre_tokens > 0
    assert boundary.compact_metadata["messagesSummarized"] == len(entries)
    assert boundary.compact_metadata["preCompactDiscoveredTools"] == ["Bash"]
    assert boundary.logical_parent_uuid == entries[-1].uuid
    summary = result.summary_messages[0]
    assert summary.is_compact_summary and "Summary:\n1. Primary Request" in str(summary.content)
    assert "/s.jsonl" in str(summary.content) and "without asking the user" in str(summary.content)
    # the request shares the main conversation's parameters and ends with the prompt
    request = provider.requests[0]
    assert request["system"] == PARAMS.system and request["tools"] == PARAMS.tools
    assert request["messages"][:-1] == normalize_messages(entries)
    assert (
        "nine" not in request["messages"][-1]["content"]
        and "<summary>" in request["messages"][-1]["content"]
    )
    view = normalize_messages(result.view())
    validate_request(view)
    assert len(view) == 1
    assert result.post_tokens < result.pre_tokens
    assert [type(e) for e in events][-1] is CompactionFinished


def test_manual_summary_has_no_continue_instruction() -> None:
    result = run(
        compact_conversation(
            session_entries(),
            ScriptedProvider([reply(SUMMARY)]),
            params=PARAMS,
            planner=identity_planner,
        )
    )
    assert "without asking" not in str(result.summary_messages[0].content)


def test_summaries_chain_across_boundaries() -> None:
    entries = session_entries(3)
    first = run(
        compact_conversation(
            entries, ScriptedProvider([reply(SUMMARY)]), params=PARAMS, planner=identity_planner
        )
    )
    later = [*entries, *first.new_entries(), *session_entries(2)]
    provider = ScriptedProvider([reply(SUMMARY)])
    run(compact_conversation(later, provider, params=PARAMS, planner=identity_planner))
    sent = provider.requests[0]["messages"]
    assert "This session continues an earlier conversation" in str(sent[0]["content"])
    assert not any("request number 2" in str(m["content"]) for m in sent)  # before the boundary


def test_partial_up_to_keeps_the_tail_and_relinks_it() -> None:
    entries = session_entries(6)
    pivot = entries[12]  # the user prompt of turn 3
    provider = ScriptedProvider([reply(SUMMARY)])
    result = run(
        compact_conversation(
            entries,
            provider,
            params=PARAMS,
            direction="up_to",
            pivot_uuid=pivot.uuid,
            planner=identity_planner,
        )
    )
    assert result.messages_to_keep[0] is pivot and len(result.messages_to_keep) == 12
    segment = result.boundary.compact_metadata["preservedSegment"]
    assert segment == {
        "headUuid": pivot.uuid,
        "anchorUuid": result.summary_messages[0].uuid,
        "tailUuid": entries[-1].uuid,
    }
    assert "Work Completed" in provider.requests[0]["messages"][-1]["content"]
    assert not any(
        "request number 3" in str(m["content"]) for m in provider.requests[0]["messages"]
    )
    # The append-only transcript: old entries, then the new ones; the view splices the tail back.
    transcript = [*entries, *result.new_entries()]
    view = messages_after_compact_boundary(transcript)
    messages = normalize_messages(view)
    validate_request(messages)
    assert "request number 3" in str(messages[0]["content"]) and "This session continues" in str(
        messages[0]["content"]
    )
    assert all(e.usage is None for e in view)  # kept entries lose their stale usage


def test_partial_from_keeps_the_prefix() -> None:
    entries = session_entries(6)
    pivot = entries[8]
    provider = ScriptedProvider([reply(SUMMARY)])
    result = run(
        compact_conversation(
            entries,
            provider,
            params=PARAMS,
            direction="from",
            pivot_uuid=pivot.uuid,
            planner=identity_planner,
        )
    )
    assert len(result.messages_to_keep) == 8
    assert provider.requests[0]["messages"][:-1] == normalize_messages(
        entries
    )  # all sent, prefix cached
    assert "RECENT" in provider.requests[0]["messages"][-1]["content"]
    view = normalize_messages(messages_after_compact_boundary([*entries, *result.new_entries()]))
    validate_request(view)
    assert "request number 0" in str(view[0]["content"])
    assert "This session continues" in str(view[-1]["content"])


def test_pivot_moves_back_to_a_round_start() -> None:
    entries = session_entries(4)
    result = run(
        compact_conversation(
            entries,
            ScriptedProvider([reply(SUMMARY)]),
            params=PARAMS,
            direction="up_to",
            pivot_uuid=entries[10].uuid,
            planner=identity_planner,
        )
    )
    assert result.messages_to_keep[0] is entries[8]
    with pytest.raises(ConfigError, match="not in the conversation"):
        run(
            compact_conversation(
                entries,
                ScriptedProvider([reply(SUMMARY)]),
                params=PARAMS,
                direction="up_to",
                pivot_uuid="nope",
                planner=identity_planner,
            )
        )
    with pytest.raises(ConfigError, match="leaves nothing"):
        run(
            compact_conversation(
                entries,
                ScriptedProvider([reply(SUMMARY)]),
                params=PARAMS,
                direction="up_to",
                pivot_uuid=entries[1].uuid,
                planner=identity_planner,
            )
        )


def too_long_unless_fits(window: int) -> Callable[[ProviderRequest], Any]:
    def answer(request: ProviderRequest) -> Any:
        tokens = estimate_messages_tokens(request["messages"])
        if tokens > window:
            return PromptTooLongError(
                f"prompt is too long: {tokens} tokens > {window} maximum",
                actual_tokens=tokens,
                limit_tokens=window,
            )
        return reply(SUMMARY)

    return answer


def test_retry_converges_on_three_times_the_window() -> None:
    entries = session_entries(30, size=400)
    window = estimate_messages_tokens(normalize_messages(entries)) // 3
    provider = ScriptedProvider([too_long_unless_fits(window)])
    events: list[Event] = []
    result = run(
        compact_conversation(
            entries, provider, params=PARAMS, planner=identity_planner, events=events.append
        )
    )
    assert result.attempts == 2
    assert estimate_messages_tokens(provider.requests[-1]["messages"]) <= window
    assert any(isinstance(e, CompactionRetried) for e in events)
    assert provider.requests[-1]["messages"][0]["content"] == PTL_RETRY_MARKER


def test_retry_without_token_gap_uses_twenty_percent() -> None:
    entries = session_entries(10, size=400)
    calls = iter(
        [
            PromptTooLongError("prompt is too long"),
            PromptTooLongError("prompt is too long"),
            reply(SUMMARY),
        ]
    )
    provider = ScriptedProvider([lambda request: next(calls)])
    result = run(compact_conversation(entries, provider, params=PARAMS, planner=identity_planner))
    sizes = [len(r["messages"]) for r in provider.requests]
    assert result.attempts == 3 and sizes[0] > sizes[1] > sizes[2]


def test_gives_up_with_a_clear_error_and_touches_nothing() -> None:
    entries = session_entries(3)
    provider = ScriptedProvider(
        [
            PromptTooLongError(
                "prompt is too long: 900000 tokens > 1000 maximum",
                actual_tokens=900_000,
                limit_tokens=1_000,
            )
        ]
    )
    events: list[Event] = []
    with pytest.raises(CompactionError, match="too long to summarize") as info:
        run(
            compact_conversation(
                entries, provider, params=PARAMS, planner=identity_planner, events=events.append
            )
        )
    assert info.value.reason == "prompt_too_long"
    assert isinstance(events[-1], CompactionFailed)


def test_fallback_call_after_a_failed_cache_sharing_call() -> None:
    provider = ScriptedProvider([ServerError("boom", status=500), reply(SUMMARY)])
    result = run(
        compact_conversation(session_entries(), provider, params=PARAMS, planner=identity_planner)
    )
    assert result.used_fallback
    fallback = provider.requests[1]
    # Its messages hold tool calls, so it declares the tools (the API refuses tool blocks
    # without them), none of them callable.
    assert fallback["max_tokens"] == 20_000 and fallback["tools"] == PARAMS.tools
    assert fallback["tool_choice"] == {"type": "none"}
    assert fallback["system"] != PARAMS.system


def test_tool_call_reply_is_refused() -> None:
    provider = ScriptedProvider([reply("", tool=True)])
    with pytest.raises(CompactionError) as info:
        run(
            compact_conversation(
                session_entries(), provider, params=PARAMS, planner=identity_planner
            )
        )
    assert info.value.reason == "tool_use"


def test_heartbeat_while_the_call_runs() -> None:
    events: list[Event] = []
    two_beats = asyncio.Event()

    def sink(event: Event) -> None:
        events.append(event)
        if sum(e.kind == "compaction_heartbeat" for e in events) >= 2:
            two_beats.set()

    class Slow(ScriptedProvider):
        async def create(
            self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
        ) -> ModelResponse:
            # Answers after the second beat (30 s at most: a hang guard), not after a sleep
            # that a stalled loop could outlast with a single beat.
            with contextlib.suppress(asyncio.TimeoutError):  # the assertions below say what went wrong
                await asyncio.wait_for(two_beats.wait(), 30)
            return reply(SUMMARY)

    run(
        compact_conversation(
            session_entries(),
            Slow([]),
            params=PARAMS,
            planner=identity_planner,
            policy=Policy(compact_heartbeat_seconds=0.1),
            events=sink,
        )
    )
    beats = [e.elapsed_seconds for e in events if e.kind == "compaction_heartbeat"]
    assert len(beats) >= 2 and beats == sorted(set(beats)) and beats[0] > 0  # one per interval, growing
    assert [e.kind for e in events][-1] == "compaction_finished"  # all of them before the summary landed


def test_disabled_and_empty() -> None:
    with pytest.raises(CompactionError, match="disabled"):
        run(
            compact_conversation(
                session_entries(),
                ScriptedProvider([reply(SUMMARY)]),
                params=PARAMS,
                policy=Policy(compact_enabled=False),
                planner=identity_planner,
            )
        )
    with pytest.raises(CompactionError, match="not enough"):
        run(
            compact_conversation(
                [], ScriptedProvider([reply(SUMMARY)]), params=PARAMS, planner=identity_planner
            )
        )
    with pytest.raises(ConfigError):
        CacheSafeParams(model="")


def test_rehydration_and_ledger_hooks_are_used() -> None:
    provider = ScriptedProvider([reply(SUMMARY)])
    seen: dict[str, Any] = {}

    def rehydrate(kept: list[Entry]) -> tuple[list[dict[str, Any]], list[str]]:
        seen["kept"] = kept
        return [{"type": "todo", "content": [{"content": "ship", "status": "pending"}]}], [
            "/x: gone"
        ]

    result = run(
        compact_conversation(
            session_entries(),
            provider,
            params=PARAMS,
            planner=identity_planner,
            rehydrate=rehydrate,
            facts_ledger=lambda entries: "Facts ledger:\n- make part0",
        )
    )
    assert seen["kept"] == [] and result.skipped_attachments == ["/x: gone"]
    assert [a.attachment["type"] for a in result.attachments] == ["todo"]  # type: ignore[index]
    assert result.summary_text.endswith("Facts ledger:\n- make part0")
    view = normalize_messages(result.view())
    validate_request(view)
    assert "ship" in str(view[0]["content"])
    no_ledger = run(
        compact_conversation(
            session_entries(),
            ScriptedProvider([reply(SUMMARY)]),
            params=PARAMS,
            planner=identity_planner,
            policy=Policy(facts_ledger=False),
            facts_ledger=lambda entries: "Facts ledger",
        )
    )
    assert "Facts ledger" not in no_ledger.summary_text


def test_partial_pivot_across_an_earlier_partial_compaction_is_refused() -> None:
    entries = session_entries(6)
    first = run(compact_conversation(entries, ScriptedProvider([reply(SUMMARY)]), params=PARAMS,
                                     direction="up_to", pivot_uuid=entries[12].uuid, planner=identity_planner))
    later = [*entries, *first.new_entries(), *session_entries(2)]
    # the view is [boundary, summary, entries[12:] (spliced back), the two new turns]
    kept_old = entries[16]
    with pytest.raises(ConfigError, match="both sides of an earlier partial compaction"):
        run(compact_conversation(later, ScriptedProvider([reply(SUMMARY)]), params=PARAMS,
                                 direction="up_to", pivot_uuid=kept_old.uuid, planner=identity_planner))
    # a pivot after the spliced part keeps one run of the file and works
    new_turn = later[-8]
    result = run(compact_conversation(later, ScriptedProvider([reply(SUMMARY)]), params=PARAMS,
                                      direction="up_to", pivot_uuid=new_turn.uuid, planner=identity_planner))
    view = normalize_messages(messages_after_compact_boundary([*later, *result.new_entries()]))
    validate_request(view)


def test_ptl_truncation_of_a_history_of_user_messages_only() -> None:
    """One API round (user messages only) still shrinks: its oldest blocks go, and a retry's
    marker is never what gets dropped again."""
    from unbounded.compaction.ptl import PTL_RETRY_MARKER, truncate_head_for_ptl_retry

    blocks = [{"type": "text", "text": f"message {i} " + "word " * 200} for i in range(10)]
    once = truncate_head_for_ptl_retry([{"role": "user", "content": blocks}], None)
    assert once is not None and len(once) == 1
    assert once[0]["content"][0]["text"] == PTL_RETRY_MARKER and "message 2 " in once[0]["content"][1]["text"]
    twice = truncate_head_for_ptl_retry(once, 600)
    assert twice is not None and twice[0]["content"][0]["text"] == PTL_RETRY_MARKER
    assert "message 5 " in twice[0]["content"][1]["text"]  # ~250 tokens a block: 3 cover 600
    assert truncate_head_for_ptl_retry([{"role": "user", "content": "one long text"}], 10) is None
    several = truncate_head_for_ptl_retry([{"role": "user", "content": b["text"]} for b in blocks], 300)
    assert several is not None and several[0]["content"] == PTL_RETRY_MARKER and len(several) == 9
