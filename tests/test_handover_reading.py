"""The hand-over's reading of a conversation: which blocks are calls, requests and facts,
what ends a tracker relation list, which files give `.env` key names, which summary's latest
request is carried."""

from __future__ import annotations

from typing import Any

from conversation import bash, read, says, use, user

from unbounded.compaction.carried import render_latest
from unbounded.compaction.handover import Request, read_handover

NOTIFICATION = "<task-notification><task-id>b1</task-id><status>completed</status></task-notification>"


def test_a_line_that_is_no_relation_ends_a_relation_list() -> None:
    shown = (
        "○ e-2 · Task   [● P1 · IN_PROGRESS]\n\n"
        "DEPENDS ON\n  → ✓ e-1: First ● P1\n\n  → ○ e-3: After a blank line ● P1\n"
        "Some words that are no relation\n  → ✓ e-9: under the words ● P1"
    )
    handover = read_handover([user("go"), *bash("s", "bd show e-2", shown)])
    task = next(item for item in handover.tracker_items if item.id == "e-2")
    assert task.depends_on == [("e-1", "closed"), ("e-3", "open")]


def test_only_env_files_give_key_names() -> None:
    messages = [
        user("go"),
        *read("r", "/p/config.py", "     1→A_KEY=1\n     2→B_TOKEN=2"),
        *read("e", "/p/.env", "     1→C_KEY=3"),
    ]
    assert read_handover(messages).env_keys == {"/p/.env": ["C_KEY"]}


def test_content_that_is_not_a_list_of_blocks_is_passed_over() -> None:
    messages: list[Any] = [
        user("first request"),
        {"role": "assistant", "content": 42},
        {"role": "user", "content": ["a stray string", 7, {"type": "text", "text": "second request"}]},
    ]
    handover = read_handover(messages)
    assert handover.requests == [Request(1, "first request"), Request(2, "second request")]


def test_only_an_assistant_s_tool_use_block_is_a_call() -> None:
    thinking = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "redacted_thinking", "data": "x"}]}
    image = {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": ""}}]}
    handover = read_handover([user("go"), thinking, image, *bash("b", "make", "ok")])
    assert [(call.position, call.name) for call in handover.calls] == [(5, "Bash")]


def test_each_user_text_is_sorted_by_its_own_classification() -> None:
    image = {"type": "image", "source": {"type": "base64", "data": ""}}
    texts = [{"type": "text", "text": "first ask"}, {"type": "text", "text": "second ask"}]
    handover = read_handover([{"role": "user", "content": [image, *texts]}])
    assert handover.requests == [Request(2, "first ask"), Request(3, "second ask")]


def test_the_latest_request_carried_is_the_newest_summary_s() -> None:
    def summary(request: str) -> str:
        return "\n".join(
            ["This session is being continued from a previous conversation.", "Summary:", *render_latest(request, "  ")]
        )

    handover = read_handover([user(summary("Build the old thing.")), user(summary("Build the new thing.")), says("ok")])
    assert handover.carried_latest == "Build the new thing."


def test_facts_count_the_requests_and_not_the_notifications() -> None:
    messages: list[Any] = [
        user(NOTIFICATION),
        user("fix the parser"),
        use("m", "Bash", command="make"),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "m", "content": "Error: make failed", "is_error": True},
                {"type": "text", "text": NOTIFICATION},
            ],
        },
        says("looking"),
    ]
    facts = read_handover(messages).facts
    assert facts.user_prompts == ("fix the parser",)
    assert [error.tool for error in facts.errors] == ["Bash"]


def test_a_command_with_no_name_is_no_request() -> None:
    handover = read_handover([user("go"), user("<command-name></command-name>"), says("ok")])
    assert handover.requests == [Request(1, "go")]
