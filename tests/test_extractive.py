"""The offline summarizer: format, prompt detection, hand-over content, budget, determinism,
retention."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import corpus_files
from unbounded import load_transcript, normalize_messages
from unbounded.compaction import conversation, prompts
from unbounded.compaction.facts import (
    add_scores,
    compaction_points,
    extract_facts,
    retention_scores,
    score_fraction,
)
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest
from unbounded.providers.base import Provider
from unbounded.providers.extractive import ExtractiveSummarizer, split_summary_prompt
from unbounded.tokens.estimate import content_tokens, rough_token_count

PROMPT = "Summarize the conversation. Answer with <analysis> then <summary> blocks."
SECTIONS = [
    "1. Primary Request and Intent:",
    "2. Key Technical Concepts:",
    "3. Files and Code Sections:",
    "4. Errors and fixes:",
    "5. Problem Solving:",
    "6. All user messages:",
    "7. Pending Tasks:",
    "8. Current Work:",
    "9. Optional Next Step:",
]


def _summary_body(text: str) -> str:
    assert text.startswith("Summary:\n"), text[:200]
    assert "<summary>" not in text and "<analysis>" not in text
    return text[len("Summary:\n") :]


def _request(messages: list[Any]) -> ProviderRequest:
    return cast(ProviderRequest, {"messages": messages})


def _fixture_request(session_2_1: Path) -> tuple[list[Any], ProviderRequest]:
    main = load_transcript(session_2_1).main_thread()
    (point,) = compaction_points(main)
    messages: list[Any] = list(normalize_messages(point.before))
    return point.before, _request([*messages, {"role": "user", "content": PROMPT}])


def test_fixture_summary_has_the_nine_sections_and_keeps_every_fact(session_2_1: Path) -> None:
    before, request = _fixture_request(session_2_1)
    response = ExtractiveSummarizer().create_sync(request)
    text = response.text
    body = _summary_body(text)
    positions = [body.index(title) for title in SECTIONS]
    assert positions == sorted(positions)
    assert body.startswith("1. Primary Request and Intent:\n")
    assert PROMPT not in text
    facts = extract_facts(before)
    scores = retention_scores(facts, body)
    # every request and every file changed is kept (commands are summarized, not listed)
    assert scores["user_prompts"][0] == scores["user_prompts"][1] > 0
    assert scores["files_modified"][0] == scores["files_modified"][1] > 0
    # Section 4 names the error; section 1 the request.
    assert "FAILED test_cli.py::test_verbose" in body
    assert "> Add a --verbose flag" in body
    assert response.stop_reason == "end_turn"
    assert response.model == "extractive"
    assert response.usage["output_tokens"] == rough_token_count(text)
    assert response.usage["input_tokens"] == sum(
        content_tokens(m["content"]) for m in request["messages"]
    )


def test_same_input_same_bytes(session_2_1: Path) -> None:
    _, request = _fixture_request(session_2_1)
    summarizer = ExtractiveSummarizer()
    first = summarizer.create_sync(request)
    second = asyncio.run(summarizer.create(request))
    third = ExtractiveSummarizer().create_sync(request)
    assert first.text.encode() == second.text.encode() == third.text.encode()
    assert first.id == second.id == third.id and first.id.startswith("msg_extractive_")


def test_is_a_provider() -> None:
    summarizer = ExtractiveSummarizer()
    assert isinstance(summarizer, Provider)
    assert summarizer.name == "extractive"
    assert summarizer.supports_cache_edits is False
    with pytest.raises(ConfigError):
        ExtractiveSummarizer(max_tokens=0)
    with pytest.raises(ConfigError):
        ExtractiveSummarizer(target_ratio=0)


def test_create_sync_works_inside_a_running_loop() -> None:
    async def inside() -> str:
        return (
            ExtractiveSummarizer().create_sync(_request([{"role": "user", "content": "hi"}])).text
        )

    assert "hi" in asyncio.run(inside())


def test_summary_prompt_detection() -> None:
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the parser"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}}
            ],
        },
    ]
    results = {"type": "tool_result", "tool_use_id": "t", "content": "a.py"}
    # the prompt merged into the tool results' message: only the prompt's block goes
    merged = [
        *conversation,
        {"role": "user", "content": [results, {"type": "text", "text": PROMPT}]},
    ]
    kept, prompt = split_summary_prompt(merged)
    assert prompt == PROMPT
    assert kept[-1] == {"role": "user", "content": [results]}
    # a separate message goes whole
    separate = [
        *conversation,
        {"role": "user", "content": [results]},
        {"role": "user", "content": PROMPT},
    ]
    kept, prompt = split_summary_prompt(separate)
    assert prompt == PROMPT and len(kept) == 3
    # no marker, nothing removed; a custom marker
    plain = [*conversation, {"role": "user", "content": "what next?"}]
    assert split_summary_prompt(plain) == (plain, None)
    custom = [*conversation, {"role": "user", "content": "SUMMARIZE-NOW please"}]
    assert split_summary_prompt(custom, "SUMMARIZE-NOW")[1] == "SUMMARIZE-NOW please"
    text = (
        ExtractiveSummarizer(summary_prompt_marker="SUMMARIZE-NOW")
        .create_sync(_request(custom))
        .text
    )
    assert "SUMMARIZE-NOW" not in text
    # the last user message is a real request when it does not hold the marker
    text = ExtractiveSummarizer().create_sync(_request(plain)).text
    assert "> what next?" in text


def test_up_to_prompt_renames_sections_8_and_9() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "Add logging"},
        {"role": "assistant", "content": "Done."},
        {
            "role": "user",
            "content": "8. Work Completed ... 9. Context for Continuing Work. <summary>",
        },
    ]
    text = ExtractiveSummarizer().create_sync(_request(messages)).text
    assert "8. Work Completed:" in text and "9. Context for Continuing Work:" in text
    assert "8. Current Work:" not in text


def test_works_with_the_project_summary_prompt(session_2_1: Path) -> None:
    before, request = _fixture_request(session_2_1)
    request["messages"][-1] = {"role": "user", "content": prompts.full_compact_prompt("keep paths")}
    text = ExtractiveSummarizer().create_sync(request).text
    assert "keep paths" not in text
    scores = retention_scores(extract_facts(before), text)
    assert scores["user_prompts"][0] == scores["user_prompts"][1]


# -- the real corpus ---------------------------------------------------------------------------

COMPACTED = [
    p
    for p in corpus_files("*.jsonl")
    if p.name.startswith(("marot-spotter_4d5611e5", "marot-spotter_8463c716", "Smartagent-so-PAI"))
]


@pytest.mark.corpus
def test_corpus_points_keep_the_requests_and_the_changed_files() -> None:
    """At each recorded compaction point, ours against the summary Claude Code recorded: at
    most 4,000 tokens, every request and changed file kept, and no fewer files read or
    errors named than the recorded one."""
    if not COMPACTED:
        pytest.skip("../shared/corpus/raw is not present")
    ours: dict[str, tuple[int, int]] = {}
    recorded: dict[str, tuple[int, int]] = {}
    summarizer = ExtractiveSummarizer()
    points = 0
    for path in COMPACTED:
        for point in compaction_points(load_transcript(path).main_thread()):
            points += 1
            facts = extract_facts(point.before)
            messages: list[Any] = list(normalize_messages(point.before))
            text = summarizer.create_sync(_request([*messages, {"role": "user", "content": PROMPT}])).text
            assert rough_token_count(text) <= 4_000
            ours = add_scores(ours, retention_scores(facts, _summary_body(text)))
            recorded = add_scores(recorded, retention_scores(facts, point.recorded_summary))
    assert points == 6
    assert score_fraction(ours["user_prompts"]) == 1.0
    assert score_fraction(ours["files_modified"]) == 1.0
    for kind in ("files_read", "errors"):
        assert ours[kind][0] >= recorded[kind][0], (kind, ours[kind], recorded[kind])


def test_compact_conversation_end_to_end(session_2_1: Path, tmp_path: Path) -> None:
    """The orchestrator with the extractive summarizer, hooks, rehydration and the ledger."""
    from unbounded.compaction.facts import facts_ledger_for
    from unbounded.compaction.rehydrate import make_rehydrator, working_state_from_entries
    from unbounded.hooks import HookRunner, HookSettings

    main = load_transcript(session_2_1).main_thread()
    (point,) = compaction_points(main)
    settings = (
        HookSettings()
        .with_hook("PreCompact", lambda payload: "Keep the flag name.")
        .with_hook("SessionStart", lambda payload: "Project context reloaded.", matcher="compact")
    )
    hooks = HookRunner(settings, session_id="s", cwd=tmp_path)
    state = working_state_from_entries(point.before)
    result = asyncio.run(
        conversation.compact_conversation(
            point.before,
            ExtractiveSummarizer(),
            params=conversation.CacheSafeParams(model="claude-sonnet-4-5", max_tokens=32_000),
            hooks=hooks,
            rehydrate=make_rehydrator(state, allowed_roots=[tmp_path]),
            facts_ledger=facts_ledger_for,
        )
    )
    facts = extract_facts(point.before)
    scores = retention_scores(facts, result.summary_text)
    assert scores["user_prompts"][0] == scores["user_prompts"][1]
    assert scores["files_modified"][0] == scores["files_modified"][1]
    # The extractive summary is built from the facts: no second copy as a ledger.
    assert "Facts ledger" not in result.summary_text
    assert [a.attachment["type"] for a in result.attachments if a.attachment] == ["todo"]
    assert any("outside the allowed roots" in line for line in result.skipped_attachments)
    assert [e.content for e in result.hook_results] == ["Project context reloaded."]
