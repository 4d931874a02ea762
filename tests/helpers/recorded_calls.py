"""Small Claude Code recordings for the cache-fidelity and replay tests: a prompt, then per
call a user note (sent 1 s before), a tool call with its recorded usage, and its result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript

START = datetime(2026, 2, 1, 12, 0, tzinfo=timezone.utc)
MODEL = "claude-sonnet-4-5"


def recorded_time(seconds: float) -> str:
    """The timestamp `seconds` after `START`, as Claude Code writes it."""
    return (START + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def recorded_usage(read: int, creation: int, ttl: str = "5m") -> dict[str, Any]:
    """A recorded usage reading `read` tokens and writing `creation` with `ttl`."""
    split = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    split[f"ephemeral_{ttl}_input_tokens"] = creation
    return {
        "input_tokens": 3,
        "cache_creation_input_tokens": creation,
        "cache_read_input_tokens": read,
        "cache_creation": split,
        "output_tokens": 10,
    }


def tool_call_session(
    calls: Sequence[tuple[float, int, int]],
    *,
    ttl: str = "5m",
    ttls: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    before: Mapping[int, Sequence[Entry]] | None = None,
) -> Transcript:
    """Per call (seconds, recorded read, recorded creation), written with `ttl` or each call's
    `ttls`, on `MODEL` or each call's `models`; `before` adds records ahead of a call's note."""
    entries = [Entry.user("Please fix the bug. " * 50, timestamp=recorded_time(-1))]
    for index, (seconds, read, creation) in enumerate(calls):
        tool_id = f"toolu_{index}"
        entries.extend((before or {}).get(index, ()))
        if index:
            entries.append(Entry.user(f"Now step {index}.", timestamp=recorded_time(seconds - 1)))
        entries.append(
            Entry.assistant(
                [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {"n": index}}],
                message_id=f"msg_{index}",
                model=models[index] if models else MODEL,
                usage=recorded_usage(read, creation, ttls[index] if ttls else ttl),
                timestamp=recorded_time(seconds),
            )
        )
        entries.append(
            Entry.user(
                [{"type": "tool_result", "tool_use_id": tool_id, "content": "x" * 4000}],
                timestamp=recorded_time(seconds + 1),
            )
        )
    return Transcript(entries=entries, format="claude-code")


def long_tool_session(
    calls: int, *, result: Callable[[int], str], written: int, model: str = "claude-sonnet-4-6"
) -> Transcript:
    """A prompt, then per call one response (a tool call reading `/a/<n>.py`, its usage
    writing `written` tokens to the cache) and its result `result(n)`, 2 s apart."""
    entries: list[Entry] = []
    moment = datetime(2026, 2, 1, 9, 0, tzinfo=timezone.utc)

    def stamped(entry: Entry) -> Entry:
        nonlocal moment
        moment += timedelta(seconds=2)
        entry.data["timestamp"] = moment.isoformat().replace("+00:00", "Z")
        return entry

    entries.append(stamped(Entry.user("Work through the tasks.")))
    for call in range(calls):
        tool_id = f"toolu_{call:06d}"
        path = f"/a/{call}.py"
        use = {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": path}}
        response = Entry.assistant([use], message_id=f"msg_{call:06d}")
        response.data["message"]["model"] = model
        response.data["message"]["usage"] = {
            "input_tokens": 3,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": 3_000 + written * call,
            "output_tokens": 20,
        }
        entries.append(stamped(response))
        content = [{"type": "tool_result", "tool_use_id": tool_id, "content": result(call)}]
        entries.append(stamped(Entry.user(content)))
    return Transcript(entries=entries, format="claude-code")
