"""Small pieces every transcript reader needs: naming a JSON value's kind in an error, tool-call
ids made unique, counting the record types a reader does not know, and reading the
OpenAI-style pieces several agents record (call arguments, message content, litellm usage)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from unbounded.model.content import usage_from_openai

UNKNOWN_RECORDS = "unknown_record_types"
"""`Transcript.meta` key: record type -> how many records of it the reader did not know."""


def json_kind(value: Any) -> str:
    """What a JSON value is, as an error message says it ("a string", "an object", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def unique_id(candidate: str, used: set[str]) -> str:
    """`candidate`, or `candidate_2`, `candidate_3`… when taken; the result is added to `used`
    (a repeated tool-call id would make the request invalid)."""
    tool_id, suffix = candidate, 1
    while tool_id in used:
        suffix += 1
        tool_id = f"{candidate}_{suffix}"
    used.add(tool_id)
    return tool_id


def count_unknown(meta: dict[str, Any], kinds: Iterable[str]) -> None:
    """Count record types the reader does not know into `meta[UNKNOWN_RECORDS]`, in the
    order they are first met (the records themselves are kept as they are)."""
    counts: dict[str, int] = meta.setdefault(UNKNOWN_RECORDS, {})
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """A function call's arguments as an object (`{"raw": text}` when not a JSON object)."""
    if isinstance(arguments, dict):
        return dict(arguments)
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"raw": arguments}
    return value if isinstance(value, dict) else {"raw": arguments}


def text_of_parts(content: Any) -> str:
    """The text of OpenAI-style message content: a string, or the text of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def content_blocks_of(content: Any) -> str | list[dict[str, Any]]:
    """OpenAI-style message content as API content: a string, or text and image blocks
    (`image_url` parts become image blocks; `data:` URLs base64 sources)."""
    if not isinstance(content, list):
        return text_of_parts(content)
    blocks: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            blocks.append({"type": "text", "text": block["text"]})
        elif kind == "image_url":
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                blocks.append({"type": "image", "source": image_source(url)})
        elif kind == "image" and isinstance(block.get("source"), dict):
            blocks.append({"type": "image", "source": block["source"]})
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return blocks


def image_source(url: str) -> dict[str, Any]:
    """An image block's source for a URL: base64 for a `data:` URL, else the URL."""
    match = re.match(r"data:([\w/+.-]+);base64,", url)
    if match:
        return {"type": "base64", "media_type": match.group(1), "data": url[match.end() :]}
    return {"type": "url", "url": url}


def recorded_usage(raw: Any) -> dict[str, int] | None:
    """A recorded usage in Anthropic names: kept as it is when it has them, else read as
    OpenAI / litellm usage (`usage_from_openai`); None when it holds no count."""
    if not isinstance(raw, dict):
        return None
    if any(isinstance(raw.get(k), int) for k in ("input_tokens", "output_tokens")):
        return {k: int(v) for k, v in raw.items() if isinstance(v, int) and k.endswith("_tokens")}
    usage = usage_from_openai(raw)
    return dict(usage) if usage is not None else None  # type: ignore[arg-type]
