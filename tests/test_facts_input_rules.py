"""The rules of the facts ledger's input and of retention scoring, one test each: how far a
prompt or an error must survive to count as kept, how a line is clipped, which user texts are
prompts, which todos are open, and the corpus score (RETENTION.md)."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.facts import (
    ErrorFact,
    Facts,
    clip,
    extract_facts,
    is_prompt_text,
    retention_scores,
)


def _assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def _use(call: str, name: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": name, "input": tool_input}


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


def test_a_todo_tool_without_a_mapping_input_sets_no_list() -> None:
    first = _use("t1", "TodoWrite", {"todos": [{"content": "keep me", "status": "pending"}]})
    broken = _use("t2", "TodoWrite", ["not", "a", "mapping"])
    facts = extract_facts([_assistant(first), _assistant(broken)])
    assert facts.open_todos == ({"content": "keep me", "status": "pending"},)
