"""`RequestValidator` (model/normalize.py) answers as `validate_request` does on successive
requests that grow, shrink and change, checking only what changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.errors import InvalidRequestError
from unbounded.model.normalize import RequestValidator, validate_request


def _verdict(check: Any, messages: list[dict[str, Any]]) -> tuple[str, int | None] | None:
    try:
        check(messages)
    except InvalidRequestError as error:
        return (error.rule, error.index)
    return None


def _conversation(turns: list[str]) -> list[dict[str, Any]]:
    """A valid conversation: a prompt, then per turn a text reply or a tool call and its
    result (ids unique), user text between replies."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for number, kind in enumerate(turns):
        if kind == "tool":
            tool_id = f"t{number}"
            messages.append(
                {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "R", "input": {}}]}
            )
            messages.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "r"}]}
            )
        else:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
            messages.append({"role": "user", "content": "next"})
    return messages


_BROKEN = (
    {"role": "user", "content": [{"type": "text", "text": " "}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "R", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "r"}]},
    {"role": "system", "content": "x"},
)


@settings(max_examples=300, deadline=None)
@given(
    turns=st.lists(st.sampled_from(("tool", "text")), min_size=1, max_size=8),
    steps=st.lists(
        st.tuples(
            st.integers(0, 17),
            st.one_of(st.none(), st.tuples(st.integers(0, 17), st.sampled_from(_BROKEN))),
        ),
        max_size=10,
    ),
)
def test_the_validator_agrees_with_validate_request_on_every_request_of_a_run(
    turns: list[str], steps: list[tuple[int, tuple[int, dict[str, Any]] | None]]
) -> None:
    conversation = _conversation(turns)
    validator = RequestValidator()
    for length, change in steps:
        # A request is the conversation up to a point (growing and shrinking over the run,
        # the same message objects), sometimes with one message replaced by another object.
        messages = list(conversation[: max(1, length)])
        if change is not None and change[0] < len(messages):
            messages[change[0]] = dict(change[1])
        assert _verdict(validator.check, messages) == _verdict(validate_request, messages)


def test_a_request_that_shares_the_passed_messages_is_checked_from_the_first_new_one() -> None:
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "R", "input": {}}]}
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}
    first = [{"role": "user", "content": "go"}, use, answer]
    validator = RequestValidator()
    validator.check(first)
    # The same id again in a new message is a duplicate of the one the passed prefix holds.
    again = [*first, use]
    assert _verdict(validator.check, again) == ("duplicate-tool-use-id", 3)
    # Once the message holding it is taken away, the id may come back.
    assert _verdict(validator.check, first) is None
    assert _verdict(validator.check, first[:1]) is None
    assert _verdict(validator.check, first) is None


def test_an_empty_request_is_refused_after_a_valid_one_as_on_its_own() -> None:
    # The validator's list is emptied by the shorter request: only the early check refuses it.
    validator = RequestValidator()
    validator.check([{"role": "user", "content": "go"}])
    expected = _verdict(validate_request, [])
    assert expected == ("non-empty", None)
    assert _verdict(validator.check, []) == expected
    assert _verdict(RequestValidator().check, []) == expected
