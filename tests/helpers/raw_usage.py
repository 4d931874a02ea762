"""The billed calls of a session file, read from its raw records without unbounded's readers.

A second, independent reading of what each format records about the calls an agent paid for,
so that tests can check the figures `inspect`, `replay` (and its fidelity block) and `eval`
report. It uses only the standard library's JSON parser and its own rules, which are the
definition those commands document:

- Claude Code: every response id (`message.id`) of an `assistant` record with `usage`, once,
  whichever branch it is on; `<synthetic>` messages never; inline sub-agent records
  (`isSidechain`) only when every assistant record of the file is one (a sub-agent's own
  file). The usage is the last line's; cache writes split into 5-minute and 1-hour ones by
  `cache_creation` when it says.
- Codex CLI: every `token_count` event whose `last_token_usage` is not a repeat of the event
  before (same totals) and is not all zeros; the model is the latest `turn_context`'s (or the
  session meta's, else gpt-5); input = input - cached.
- OpenHands output.jsonl: the first evaluation's responses (`model_response.id`) with usage.
- SWE-agent: history items with their own `usage`.
- mini-swe-agent: assistant messages whose `extra.response` has usage, by response id.
- OpenHands agent SDK: every token usage of the conversation's stats (`base_state.json`),
  by response id.

Usage is returned in Anthropic names (input, cache creation, cache read, output), and priced
with the model table's rows (a model the table lacks: its provider's assumed row, as the
project documents).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RawCall:
    """One billed call: its id, model and usage in Anthropic names."""

    call_id: str
    model: str | None
    input_tokens: int
    cache_creation: int
    """Cache writes at the 5-minute rate (all of them when the usage does not split them)."""
    cache_read: int
    output_tokens: int
    cache_creation_1h: int = 0
    """Cache writes the usage reports as 1-hour ones."""


def _lines(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for raw in path.read_bytes().splitlines():
        text = raw.decode("utf-8", "replace").strip().lstrip("\ufeff")
        if not text.startswith("{"):
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def _n(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _litellm(call_id: str, model: str | None, usage: dict[str, Any]) -> RawCall:
    prompt = _n(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _n(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or _n(usage.get("cache_read_input_tokens"))
    written = _n(usage.get("cache_creation_input_tokens"))
    return RawCall(
        call_id,
        model,
        max(0, prompt - cached - written),
        written,
        cached,
        _n(usage.get("completion_tokens")),
    )


def claude_code_calls(path: Path) -> list[RawCall]:
    """Billed responses of a Claude Code session file (module docstring)."""
    records = [r for r in _lines(path) if r.get("type") == "assistant"]
    all_sidechain = bool(records) and all(r.get("isSidechain") is True for r in records)
    calls: dict[str, RawCall] = {}
    for record in records:
        if record.get("isSidechain") is True and not all_sidechain:
            continue
        message = record.get("message")
        if not isinstance(message, dict) or message.get("model") == "<synthetic>":
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict) or not isinstance(message.get("id"), str):
            continue
        split = usage.get("cache_creation")
        hour = _n(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else 0
        calls[message["id"]] = RawCall(
            message["id"],
            message.get("model"),
            _n(usage.get("input_tokens")),
            _n(usage.get("cache_creation_input_tokens")) - hour,
            _n(usage.get("cache_read_input_tokens")),
            _n(usage.get("output_tokens")),
            hour,
        )
    return list(calls.values())


def codex_calls(path: Path) -> list[RawCall]:
    """Billed calls of a Codex rollout (module docstring)."""
    calls: list[RawCall] = []
    model: str | None = None
    previous: Any = None
    for record in _lines(path):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if record.get("type") == "session_meta" and model is None:
            model = payload.get("model") if isinstance(payload.get("model"), str) else None
        elif record.get("type") == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
            info = payload["info"]
            last = info.get("last_token_usage")
            key = (
                json.dumps(info.get("total_token_usage"), sort_keys=True),
                json.dumps(last, sort_keys=True),
            )
            if not isinstance(last, dict) or key == previous:
                continue
            previous = key
            cached = _n(last.get("cached_input_tokens"))
            call = RawCall(
                f"token_count_{len(calls)}",
                model or "gpt-5",
                max(0, _n(last.get("input_tokens")) - cached),
                0,
                cached,
                _n(last.get("output_tokens")),
            )
            if call.input_tokens + call.cache_read + call.output_tokens:
                calls.append(call)
    return calls


def openhands_calls(path: Path) -> list[RawCall]:
    """Billed responses of the first evaluation of an OpenHands output.jsonl."""
    records = _lines(path)
    history = records[0].get("history") if records else None
    calls: dict[str, RawCall] = {}
    events: list[Any] = []
    for item in history if isinstance(history, list) else []:
        events.extend(item if isinstance(item, list) else [item])
    for event in events:
        metadata = event.get("tool_call_metadata") if isinstance(event, dict) else None
        response = metadata.get("model_response") if isinstance(metadata, dict) else None
        if not isinstance(response, dict) or not isinstance(response.get("usage"), dict):
            continue
        response_id = response.get("id")
        if isinstance(response_id, str) and response_id not in calls:
            calls[response_id] = _litellm(response_id, response.get("model"), response["usage"])
    return list(calls.values())


def swe_agent_calls(path: Path) -> list[RawCall]:
    """Billed calls of a SWE-agent .traj: history items that carry their own usage."""
    document = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    calls: list[RawCall] = []
    for item in document.get("history") or []:
        usage = item.get("usage") if isinstance(item, dict) else None
        if isinstance(usage, dict):
            calls.append(_litellm(f"history_{len(calls)}", None, usage))
    return calls


def mini_swe_agent_calls(path: Path) -> list[RawCall]:
    """Billed responses of a mini-swe-agent .traj.json, by response id."""
    document = json.loads(path.read_text(encoding="utf-8"))
    calls: dict[str, RawCall] = {}
    for message in document.get("messages") or []:
        extra = message.get("extra") if isinstance(message, dict) else None
        response = extra.get("response") if isinstance(extra, dict) else None
        if not isinstance(response, dict) or not isinstance(response.get("usage"), dict):
            continue
        response_id = str(response.get("id"))
        calls[response_id] = _litellm(response_id, response.get("model"), response["usage"])
    return list(calls.values())


def openhands_sdk_calls(path: Path) -> list[RawCall]:
    """Every token usage in an SDK conversation's stats, by response id."""
    state_file = path / "base_state.json" if path.is_dir() else None
    if state_file is None or not state_file.is_file():
        return []
    state = json.loads(state_file.read_text(encoding="utf-8"))
    calls: dict[str, RawCall] = {}
    for metrics in ((state.get("stats") or {}).get("usage_to_metrics") or {}).values():
        for usage in metrics.get("token_usages") or []:
            prompt = _n(usage.get("prompt_tokens"))
            read, write = _n(usage.get("cache_read_tokens")), _n(usage.get("cache_write_tokens"))
            calls[str(usage.get("response_id"))] = RawCall(
                str(usage.get("response_id")),
                usage.get("model"),
                max(0, prompt - read - write),
                write,
                read,
                _n(usage.get("completion_tokens")),
            )
    return list(calls.values())


def shape(path: Path) -> str:
    """Which agent wrote a session file or folder, told from its name and first record."""
    if path.is_dir():
        return "openhands-sdk"
    if path.name.endswith(".traj.json"):
        return "mini-swe-agent"
    if path.suffix == ".traj":
        return "swe-agent"
    head = path.read_bytes()[:4096].decode("utf-8", "replace").lstrip("\ufeff \n")
    if head.startswith("["):
        return "event-list"
    first = next(iter(_lines(path)), {})
    if "instance_id" in first and "history" in first:
        return "openhands"
    codex_types = ("session_meta", "response_item", "event_msg", "turn_context")
    if "payload" in first and first.get("type") in codex_types:
        return "codex"
    return "claude-code"


def raw_calls(path: Path) -> list[RawCall]:
    """The billed calls of any session file or folder the project reads, by its shape."""
    readers = {
        "openhands-sdk": openhands_sdk_calls,
        "mini-swe-agent": mini_swe_agent_calls,
        "swe-agent": swe_agent_calls,
        "openhands": openhands_calls,
        "codex": codex_calls,
        "claude-code": claude_code_calls,
    }
    reader = readers.get(shape(path))
    return reader(path) if reader is not None else []  # an event list records no usage


def file_provider(path: Path) -> str | None:
    """The provider a file's format makes certain (a Codex rollout calls OpenAI)."""
    return {"codex": "openai", "claude-code": "anthropic"}.get(shape(path))


def priced(calls: list[RawCall], *, provider: str | None = None) -> float:
    """The calls' cost in USD at the model table's prices (a model the table lacks: its
    provider's assumed row); cache writes at the rate of the TTL the usage reports."""
    from unbounded.catalog import ASSUMED_MODELS, load_model_table, provider_of_name

    table = load_model_table()
    total = 0.0
    for call in calls:
        info = table.find(call.model) if call.model else None
        if info is None:
            family = provider or (provider_of_name(call.model) if call.model else None) or "other"
            info = table.get(ASSUMED_MODELS[family])  # type: ignore[index]
        rate = info.input_per_mtok / 1e6
        hour = info.cache_write_1h_multiplier or 0.0
        total += (
            call.input_tokens * rate
            + call.cache_creation * rate * info.cache_write_5m_multiplier
            + call.cache_creation_1h * rate * hour
            + call.cache_read * rate * info.cache_read_multiplier
            + call.output_tokens * info.output_per_mtok / 1e6
        )
    return total
