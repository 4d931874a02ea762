"""The offline summarizer: format, prompt detection, hand-over content, budget, determinism,
retention."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import corpus_files
from unbounded import load_transcript, normalize_messages
from unbounded.compaction.extractive import extractive_summary as summarize_conversation
from unbounded.compaction.facts import (
    add_scores,
    compaction_points,
    extract_facts,
    normalize_text,
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
    assert all(kept == total for kept, total in scores.values()), scores
    # Section 4 names the error; section 7 the unfinished request (the todo list arrives as a
    # rendered attachment in plain messages, and rehydration re-injects it after compaction).
    assert "FAILED test_cli.py::test_verbose" in body
    assert 'The user\'s first request: "Add a --verbose flag' in body
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
    assert '"what next?"' in text


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


def test_pending_and_next_step() -> None:
    answered: list[Any] = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": [{"type": "text", "text": "4"}]},
    ]
    body = _summary_body(summarize_conversation(answered))
    assert "No task list was kept" in body
    assert "if nothing remains, report the result and wait for the user" in body
    assert 'The user\'s latest request, verbatim: "What is 2+2?"' in body
    unfinished: list[Any] = [
        {"role": "user", "content": "Rename foo to bar everywhere"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "g", "name": "Grep", "input": {"pattern": "foo"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "g", "content": "a.py:1"}],
        },
    ]
    body = _summary_body(summarize_conversation(unfinished))
    assert 'The latest request was still being worked on: "Rename foo to bar everywhere"' in body
    assert "Continue from there without asking the user to repeat anything." in body
    assert "- Grep: foo -> ok" in body


def test_errors_are_paired_with_the_next_action() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "make the build pass"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "make"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "b1",
                    "is_error": True,
                    "content": "error: missing ;",
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "e1",
                    "name": "Edit",
                    "input": {"file_path": "/p/main.c", "old_string": "x", "new_string": "x;"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "e1", "content": "ok"}],
        },
    ]
    body = _summary_body(summarize_conversation(messages))
    assert "Still unresolved (1):\n   - [Bash: `make`] error: missing ;\n     Next action taken: Edit /p/main.c" in body


def test_previous_summary_is_carried_not_quoted_as_a_prompt() -> None:
    previous = (
        "This session is being continued from a previous conversation that ran out of context.\n\n"
        "Summary:\n1. Primary Request and Intent:\n   Build the importer.\n\n"
        '6. All user messages:\n   - "Build the importer for SWE-agent trajectories"\n   - "use orjson"\n\n'
        "7. Pending Tasks:\n   - none\n"
    )
    messages: list[Any] = [
        {"role": "user", "content": previous},
        {"role": "assistant", "content": "Continuing."},
        {"role": "user", "content": "now add tests"},
        *_padding(40_000),
    ]
    body = _summary_body(summarize_conversation(messages))
    assert "Build the importer for SWE-agent trajectories" in body
    assert "use orjson" in body
    assert 'The user\'s first request: "now add tests"' in body
    assert "Earlier context (from the previous summary, abridged)" in body


def _padding(chars: int) -> list[dict[str, Any]]:
    """A read with a large result: makes the conversation long enough for a rich summary."""
    return [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "pad",
                    "name": "Read",
                    "input": {"file_path": "/repo/big.txt"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "pad", "content": "y" * chars}],
        },
    ]


def test_rich_level_shows_code_excerpts_and_notes() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "Add a --verbose flag"},
        *_padding(80_000),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding the flag to the parser."},
                {
                    "type": "tool_use",
                    "id": "e",
                    "name": "Edit",
                    "input": {
                        "file_path": "/repo/cli.py",
                        "old_string": "a",
                        "new_string": "parser.add_argument('--verbose')",
                    },
                },
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "e", "content": "ok"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The flag is in place."}]},
    ]
    body = _summary_body(summarize_conversation(messages))
    assert "Last change (Edit):" in body and "parser.add_argument('--verbose')" in body
    assert "- The flag is in place." in body  # reported done
    assert 'Last assistant message: "The flag is in place."' in body
    assert "Languages: Python" in body


def _big_conversation(commands: int, prompt_words: int, result_chars: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(commands):
        messages.append(
            {
                "role": "user",
                "content": f"step {i}: " + "please continue the migration " * prompt_words,
            }
        )
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running step {i}."},
                    {
                        "type": "tool_use",
                        "id": f"r{i}",
                        "name": "Read",
                        "input": {"file_path": f"/repo/src/module_{i}.py"},
                    },
                    {
                        "type": "tool_use",
                        "id": f"b{i}",
                        "name": "Bash",
                        "input": {"command": f"pytest tests/test_module_{i}.py -q"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"r{i}",
                        "content": "x = 1\n" * (result_chars // 6),
                    },
                    {"type": "tool_result", "tool_use_id": f"b{i}", "content": "1 passed"},
                ],
            }
        )
    return messages


def test_summary_stays_small_relative_to_the_conversation() -> None:
    messages = _big_conversation(commands=20, prompt_words=3, result_chars=40_000)
    conversation_tokens = sum(content_tokens(m["content"]) for m in messages)
    text = summarize_conversation(messages)
    assert rough_token_count(text) <= 0.05 * conversation_tokens
    scores = retention_scores(extract_facts(messages), _summary_body(text))
    assert all(kept == total for kept, total in scores.values()), scores


def test_hard_cap_cuts_longest_lists_with_a_count() -> None:
    messages = _big_conversation(commands=300, prompt_words=20, result_chars=60)
    text = summarize_conversation(messages, max_tokens=3_000)
    assert rough_token_count(text) <= 3_000
    assert "more)" in text
    body = _summary_body(text)
    # every section is still there, and the first and the latest prompts survive
    assert all(title in body for title in SECTIONS)
    assert "step 0: please continue" in body and "step 299: please continue" in body


def test_lean_level_keeps_80_characters_of_every_prompt() -> None:
    messages = _big_conversation(commands=60, prompt_words=40, result_chars=60)
    text = summarize_conversation(messages, max_tokens=8_000, target_ratio=0.01)
    scores = retention_scores(extract_facts(messages), _summary_body(text))
    assert scores["user_prompts"] == (60, 60)
    assert scores["commands"] == (60, 60)
    assert scores["files_read"] == (60, 60)


def test_works_with_the_project_summary_prompt(session_2_1: Path) -> None:
    prompts = pytest.importorskip("unbounded.compaction.prompts")
    before, request = _fixture_request(session_2_1)
    request["messages"][-1] = {"role": "user", "content": prompts.full_compact_prompt("keep paths")}
    text = ExtractiveSummarizer().create_sync(request).text
    assert "keep paths" not in text
    assert all(
        kept == total for kept, total in retention_scores(extract_facts(before), text).values()
    )


# -- the real corpus ---------------------------------------------------------------------------

COMPACTED = [
    p
    for p in corpus_files("marot-spotter_*.jsonl")
    if p.name.startswith(("marot-spotter_4d5611e5", "marot-spotter_8463c716"))
]


@pytest.mark.corpus
def test_corpus_retention_and_compression() -> None:
    """At each recorded compaction point, our summary against the one Claude Code recorded."""
    if len(COMPACTED) != 2:
        pytest.skip("../shared/corpus/raw is not present")
    ours: dict[str, tuple[int, int]] = {}
    recorded: dict[str, tuple[int, int]] = {}
    summarizer = ExtractiveSummarizer()
    for path in COMPACTED:
        (point,) = compaction_points(load_transcript(path).main_thread())
        facts = extract_facts(point.before)
        messages: list[Any] = list(normalize_messages(point.before))
        request = _request([*messages, {"role": "user", "content": PROMPT}])
        text = summarizer.create_sync(request).text
        body = _summary_body(text)
        conversation_tokens = sum(content_tokens(m["content"]) for m in messages)
        assert rough_token_count(text) <= 0.05 * conversation_tokens
        ours = add_scores(ours, retention_scores(facts, body))
        recorded = add_scores(recorded, retention_scores(facts, point.recorded_summary))
    assert score_fraction(ours["user_prompts"]) == 1.0
    assert score_fraction(ours["files_modified"]) == 1.0
    assert score_fraction(ours["files_read"]) >= 0.95
    assert score_fraction(ours["errors"]) >= 0.90
    assert score_fraction(ours["commands"]) >= 0.90
    assert ours == {
        "user_prompts": (3, 3),
        "files_modified": (14, 14),
        "files_read": (24, 24),
        "errors": (3, 3),
        "commands": (49, 49),
    }
    for kind, (kept, total) in recorded.items():
        assert kept <= ours[kind][0] <= total
    assert normalize_text("x") == "x"


def test_compact_conversation_end_to_end(session_2_1: Path, tmp_path: Path) -> None:
    """The orchestrator with the extractive summarizer, hooks, rehydration and the ledger."""
    conversation = pytest.importorskip("unbounded.compaction.conversation")
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
    assert all(
        kept == total for kept, total in retention_scores(facts, result.summary_text).values()
    )
    # The extractive summary is built from the facts: no second copy as a ledger.
    assert "Facts ledger" not in result.summary_text
    assert [a.attachment["type"] for a in result.attachments if a.attachment] == ["todo"]
    assert any("outside the allowed roots" in line for line in result.skipped_attachments)
    assert [e.content for e in result.hook_results] == ["Project context reloaded."]


def test_one_call_description_for_the_offline_summary_and_the_offline_notes() -> None:
    from unbounded.compaction.extractive import describe_call
    from unbounded.compaction.offline_notes import offline_notes
    from unbounded.policy import Policy

    def call(name: str, **tool_input: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": "t", "name": name, "input": tool_input}

    assert describe_call(call("Edit", file_path="src/a.py", old_string="x", new_string="y")) == "Edit src/a.py"
    assert describe_call(call("Read", file_path="src/b.py")) == "Read src/b.py"
    assert describe_call(call("Bash", command="make   test  </summary>"), 40) == "Bash: `make test &lt;/summary&gt;`"
    assert describe_call(call("Grep", pattern="TODO")) == "Grep: TODO"
    assert describe_call(call("Mystery")) == "Mystery"
    long = "x" * 300
    assert len(describe_call(call("Bash", command=long), 160)) < len(describe_call(call("Bash", command=long), 400))
    # The offline notes' last step is the same description.
    notes = offline_notes(
        None,
        [{"role": "user", "content": "Run the tests."}, {"role": "assistant", "content": [call("Bash", command="pytest -q")]}],
        policy=Policy(),
    )
    assert f"- Last step: {describe_call(call('Bash', command='pytest -q'))}" in notes
