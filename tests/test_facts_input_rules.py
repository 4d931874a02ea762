"""The rules of the facts ledger's input and of retention scoring, one test each: how far a
prompt or an error must survive to count as kept, how a line is clipped, which user texts are
prompts, which todos are open, and the corpus score (RETENTION.md)."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.facts import (
    ErrorFact,
    Facts,
    add_scores,
    clip,
    compaction_points,
    extract_facts,
    is_prompt_text,
    retention_scores,
)
from unbounded.model.entries import Entry


def _assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def _use(call: str, name: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": name, "input": tool_input}


def _record(kind: str, content: Any, **fields: Any) -> Entry:
    role = "assistant" if kind == "assistant" else "user"
    return Entry({"type": kind, "message": {"role": role, "content": content}, **fields})


_SUMMARY = (
    "This session is being continued from a previous conversation.\n\n"
    "The user's latest request (verbatim):\n> {latest}\n"
)


# -- retention scoring: how much of a fact must survive ---------------------------------------


def test_a_prompt_counts_as_kept_when_its_first_80_characters_survive() -> None:
    prompt = "please move the parser into its own module and keep every public name importable, then docs"
    kept = prompt[:80] + "| and the rest was paraphrased"
    assert prompt[80] not in "| "
    facts = Facts(user_prompts=(prompt,))
    assert retention_scores(facts, kept)["user_prompts"] == (1, 1)
    assert retention_scores(facts, prompt[:79])["user_prompts"] == (0, 1)


def test_an_error_counts_as_kept_when_its_first_50_characters_survive() -> None:
    error = "FAILED tests/test_cli.py::test_verbose - AssertionError: flag not wired"
    kept = error[:50] + "| (cut by the summary)"
    assert error[50] not in "| "
    facts = Facts(errors=(ErrorFact("Bash", error),))
    assert retention_scores(facts, kept)["errors"] == (1, 1)
    assert retention_scores(facts, error[:49])["errors"] == (0, 1)


# -- clipping a line ---------------------------------------------------------------------------


def test_clip_to_no_characters_leaves_only_the_ellipsis() -> None:
    assert clip("short text", 0) == "…"
    assert clip("word " * 200, 0) == "…"


def test_clip_reads_past_a_prefix_that_is_mostly_whitespace() -> None:
    # The first window collapses to one word: the text goes on after it, so it is read further.
    text = "start" + " " * 1_000 + "end of the line"
    assert clip(text, 100) == "start end of the line"
    assert clip(text, 8) == "start en…"


class _CountingText(str):
    """A text that records how far each slice of it reaches."""

    reach: list[int]

    def __getitem__(self, key: Any) -> str:
        if isinstance(key, slice) and key.stop is not None:
            self.reach.append(key.stop)
        return str.__getitem__(self, key)


def test_clip_of_a_huge_text_reads_only_its_start() -> None:
    text = _CountingText("word " * 200_000)
    text.reach = []
    assert clip(text, 100) == ("word " * 20)[:100] + "…"
    assert text.reach and max(text.reach) < 1_000


# -- which user texts are prompts --------------------------------------------------------------


def test_a_blank_user_text_is_no_prompt() -> None:
    assert not is_prompt_text("  \n\t ")
    assert not is_prompt_text("")
    assert is_prompt_text("  fix the build")


# -- error results -----------------------------------------------------------------------------


def test_an_error_result_s_text_is_its_text_blocks_only() -> None:
    result = {
        "type": "tool_result",
        "tool_use_id": "c1",
        "is_error": True,
        "content": [
            "a bare string",
            {"type": "image", "text": "alt"},
            {"type": "text", "text": "boom"},
        ],
    }
    facts = extract_facts(
        [
            _assistant(_use("c1", "Bash", {"command": "make"})),
            {"role": "user", "content": [result]},
        ]
    )
    assert facts.errors == (ErrorFact("Bash", "boom"),)


# -- open todos --------------------------------------------------------------------------------


def test_open_todos_keep_bare_strings_and_unfinished_items_only() -> None:
    todos = [
        "write the docs",
        {"content": "ship it", "status": "Completed"},
        {"content": "fix the parser", "status": "in_progress"},
        7,
    ]
    facts = extract_facts([_assistant(_use("t1", "TodoWrite", {"todos": todos}))])
    assert facts.open_todos == (
        {"content": "write the docs", "status": "pending"},
        {"content": "fix the parser", "status": "in_progress"},
    )


def test_a_todo_tool_s_list_is_the_first_key_that_holds_a_list() -> None:
    tool_input = {"todos": "none yet", "items": [{"content": "add tests", "status": "pending"}]}
    facts = extract_facts([_assistant(_use("t1", "task_tracker", tool_input))])
    assert facts.open_todos == ({"content": "add tests", "status": "pending"},)


def test_only_a_todo_tool_s_list_is_a_todo_list() -> None:
    order = {"items": [{"content": "two lamps", "status": "pending"}]}
    facts = extract_facts([_assistant(_use("c1", "create_order", order))])
    assert facts.open_todos == ()


def test_a_todo_tool_without_a_mapping_input_sets_no_list() -> None:
    first = _use("t1", "TodoWrite", {"todos": [{"content": "keep me", "status": "pending"}]})
    broken = _use("t2", "TodoWrite", ["not", "a", "mapping"])
    facts = extract_facts([_assistant(first), _assistant(broken)])
    assert facts.open_todos == ({"content": "keep me", "status": "pending"},)


def test_a_todo_list_stays_open_across_later_calls_of_other_tools() -> None:
    todos = [{"content": "run the tests", "status": "pending"}]
    facts = extract_facts(
        [
            _assistant(_use("t1", "TodoWrite", {"todos": todos})),
            _assistant(_use("c1", "Bash", {"command": "make"})),
        ]
    )
    assert facts.open_todos == ({"content": "run the tests", "status": "pending"},)


def test_a_todo_attachment_sets_the_list_and_other_attachments_do_not() -> None:
    todo = {"type": "todo", "content": [{"content": "ship", "status": "pending"}]}
    other = {"type": "plan_mode", "content": [{"content": "not a todo", "status": "pending"}]}
    records = [
        Entry({"type": "attachment", "attachment": todo}),
        Entry({"type": "attachment", "attachment": other}),
        Entry({"type": "attachment"}),
    ]
    assert extract_facts(records).open_todos == ({"content": "ship", "status": "pending"},)


# -- which records and blocks give facts -------------------------------------------------------


def test_only_the_assistant_s_tool_calls_are_calls() -> None:
    echoed = {"role": "user", "content": [_use("c1", "Bash", {"command": "rm -rf build"})]}
    facts = extract_facts([echoed, _assistant(_use("c2", "Bash", {"command": "make"}))])
    assert facts.commands == ("make",)
    assert dict(facts.tool_counts) == {"Bash": 1}


def test_a_previous_summary_in_a_text_block_is_carried_not_a_prompt() -> None:
    summary = _SUMMARY.format(latest="Port the CLI to typer.")
    facts = extract_facts([{"role": "user", "content": [{"type": "text", "text": summary}]}])
    assert facts.user_prompts == ()
    assert facts.latest_request == "Port the CLI to typer."


def test_a_plain_message_s_blocks_that_are_not_mappings_are_skipped() -> None:
    facts = extract_facts(
        [{"role": "user", "content": ["a bare string", {"type": "text", "text": "fix it"}]}]
    )
    assert facts.user_prompts == ("fix it",)


def test_records_other_than_user_and_assistant_give_no_facts() -> None:
    call = _use("c1", "Bash", {"command": "make"})
    progress = Entry({"type": "progress", "message": {"role": "assistant", "content": [call]}})
    note = Entry({"type": "system", "message": {"role": "user", "content": "not typed"}})
    facts = extract_facts([progress, note])
    assert facts.commands == ()
    assert facts.user_prompts == ()


def test_a_record_without_a_role_takes_its_type_s() -> None:
    record = Entry({"type": "user", "message": {"content": "add a --json flag"}})
    facts = extract_facts([record])
    assert facts.user_prompts == ("add a --json flag",)
    assert facts.latest_request == "add a --json flag"


# -- corpus scores and recorded compactions ----------------------------------------------------


def test_scores_add_kind_by_kind_with_a_kind_missing_on_either_side() -> None:
    total = {"user_prompts": (1, 2), "errors": (0, 3)}
    more = {"user_prompts": (2, 2), "commands": (4, 5)}
    assert add_scores(total, more) == {
        "user_prompts": (3, 4),
        "errors": (0, 3),
        "commands": (4, 5),
    }


def test_each_compaction_point_holds_its_records_and_only_its_own_summary() -> None:
    boundary = {"type": "system", "subtype": "compact_boundary"}
    records = [
        _record("user", "first request"),
        _record("assistant", "done"),
        Entry(boundary),
        Entry({"type": "attachment", "attachment": {"type": "todo", "content": []}}),
        _record("user", "summary one", isCompactSummary=True),
        _record("user", "second request"),
        Entry(boundary),
        _record("user", "summary two", isCompactSummary=True),
    ]
    first, second = compaction_points(records)
    assert (first.boundary_index, first.before) == (2, records[:2])
    assert first.recorded_summary == "summary one"
    assert (second.boundary_index, second.before) == (6, records[2:6])
    assert second.recorded_summary == "summary two"
