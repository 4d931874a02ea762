"""What a Codex CLI rollout line holds, and reading one item of it.

Record and item types, the type checks of the fields the reader uses (`validate_record`:
wrong types fail with the file, line and field), and the conversions of single items:
arguments, shell commands, tool outputs (and whether they report a failure), content items,
token usage. `unbounded.transcripts.codex` builds the conversation from them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from unbounded.errors import TranscriptError
from unbounded.model.content import usage_from_openai
from unbounded.model.record_checks import token_counts_problem
from unbounded.transcripts.importing import json_kind

ROLLOUT_TYPES: frozenset[str] = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
"""Top-level record types of a rollout line."""
CONTEXT_MARKERS: tuple[str, ...] = (
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions for",
    "<user_shell_command>",
    "<turn_aborted>",
    "<context_update>",
    "<subagent_notification>",
)
"""Lower-cased starts of the user messages Codex injects as context (not the user's request)."""
MODEL_OUTPUT_TYPES: frozenset[str] = frozenset(
    {"message", "reasoning", "function_call", "custom_tool_call", "local_shell_call"}
    | {"web_search_call"}
)
"""Response item types a model response is made of (`message` only with role assistant)."""
OUTPUT_TYPES: frozenset[str] = frozenset({"function_call_output", "custom_tool_call_output"})
"""Response item types that answer a tool call."""
PASSED_ITEM_TYPES: frozenset[str] = frozenset({"ghost_snapshot"})
"""Response item types the reader knows and passes over (never sent to the model)."""
REPEATED_EVENTS: frozenset[str] = frozenset(
    {
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
    }
)
"""event_msg types that repeat a response item: dropped."""
SHELL_PROGRAMS: frozenset[str] = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
SHELL_SCRIPT_FLAGS: frozenset[str] = frozenset({"-c", "-lc", "-cl"})
ARGV_SHELL_TOOLS: frozenset[str] = frozenset({"shell", "container.exec"})
"""Function names whose `command` argument is an argv list."""

_HINT = "fix or remove the line, or use --skip-invalid"
_ERROR_STARTS = (
    "error:",
    "failed in sandbox",
    "execution error",
    "failed to parse function arguments",
    "aborted",
)
_EXIT_CODE = re.compile(r"^(?:Exit code:|Process exited with code)\s*(-?\d+)", re.MULTILINE)


# -- detection -----------------------------------------------------------------------------
def looks_like_codex(record: dict[str, Any]) -> bool:
    """A rollout line: a known `type` with an object `payload`."""
    kind = record.get("type")
    return (
        isinstance(kind, str) and kind in ROLLOUT_TYPES and isinstance(record.get("payload"), dict)
    )


def is_context_message(texts: list[str]) -> bool:
    """Whether a user message's texts are context Codex injected (see `CONTEXT_MARKERS`)."""
    return any(text.lstrip().lower().startswith(CONTEXT_MARKERS) for text in texts)


# -- validation ----------------------------------------------------------------------------


class _Checker:
    """Type checks of one record's fields, failing with the file, line and field."""

    def __init__(self, path: Path, line: int) -> None:
        self.path = path
        self.line = line

    def fail(self, message: str) -> None:
        raise TranscriptError(message, path=self.path, line=self.line, hint=_HINT)

    def check(
        self,
        value: Any,
        types: type | tuple[type, ...],
        field_name: str,
        expected: str,
        *,
        required: bool = False,
        element: bool = False,
    ) -> None:
        if value is None:
            if element:  # a list element is never optional: null is the wrong type
                self.fail(f"field '{field_name}' should be {expected}, found null")
            if required:
                self.fail(f"field '{field_name}' is missing")
            return
        allowed = types if isinstance(types, tuple) else (types,)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            self.fail(f"field '{field_name}' should be {expected}, found {json_kind(value)}")

    def string_list(self, value: Any, field_name: str) -> None:
        self.check(value, list, field_name, "a list of strings")
        for index, item in enumerate(value or []):
            self.check(item, str, f"{field_name}[{index}]", "a string", element=True)


def validate_record(record: dict[str, Any], path: Path, line: int) -> None:
    """Type-check the fields of one rollout line that the reader uses."""
    check = _Checker(path, line)
    check.check(record.get("timestamp"), str, "timestamp", "a string")
    kind = record.get("type")
    check.check(kind, str, "type", "a string", required=True)
    if kind not in ROLLOUT_TYPES:
        return
    payload = record.get("payload")
    check.check(payload, dict, "payload", "an object", required=True)
    if not isinstance(payload, dict):
        return  # unreachable: check() raised
    if kind == "session_meta":
        for name in ("id", "cwd", "cli_version", "originator", "model", "model_provider"):
            check.check(payload.get(name), str, f"payload.{name}", "a string")
        check.check(payload.get("instructions"), str, "payload.instructions", "a string")
        check.check(payload.get("git"), dict, "payload.git", "an object")
    elif kind == "turn_context":
        for name in ("model", "cwd", "effort"):
            check.check(payload.get(name), str, f"payload.{name}", "a string")
    elif kind == "compacted":
        check.check(payload.get("message"), str, "payload.message", "a string")
        history = payload.get("replacement_history")
        check.check(history, list, "payload.replacement_history", "a list")
        for index, item in enumerate(history or []):
            _validate_item(check, item, f"payload.replacement_history[{index}]")
    elif kind == "response_item":
        _validate_item(check, payload, "payload")
    else:
        _validate_event(check, payload)


def _validate_item(check: _Checker, item: Any, at: str) -> None:
    check.check(item, dict, at, "an object", element=True)
    kind = item.get("type")
    check.check(kind, str, f"{at}.type", "a string", required=True)
    if kind == "message":
        check.check(item.get("role"), str, f"{at}.role", "a string", required=True)
        content = item.get("content")
        check.check(content, list, f"{at}.content", "a list", required=True)
        for index, part in enumerate(content):
            where = f"{at}.content[{index}]"
            check.check(part, dict, where, "an object", element=True)
            check.check(part.get("type"), str, f"{where}.type", "a string", required=True)
            for name in ("text", "image_url", "refusal"):
                check.check(part.get(name), str, f"{where}.{name}", "a string")
    elif kind == "reasoning":
        for name in ("summary", "content"):
            parts = item.get(name)
            check.check(parts, list, f"{at}.{name}", "a list")
            for index, part in enumerate(parts or []):
                check.check(part, dict, f"{at}.{name}[{index}]", "an object", element=True)
                check.check(part.get("text"), str, f"{at}.{name}[{index}].text", "a string")
        check.check(item.get("encrypted_content"), str, f"{at}.encrypted_content", "a string")
    elif kind in ("function_call", "custom_tool_call"):
        check.check(item.get("name"), str, f"{at}.name", "a string", required=True)
        check.check(item.get("call_id"), str, f"{at}.call_id", "a string", required=True)
        if kind == "function_call":
            arguments = item.get("arguments")
            check.check(arguments, (str, dict), f"{at}.arguments", "a JSON string")
        else:
            check.check(item.get("input"), str, f"{at}.input", "a string")
    elif kind in OUTPUT_TYPES:
        check.check(item.get("call_id"), str, f"{at}.call_id", "a string", required=True)
        output = item.get("output")
        check.check(output, (str, list, dict), f"{at}.output", "a string", required=True)
        if isinstance(output, dict):
            check.check(output.get("content"), str, f"{at}.output.content", "a string")
            check.check(output.get("success"), bool, f"{at}.output.success", "true or false")
        elif isinstance(output, list):
            for index, part in enumerate(output):
                check.check(part, dict, f"{at}.output[{index}]", "an object", element=True)
    elif kind == "local_shell_call":
        for name in ("call_id", "id", "status"):
            check.check(item.get(name), str, f"{at}.{name}", "a string")
        action = item.get("action")
        check.check(action, dict, f"{at}.action", "an object", required=True)
        check.string_list(action.get("command"), f"{at}.action.command")
    elif kind == "web_search_call":
        action = item.get("action")
        check.check(action, dict, f"{at}.action", "an object")
        if isinstance(action, dict):
            check.check(action.get("query"), str, f"{at}.action.query", "a string")


def _validate_event(check: _Checker, payload: dict[str, Any]) -> None:
    kind = payload.get("type")
    check.check(kind, str, "payload.type", "a string", required=True)
    if kind != "token_count":
        return
    info = payload.get("info")
    check.check(info, dict, "payload.info", "an object")
    if not isinstance(info, dict):
        return
    window = info.get("model_context_window")
    check.check(window, int, "payload.info.model_context_window", "an integer")
    for name in ("total_token_usage", "last_token_usage"):
        usage = info.get(name)
        check.check(usage, dict, f"payload.info.{name}", "an object")
        problem = token_counts_problem(usage, f"payload.info.{name}")
        if problem is not None:
            check.fail(problem)


# -- mapping helpers -------------------------------------------------------------------------
def codex_usage(raw: Mapping[str, Any]) -> dict[str, int] | None:
    """Codex `TokenUsage` (input includes cached) in Anthropic names, via usage_from_openai."""
    usage = usage_from_openai(
        {
            "prompt_tokens": raw.get("input_tokens"),
            "completion_tokens": raw.get("output_tokens"),
            "prompt_tokens_details": {"cached_tokens": raw.get("cached_input_tokens")},
        }
    )
    return dict(usage) if usage is not None else None  # type: ignore[arg-type]


def command_text(argv: list[str]) -> str:
    """One command string for an argv: the script of `bash -lc <script>`, else shell-joined."""
    if (
        len(argv) == 3
        and PurePosixPath(argv[0]).name in SHELL_PROGRAMS
        and argv[1] in SHELL_SCRIPT_FLAGS
    ):
        return argv[2]
    return shlex.join(argv)


def output_failed(output: Any) -> bool:
    """Whether a tool output says the call failed, as far as the format tells (module doc)."""
    if isinstance(output, dict):
        if output.get("success") is False:
            return True
        output = output.get("content")
    if not isinstance(output, str):
        return False
    text = output.lstrip()
    if text.startswith("{"):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            metadata = value.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            return isinstance(code, int) and not isinstance(code, bool) and code != 0
    match = _EXIT_CODE.search(text[:400])
    if match is not None:
        return int(match.group(1)) != 0
    return text[:64].lower().startswith(_ERROR_STARTS)


def _image_block(url: str) -> dict[str, Any]:
    match = re.match(r"data:([\w/+.-]+);base64,", url)
    if match:
        source = {"type": "base64", "media_type": match.group(1), "data": url[match.end() :]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def content_blocks(parts: list[Any]) -> list[dict[str, Any]]:
    """Codex content items (input/output text, images, refusals) as Anthropic blocks."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "input_image" and isinstance(part.get("image_url"), str):
            blocks.append(_image_block(part["image_url"]))
        elif isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append({"type": "text", "text": part["refusal"]})
    return blocks


def as_content(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Blocks as message content: one text block becomes a plain string."""
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks


def output_content(output: Any) -> str | list[dict[str, Any]]:
    """A tool output (text, content items, or a `{content, success}` object) as content."""
    if isinstance(output, dict):
        output = output.get("content", "")
    if isinstance(output, list):
        return as_content(content_blocks(output)) or ""
    return output if isinstance(output, str) else ""


def item_texts(parts: list[Any]) -> list[str]:
    """The text of each content item that has one."""
    return [str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


def token_key(info: Mapping[str, Any]) -> tuple[Any, ...]:
    """The totals and last usage of a token_count event, to tell a repeated event from a new
    one (a new call always grows the totals)."""
    total = info.get("total_token_usage")
    last = info.get("last_token_usage")
    return (
        tuple(sorted(total.items())) if isinstance(total, dict) else (),
        tuple(sorted(last.items())) if isinstance(last, dict) else (),
    )
