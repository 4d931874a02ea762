"""Rules of `unbounded.compaction.handover` the mutation check found unheld, at their edges:
which sentences of the agent count as findings, how long a request may be and still order its
steps, which commit is the latest, which text comes right before a call, where a definition starts,
what an edit replaced, and which later command fixes a failed one that runs no program."""

from __future__ import annotations

from conversation import bash, edit, says, user

from unbounded.compaction.handover import (
    FINDING_MAX_CHARS,
    FINDING_MIN_WORDS,
    NOTED_MIN_CHARS,
    STEP_REQUEST_CHARS,
    definition_lines,
    plan_runs,
    read_handover,
    replaced_code,
    request_steps,
)


def _findings(sentence: str) -> list[str]:
    return [text for _, text in read_handover([says(sentence)]).findings]


def test_a_finding_has_at_least_its_fewest_words() -> None:
    enough = " ".join(["Parser", "returns", *["value"] * (FINDING_MIN_WORDS - 2)]) + "."
    fewer = " ".join(["Parser", "returns", *["value"] * (FINDING_MIN_WORDS - 3)]) + "."
    assert len(fewer) >= NOTED_MIN_CHARS  # only the word count keeps it out
    assert _findings(enough) == [enough] and _findings(fewer) == []


def test_a_finding_is_between_its_shortest_and_longest_length() -> None:
    def sentence(length: int) -> str:
        text = "It returns a b" + "c" * (length - len("It returns a b") - 1) + "."
        assert len(text) == length and len(text.split()) == FINDING_MIN_WORDS
        return text

    shortest, longest = sentence(NOTED_MIN_CHARS), sentence(FINDING_MAX_CHARS)
    assert _findings(shortest) == [shortest] and _findings(longest) == [longest]
    assert _findings(sentence(NOTED_MIN_CHARS - 1)) == []
    assert _findings(sentence(FINDING_MAX_CHARS + 1)) == []


def test_a_request_orders_its_steps_up_to_its_longest_length() -> None:
    head, tail = "Fix the parser ", ", then run the tests"
    longest = head + "p" * (STEP_REQUEST_CHARS - len(head) - len(tail)) + tail
    assert len(longest) == STEP_REQUEST_CHARS
    assert [step.text for step in request_steps(longest, "")][1:] == ["run the tests"]
    assert request_steps(longest + "s", "") == []


def test_the_latest_commit_is_the_last_one_made() -> None:
    handover = read_handover(
        [
            user("go"),
            *bash("g1", "git commit -m one", "[main 1111111] one"),
            *bash("g2", "git commit -m two", "[main 2222222] two"),
        ]
    )
    latest = handover.last_commit
    assert latest is not None and (latest[0].tool_id, latest[1].sha) == ("g2", "2222222")


def test_the_text_right_before_a_call_is_found_when_it_opens_the_conversation() -> None:
    # A part that opens on the agent's words (a fragment, or the messages after a summary).
    said = "I will rewrite the parser in a.py now."
    handover = read_handover([says(said), *edit("e", "/r/a.py", "x")])
    assert handover.said_before(handover.calls[0]) == said


def test_a_definition_after_blank_lines_is_on_its_own_line() -> None:
    code = "\n\n  def parse(text):\n      pass\nx = 1\nconst run = () => 1\n"
    assert definition_lines(code) == [2, 5]


def test_what_an_edit_replaced_skips_blank_old_texts_and_reads_nothing_else() -> None:
    assert replaced_code({"input": {"old_string": "  ", "old_str": "y = 1"}}) == "y = 1"
    assert replaced_code({"input": {"file_path": "/r/a.py", "content": "x = 1"}}) == ""
    assert replaced_code({"input": "a raw string"}) == "" and replaced_code({}) == ""


def test_a_failed_command_that_runs_no_program_is_fixed_only_by_the_same_command() -> None:
    handover = read_handover(
        [
            user("go"),
            *bash("a", "cd /missing", "cd: no such file or directory", error=True),
            *bash("b", "cd /elsewhere", "ok"),
            *bash("c", "cd /missing", "ok"),
        ]
    )
    (error,) = handover.errors
    assert error.resolved_by is not None and error.resolved_by.tool_id == "c"


def test_a_line_indented_by_one_space_belongs_to_the_plan_item_above() -> None:
    text = "Next I will:\n1. fix the parser\n so it reads tabs\n2. run the tests"
    assert plan_runs(text) == [("Next I will:", ["fix the parser", "run the tests"])]


def test_of_two_plans_in_one_text_the_later_is_the_plan() -> None:
    text = "Next I will:\n1. fix the parser\n2. add a test\n\nThen I will:\n1. update the docs\n2. commit"
    plan = read_handover([user("go"), says(text)]).plan
    assert plan is not None and plan.intro == "Then I will:"
    assert [item.text for item in plan.items] == ["update the docs", "commit"]


def test_the_next_step_is_the_last_one_a_text_states() -> None:
    text = "Next I will fix the parser first. Now let me run the whole suite."
    assert read_handover([says(text)]).next_step == (1, "Now let me run the whole suite.")


def test_a_tracker_command_is_read_from_the_first_line_of_a_script() -> None:
    handover = read_handover([user("go"), *bash("c", "bd close p-1\necho closed", "ok")])
    assert [(item.id, item.state) for item in handover.tracker_items] == [("p-1", "closed")]
