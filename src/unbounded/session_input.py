"""What a session does to the messages it is given before it records them (pure functions).

- `user_content`: a user message read once into text or plain block dicts (SDK blocks nested
  in a dict block too); one that is neither text nor typed blocks is refused where it is
  given, not as an invalid request later.
- `capped_blocks`: an oversized tool result or user text cut to its head and tail, the whole
  text kept on the side (`Policy.tool_result_max_tokens`).
- `distinct_call_ids`: a reply's tool_use ids that repeat one of this session's, or that the
  API would refuse, renamed; `named_results` names the host's results to match.
- `repeats_previous_response_id`: a reply that reuses the previous reply's message id (read
  back, it would merge into that reply).
"""

from __future__ import annotations

import operator
import uuid as uuid_module
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from unbounded.compaction.large_output import cap_block_texts
from unbounded.errors import ConfigError
from unbounded.events import ToolOutputCapped
from unbounded.model.entries import Entry
from unbounded.model.normalize import is_tool_result_only
from unbounded.model.tool_ids import RENAMED_FIELD, name_results, renamed_tool_id


def user_content(content: object) -> str | list[dict[str, Any]]:
    """User content as the session stores it: text, or its blocks read once (any iterable of
    dicts or SDK blocks) as plain dicts; refuses anything else, and a block without a string
    `type`."""
    if isinstance(content, str):
        return content
    if (
        isinstance(content, (bytes, bytearray, memoryview, Mapping))
        or not isinstance(content, Iterable)
        or _is_sdk_block(content)
    ):
        raise ConfigError(
            f"add_user takes text or a list of content blocks, got {type(content).__name__}: "
            "pass a str, or dicts such as {'type': 'text', 'text': '...'}"
        )
    blocks: list[dict[str, Any]] = []
    # Read once: a generator or iterator given has no second pass.
    for index, block in enumerate(content):
        if _is_sdk_block(block):
            # As the drop-ins read an SDK block (`unbounded.wire.anthropic.plain_data`).
            block = block.model_dump(mode="json", exclude_none=True)
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            shown = (
                "a dict without a string 'type'"
                if isinstance(block, Mapping)
                else type(block).__name__
            )
            raise ConfigError(
                f"add_user: block {index} is {shown}: each block is a dict with a 'type', "
                "such as {'type': 'text', 'text': '...'}"
            )
        blocks.append(_with_plain_parts(block))
    return blocks


def _is_sdk_block(value: object) -> bool:
    # A pydantic model (the SDKs' blocks) is iterable, as (field, value) pairs: never content.
    return callable(getattr(value, "model_dump", None))


def _plain_part(value: Any) -> Any:
    """`value` with SDK blocks inside it (a tool_result's content) as plain dicts: the same
    object when it holds none, else a copy (the caller's block is left as it was)."""
    if _is_sdk_block(value):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        parts = [_plain_part(item) for item in value]
        return parts if any(map(operator.is_not, parts, value)) else value
    if isinstance(value, Mapping):
        plain = _with_plain_parts(value)
        return plain if any(plain[key] is not part for key, part in value.items()) else value
    return value


def _with_plain_parts(block: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the block with SDK blocks nested in its values as plain dicts."""
    return {key: _plain_part(value) for key, value in block.items()}


def plain_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a dict block with SDK blocks nested in it (a tool_result's content list of
    `anthropic.types.TextBlock`) as plain dicts, as `user_content` reads them."""
    return _with_plain_parts(block)


def capped_blocks(
    blocks: list[dict[str, Any]],
    *,
    limit: int,
    save: Callable[[str, str], Any],
    redact: Callable[[str], str] | None,
    key_prefix: str = "",
) -> tuple[list[dict[str, Any]], list[ToolOutputCapped]]:
    """The blocks with every text over `limit` tokens cut to head and tail (the full text
    saved under the block's tool id, or a new key), and an event for each cut."""
    if limit <= 0:
        return blocks, []
    out: list[dict[str, Any]] = []
    events: list[ToolOutputCapped] = []
    for block in blocks:
        tool_id = block.get("tool_use_id")
        key = str(tool_id) if tool_id else f"{key_prefix or 'text'}-{uuid_module.uuid4().hex}"
        new, capped = cap_block_texts(block, limit, key, save, redact=redact)
        for item in capped:
            events.append(
                ToolOutputCapped(
                    tool_use_id=str(tool_id) if tool_id else None,
                    original_chars=item.original_chars,
                    kept_chars=len(item.text),
                    saved_to=item.saved_to,
                )
            )
        out.append(new)
    return out, events


def distinct_call_ids(
    content: list[Any], taken_ids: Mapping[str, object]
) -> tuple[list[Any], dict[str, str]]:
    """The reply's blocks with each tool_use id that is in `taken_ids` (the session's calls),
    or that the API would refuse, renamed (`renamed_tool_id`), and {new name: id the provider
    gave}."""
    # The caller's dict, read in place (a set of it per reply would cost O(history)), with
    # this reply's names beside it.
    # (ChainMap writes to its first map only: the caller's is never changed.)
    taken = ChainMap[str, object]({}, cast("dict[str, object]", taken_ids))
    renamed: dict[str, str] = {}
    out: list[Any] = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            tool_id = str(block.get("id"))
            name = renamed_tool_id(tool_id, taken)
            if name != tool_id:
                renamed[name] = tool_id
                block = {**block, "id": name}
            taken[name] = block
        out.append(block)
    return out, renamed


def named_results(
    blocks: list[dict[str, Any]], entries: Sequence[Entry], pending_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """Results for renamed calls named as the calls are: a host answers with the ids the
    provider gave (`distinct_call_ids`)."""
    renamed: Mapping[str, str] = {}
    for entry in reversed(entries):
        if entry.type == "assistant":
            found = entry.data.get(RENAMED_FIELD)
            renamed = found if isinstance(found, Mapping) else {}
            break
    if not renamed:
        return blocks
    calls = [(str(renamed.get(name, name)), name) for name in pending_ids]
    return name_results(blocks, calls)


def repeats_previous_response_id(entries: Sequence[Entry], message_id: str) -> bool:
    """Whether the last response recorded has this id, with only its tool results after it:
    the transcript would read the next lines with that id as the same response."""
    for entry in reversed(entries):
        if entry.type == "assistant":
            return entry.message_id == message_id
        if entry.type in ("system", "progress"):
            continue
        if entry.type != "user" or not is_tool_result_only(entry.content):
            return False
    return False


__all__ = [
    "capped_blocks",
    "distinct_call_ids",
    "named_results",
    "repeats_previous_response_id",
    "user_content",
]
