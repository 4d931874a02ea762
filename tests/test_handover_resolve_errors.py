"""The errors a hand-over resolves, read in one pass from the last call back, match the plain
rule (the first later succeeded call doing again what a failure tried) on mixed sessions."""

from __future__ import annotations

import random
from typing import Any

from conversation import bash, edit, read, result, says, use, user

from unbounded.compaction.command_results import command_key
from unbounded.compaction.facts import normalize_text
from unbounded.compaction.handover import Call, read_handover


def _does_again(later: Call, failed: Call) -> bool:
    """The plain rule, one pair at a time."""
    if failed.paths_written or failed.paths_read:
        return (later.paths_written, later.paths_read) == (failed.paths_written, failed.paths_read)
    if failed.command:
        key = command_key(failed.command)
        if key:
            return command_key(later.command or "") == key
        return normalize_text(later.command or "") == normalize_text(failed.command)
    return (later.name, later.block.get("input")) == (failed.name, failed.block.get("input"))


def _session(seed: int) -> list[dict[str, Any]]:
    pick = random.Random(seed)
    messages: list[dict[str, Any]] = [user("make it work")]
    for n in range(120):
        error = pick.random() < 0.4
        kind = pick.randrange(6)
        if kind == 0:
            messages += bash(f"c{n}", f"pytest tests/test_{pick.randrange(3)}.py", "1 failed" if error else "ok", error=error)
        elif kind == 1:
            messages += bash(f"c{n}", f"./run.sh   {pick.randrange(2)}", "boom" if error else "done", error=error)
        elif kind == 2:
            messages += edit(f"c{n}", f"/w/a{pick.randrange(3)}.py", "x", error=error)
        elif kind == 3:
            messages += read(f"c{n}", f"/w/a{pick.randrange(3)}.py", "x = 1")
        elif kind == 4:
            messages += [use(f"c{n}", "fetch", url=f"u{pick.randrange(2)}"), result(f"c{n}", "no", error=error)]
        else:
            messages.append(says(f"Step {n}."))
    return messages


def test_each_failure_s_fix_is_the_first_later_call_doing_it_again() -> None:
    for seed in range(12):
        handover = read_handover(_session(seed))
        calls = handover.calls
        assert any(r.resolved_by is not None for r in handover.errors)
        assert any(r.resolved_by is None for r in handover.errors)
        for record in handover.errors:
            later = calls[calls.index(record.call) + 1 :]
            fix = next(
                (c for c in later if c.is_error is not None and not c.failed and _does_again(c, record.call)),
                None,
            )
            assert record.resolved_by is fix
            tried = [c for c in later if (fix is None or c.position < fix.position) and (c.path_written or c.command)]
            assert record.tried == tuple(tried[:4])
            after = record.call.result_position
            text = next(((p, t) for p, t in handover.assistant_texts if p > after), None)
            between = text is None or any(after < c.position < text[0] for c in calls)
            assert record.reading == ("" if between or text is None else text[1])
        assert any(record.reading for record in handover.errors)


class _Opaque:
    """A value with one repr for every instance, equal only to itself (and unhashable)."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return "opaque"


def test_a_retry_is_a_fix_only_when_its_input_is_equal_not_just_alike() -> None:
    def attempt(call_id: str, value: object, failed: bool) -> list[dict[str, Any]]:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}
        if failed:
            result.update(content="Error: boom", is_error=True)
        use = {"type": "tool_use", "id": call_id, "name": "lookup", "input": {"v": value}}
        return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]

    same = _Opaque()
    for retried, fixed in ((same, True), (_Opaque(), False)):
        messages = [
            {"role": "user", "content": "Look it up."},
            *attempt("a", same, True),
            *attempt("b", retried, False),
        ]
        (error,) = read_handover(messages).errors
        assert (error.resolved_by is not None) is fixed
