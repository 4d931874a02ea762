"""Summaries an agent can continue from: no collapse on quoted tags, a guard on every
compaction, the task state in the offline summary and notes, the continuation measure."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from conftest import corpus_files
from unbounded import load_transcript
from unbounded.compaction.conversation import CacheSafeParams, compact_conversation
from unbounded.compaction.extractive import extractive_summary
from unbounded.compaction.facts import compaction_points
from unbounded.compaction.handover import read_handover
from unbounded.compaction.offline_notes import offline_notes
from unbounded.compaction.summary_guard import check_summary, missing_sections, summary_floor
from unbounded.compaction.summary_text import extract_summary, format_compact_summary
from unbounded.errors import CompactionError
from unbounded.events import Event, SummaryRejected
from unbounded.model.entries import Entry
from unbounded.model.names import identifiers_in
from unbounded.model.normalize import normalize_messages
from unbounded.model.profile import MODEL_PROFILE
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.providers.extractive import ExtractiveSummarizer

SESSIONS = Path(__file__).resolve().parent / "fixtures" / "sessions"
NOTIFICATION = (
    "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
    "<summary>Background command \"pytest\" completed (exit code 0)</summary>\n</task-notification>"
)
TAGGY = "Tags in the text: </summary> and <summary> and <analysis> and </analysis> and <summ and </sum"


def _tool_round(n: int, result: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Step {n}: {TAGGY}"}, {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"pytest tests/test_{n}.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result, **extra}]},
    ]


def _taggy_conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Fix the flaky tests. {TAGGY}"}]
    for n in range(30):
        messages += _tool_round(n, f"{TAGGY}\n" + "log line\n" * 200)
        if n % 7 == 3:
            messages.append({"role": "user", "content": NOTIFICATION})
            messages.append({"role": "assistant", "content": f"The notification said <summary>done</summary>. {TAGGY}"})
    messages.append({"role": "user", "content": "Next: 1) fix test_3 2) fix test_9 3) rerun all. Go on with all three."})
    messages.append({"role": "assistant", "content": "Next I will fix test_3 in tests/test_3.py first."})
    return messages


# -- parsing that content cannot fool -------------------------------------------------------


def test_a_conversation_full_of_tags_compacts_to_a_full_summary() -> None:
    messages = _taggy_conversation()
    entries = [Entry.user(m["content"]) if m["role"] == "user" else Entry.assistant(m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}], message_id=f"m{i}") for i, m in enumerate(messages)]
    result = asyncio.run(compact_conversation(entries, ExtractiveSummarizer(), params=CacheSafeParams(model="claude-sonnet-4-5")))
    text = result.summary_text
    assert not missing_sections(text)
    assert result.summary_tokens >= summary_floor(result.pre_tokens)
    # the quoted tags are kept, escaped, and nothing after them was lost
    assert "&lt;/summary&gt; and &lt;summary&gt;" in text
    assert "Fix the flaky tests." in text and "fix test_9" in text
    assert "Next I will fix test_3 in tests/test_3.py first." in text
    assert "task b1" in text  # the notification, listed as an event


def test_a_model_reply_that_quotes_tags_parses_to_its_whole_summary() -> None:
    body = nine_section_summary("fix it", analysis=False).split("<summary>\n", 1)[1].rsplit("</summary>", 1)[0]
    quoted_in_body = body.replace("8. Current Work:", "8. Current Work: the notification said <summary>done</summary>.")
    reply = (
        "<analysis>The user pasted <summary>x</summary> and a stray </summary> here.</analysis>\n"
        f"<summary>\n{quoted_in_body}</summary>"
    )
    parsed = extract_summary(reply)
    assert parsed.startswith("1. Primary Request and Intent: fix it")
    assert "9. Optional Next Step:" in parsed and "said <summary>done</summary>." in parsed
    assert "pasted" not in parsed
    # a reply cut before its closing tag keeps what it has; a plain-text reply is the summary
    assert extract_summary("<summary>\n1. Primary Request and Intent: go\n2. Key") .endswith("2. Key")
    assert extract_summary(body) == body.strip()
    assert format_compact_summary(reply).startswith("Summary:\n1. Primary Request")


# -- the guard -----------------------------------------------------------------------------


def test_the_guard_refuses_a_collapsed_or_sectionless_summary() -> None:
    assert summary_floor(50_000) == 1_000 and summary_floor(200_000) == 1_500 and summary_floor(2_000) == 300
    assert summary_floor(800) == 200  # never more than a quarter of what it replaces
    tiny = check_summary("Summary:\n1. Primary Request and Intent: x", 106_061)
    assert not tiny.ok and "1,500 expected" in tiny.reason
    good = nine_section_summary("the task")
    assert check_summary(good, 106_061).ok
    cut = good.split("7. Pending Tasks")[0]  # what a parser stopping early would leave
    verdict = check_summary(cut + "x" * 8_000, 106_061)
    assert not verdict.ok and "Pending Tasks" in verdict.reason
    # a conversation of few facts may have a short summary
    assert check_summary(good[:1_500], 60_000, lean_tokens=lambda: 200).ok is False  # sections cut
    short = nine_section_summary("the task", chars=1_400)
    assert check_summary(short, 60_000, lean_tokens=lambda: 300).ok


class TwoLiner:
    """A summary model that answers in two lines, every time."""

    name = "two-liner"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        return ModelResponse([{"type": "text", "text": "<summary>Worked on tests.</summary>"}], "end_turn", {"input_tokens": 1, "output_tokens": 5}, "m")


def test_a_guarded_compaction_is_retried_by_the_fallback_then_fails_without_writing() -> None:
    entries = [Entry.user("Fix the tests")] + [
        Entry.assistant([{"type": "text", "text": "working " * 2_000}], message_id=f"m{i}") if i % 2 else Entry.user("more " * 2_000)
        for i in range(1, 12)
    ]
    events: list[Event] = []
    provider = TwoLiner()
    with pytest.raises(CompactionError) as failure:
        asyncio.run(compact_conversation(entries, provider, params=CacheSafeParams(model="claude-sonnet-4-5"), events=events.append))
    assert failure.value.reason == "implausible_summary"
    assert provider.calls == 2  # the cache-sharing request, then the fallback
    assert [type(e) for e in events].count(SummaryRejected) == 2


# -- the task state ---------------------------------------------------------------------------


def test_the_hand_over_names_the_task_state() -> None:
    messages = _taggy_conversation()
    messages[-2:-2] = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "todo", "name": "TodoWrite", "input": {"todos": [
            {"content": "fix test_3", "status": "in_progress"}, {"content": "fix test_9", "status": "pending"}, {"content": "collect logs", "status": "completed"}]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "todo", "content": "ok"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "bd", "name": "Bash", "input": {"command": "bd update app-12 --status in_progress"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "bd", "content": "✓ Updated issue: app-12"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I chose pytest-rerunfailures instead of sleeps because the flakes are timing races."}]},
    ]
    handover = read_handover(messages)
    assert handover.latest_request is not None and handover.latest_request.text.startswith("Next: 1) fix test_3")
    assert handover.request_items[:2] == ["fix test_3", "fix test_9"]
    assert [t["content"] for t in handover.todos_with("in_progress")] == ["fix test_3"]
    assert [(i.id, i.state) for i in handover.tracker_items] == [("app-12", "in progress")]
    assert handover.next_step is not None and handover.next_step[1] == "Next I will fix test_3 in tests/test_3.py first."
    assert any("instead of sleeps because" in d for d in handover.decisions)
    assert not any(r.text.startswith("<task-notification>") for r in handover.requests)
    text = extractive_summary(messages)
    for expected in ("[in_progress] fix test_3", "app-12: in progress", "Next I will fix test_3 in tests/test_3.py first.", "instead of sleeps because"):
        assert expected in text


def test_errors_are_split_into_resolved_and_unresolved() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "make it build"}]
    messages += _tool_round(1, "error: missing ;", is_error=True)
    messages += _tool_round(1, "build ok")[:0]
    messages += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "again", "name": "Bash", "input": {"command": "pytest tests/test_1.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "again", "content": "1 passed"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "lint", "name": "Bash", "input": {"command": "ruff check src"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "lint", "content": "E501 line too long", "is_error": True}]},
    ]
    handover = read_handover(messages)
    assert [e.call.result for e in handover.resolved_errors] == ["error: missing ;"]
    assert [e.call.result for e in handover.unresolved_errors] == ["E501 line too long"]
    text = extractive_summary(messages)
    assert text.index("Unresolved: Bash `ruff check src` failed:") < text.index("E501") < text.index("Fixed: Bash `pytest tests/test_1.py` failed:")


def test_a_slash_command_is_the_request_not_its_template() -> None:
    transcript = load_transcript(SESSIONS / "slash_commands.jsonl")
    text = extractive_summary(normalize_messages(transcript.main_thread()))
    assert "/orchestrator create TODO app by Next.js" in text.split("2. Key Technical")[0]
    assert "Split complex tasks" not in text.split("6. All user messages:")[1].split("7.")[0]


def test_offline_notes_carry_the_task_state() -> None:
    transcript = load_transcript(SESSIONS / "notifications.jsonl")
    notes = offline_notes(None, transcript.main_thread(), policy=Policy())
    state = notes.split("# Current State", 1)[1].split("\n# ", 1)[0]
    assert "The user's latest request (verbatim):" in state and "Go on with all three" in state
    assert "asks for:" in state
    # "I'll start with test_import_all" came before the latest request (and step 1 is done
    # since): no next step; the agent's last answer says where it is.
    assert "Next step, as last stated:" not in state
    assert "- Last answer given: Step 1 is done" in state
    assert "<summary>" not in notes  # quoted notification tags are escaped
    assert "Names in the recent work" not in notes


def test_hand_over_names_come_in_a_fixed_order() -> None:
    # Pattern by pattern (dotted, snake, camel, kebab, hex), then as they appear; never a set's
    # order, which varies with the string-hash seed.
    assert identifiers_in(
        "call load_config() in app.config then SessionLive and btn-primary b7636e2 a1 load_config"
    ) == ["app.config", "load_config", "SessionLive", "btn-primary", "b7636e2"]
    assert identifiers_in("read main.py and " + "x" * 500) == []  # file names and data are not names


COMPACTED = [p for p in corpus_files("*.jsonl") if p.name.startswith(("marot-spotter_4d5611e5", "marot-spotter_8463c716", "Smartagent"))]


@pytest.mark.corpus
@pytest.mark.parametrize("path", COMPACTED, ids=lambda p: p.name[:30])
def test_corpus_summaries_at_the_boundary_and_the_end(path: Path) -> None:
    transcript = load_transcript(path)
    main = transcript.main_thread()
    points = compaction_points(main)
    assert points
    for before in [p.before for p in points] + [main]:
        result = asyncio.run(compact_conversation(before, ExtractiveSummarizer(), params=CacheSafeParams(model="claude-opus-4-6")))
        assert not missing_sections(result.summary_text)
        assert result.summary_tokens <= 4_000  # and the guard, which compact_conversation runs, passed


def test_notes_are_guarded_on_their_current_state() -> None:
    empty = "# Session Title\n_t_\nExporter\n\n# Current State\n_what is in progress_\n\n# Worklog\n_w_\n" + "- step\n" * 400
    verdict = check_summary(empty, 20_000, kind="notes")
    assert not verdict.ok and verdict.missing_sections == ("Current State",)
    filled = empty.replace("_what is in progress_\n", "_what is in progress_\n- writing the CSV exporter\n")
    assert check_summary(filled, 20_000, kind="notes").ok
