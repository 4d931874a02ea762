"""OpenAI Responses API input items <-> the project's (Anthropic-shaped) messages.

Pure conversions, both ways, for everything that holds a Responses conversation: the drop-in
client, the Agents SDK session, the `openai-responses` wire format.

Items to messages (`items_to_messages`):

- `system` and `developer` messages before the conversation -> the system prompt (joined,
  in order); one inside the conversation (a reminder) -> an `opaque_item` block on the user
  side, so it is sent back where it was;
- `user` messages -> user text, image (`input_image`) and document (`input_file`) blocks;
- `assistant` messages -> text blocks (`output_text`, `refusal`);
- `function_call` -> a `tool_use` block (`call_id` is its id, `arguments` parsed);
- `function_call_output` -> a `tool_result` block, kept before the other blocks of its user
  message as the Messages shape requires;
- every other item (reasoning, compaction, item references, built-in tool calls and their
  outputs...) -> an `opaque_item` block holding the item exactly as given: items the library
  cannot read travel through it untouched and go back byte-for-byte (`opaque_block`). Those
  whose type ends in `_output` sit on the user side, the others on the assistant side.

Items on the same side in a row make one message, so one model response (reasoning, text,
calls) is one assistant message, as the project stores it.

Messages to items (`messages_to_items`) is the reverse; thinking blocks (Anthropic's own) are
left out, opaque items are given back as they were.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam
from unbounded.wire.base import InboundMessages

OPAQUE_ITEM = "opaque_item"
"""The block type carrying an item the library does not read (`opaque_block`)."""
RESPONSES_FORMAT = "openai-responses"
"""The `format` an opaque block of a Responses item names."""

Side = Literal["user", "assistant"]


def plain_item(item: Any) -> dict[str, Any]:
    """An item as a plain dict: an SDK model with only the fields it was given (so an item the
    API returned serializes back to what the API sent), a mapping as a dict."""
    to_dict = getattr(item, "to_dict", None)
    if callable(to_dict):
        data = to_dict(mode="json")
        if isinstance(data, dict):
            return data
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", exclude_unset=True)
        if isinstance(data, dict):
            return data
    raise ConfigError(f"a Responses input item is a dict or an SDK item, not {item!r:.80}")


def opaque_block(item: Mapping[str, Any]) -> dict[str, Any]:
    """The block carrying a Responses item the library passes through without reading it."""
    return {"type": OPAQUE_ITEM, "format": RESPONSES_FORMAT, "item": dict(item)}


def is_opaque_block(block: Mapping[str, Any]) -> bool:
    """Whether a content block carries a Responses item untouched."""
    return block.get("type") == OPAQUE_ITEM and block.get("format") == RESPONSES_FORMAT


# --------------------------------------------------------------------------- items -> messages


def items_to_messages(items: str | Sequence[Any]) -> InboundMessages:
    """A Responses `input` (a string, or items as dicts or SDK objects) as the project's system
    prompt and messages; an item that cannot be read is a `ConfigError` naming its index."""
    if isinstance(items, str):
        return InboundMessages("", [{"role": "user", "content": items}])
    system: list[str] = []
    out: list[MessageParam] = []
    for index, raw in enumerate(items):
        item = plain_item(raw)
        kind = item.get("type")
        role = item.get("role")
        if kind in (None, "message") and isinstance(role, str):
            if role in ("system", "developer") and not out:
                system.append(_text_of(item.get("content"), index))
            elif role in ("system", "developer"):
                # A system message inside the conversation (a reminder) stays where it was,
                # carried on the user side and given back unchanged.
                _text_of(item.get("content"), index)  # a content it can read, else refused
                _add(out, "user", [opaque_block(item)])
            elif role == "user":
                _add(out, "user", _user_blocks(item.get("content"), index))
            elif role == "assistant":
                _add(out, "assistant", _assistant_blocks(item.get("content"), index))
            else:
                raise ConfigError(
                    f"input item {index}: role {role!r} is not a Responses role (system, "
                    "developer, user, assistant)"
                )
        elif kind == "function_call":
            block = {
                "type": "tool_use",
                "id": _call_id(item, index),
                "name": str(item.get("name", "")),
                "input": _parse_arguments(item.get("arguments")),
            }
            _add(out, "assistant", [block])
        elif kind == "function_call_output":
            result = {
                "type": "tool_result",
                "tool_use_id": _call_id(item, index),
                "content": _result_content(item.get("output"), index),
            }
            _add(out, "user", [result])
        elif isinstance(kind, str):
            side: Side = "user" if kind.endswith("_output") else "assistant"
            _add(out, side, [opaque_block(item)])
        else:
            raise ConfigError(
                f"input item {index}: neither a message (a role) nor a typed item: {item!r:.80}"
            )
    return InboundMessages("\n\n".join(t for t in system if t), out)


def _add(out: list[MessageParam], role: Side, blocks: list[dict[str, Any]]) -> None:
    """Append blocks to the last message when it has the same role, else open a message;
    tool results go after the results already there and before any other block."""
    if not blocks:
        return
    if not out or out[-1]["role"] != role:
        out.append({"role": role, "content": blocks})  # type: ignore[typeddict-item]
        return
    last = out[-1]
    content = last["content"]
    current: list[Any] = (
        ([{"type": "text", "text": content}] if content else [])
        if isinstance(content, str)
        else content
    )
    for block in blocks:
        if block.get("type") == "tool_result":
            at = 0
            while at < len(current) and current[at].get("type") == "tool_result":
                at += 1
            current.insert(at, block)
        else:
            current.append(block)
    last["content"] = current


def _call_id(item: Mapping[str, Any], index: int) -> str:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ConfigError(f"input item {index}: a {item.get('type')} item needs its call_id")
    return call_id


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"raw": arguments}
    return value if isinstance(value, dict) else {"raw": arguments}


def _text_of(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "output_text")
        )
    raise ConfigError(f"input item {index}: content must be a string or a list of parts")


def _user_blocks(content: Any, index: int) -> list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise ConfigError(f"input item {index}: content must be a string or a list of parts")
    return [_user_part(part, index) for part in content]


def _user_part(part: Any, index: int) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "input_image":
        if part.get("file_id"):
            return {"type": "image", "source": {"type": "file", "file_id": str(part["file_id"])}}
        return {"type": "image", "source": _source(str(part.get("image_url") or ""), "image/png")}
    if kind == "input_file":
        block: dict[str, Any] = {"type": "document", "source": _file_source(part)}
        if part.get("filename"):
            block["title"] = str(part["filename"])
        return block
    raise ConfigError(
        f"input item {index}: content part {kind!r} is not one the Responses API takes "
        "(input_text, input_image, input_file)"
    )


def _file_source(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("file_id"):
        return {"type": "file", "file_id": str(part["file_id"])}
    if part.get("file_data"):
        data = str(part["file_data"])
        if data.startswith("data:"):
            return _source(data, "application/pdf")
        return {"type": "base64", "media_type": "application/pdf", "data": data}
    return {"type": "url", "url": str(part.get("file_url") or "")}


def _source(url: str, default_type: str) -> dict[str, Any]:
    """A `data:` URL as a base64 source, any other URL as a url source."""
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[len("data:") :].split(";base64,", 1)
        return {"type": "base64", "media_type": media_type or default_type, "data": data}
    return {"type": "url", "url": url}


def _assistant_blocks(content: Any, index: int) -> list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise ConfigError(f"input item {index}: content must be a string or a list of parts")
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in ("output_text", "input_text", "text"):
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") == "refusal":
            blocks.append({"type": "text", "text": str(part.get("refusal", ""))})
    return blocks


def _result_content(output: Any, index: int) -> str | list[dict[str, Any]]:
    if output is None or isinstance(output, str):
        return output or ""
    if isinstance(output, list):
        return [_user_part(part, index) for part in output]
    raise ConfigError(f"input item {index}: output must be a string or a list of parts")


# --------------------------------------------------------------------------- messages -> items


def messages_to_items(messages: Sequence[MessageParam]) -> list[dict[str, Any]]:
    """The Responses `input` items for the project's messages (the system prompt travels
    apart, as `instructions`)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role, content = message["role"], message["content"]
        if isinstance(content, str):
            if content:
                items.append({"role": role, "content": content})
            continue
        blocks = [b for b in content if isinstance(b, Mapping)]
        if role == "assistant":
            items.extend(_assistant_items(blocks))
        else:
            items.extend(_user_items(blocks))
    return items


def _user_items(blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            items.append({"role": "user", "content": list(parts)})
            parts.clear()

    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            flush()
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(block.get("tool_use_id", "")),
                    "output": _output(block.get("content")),
                }
            )
        elif is_opaque_block(block):
            flush()
            items.append(dict(block["item"]))
        else:
            part = _input_part(block)
            if part is not None:
                parts.append(part)
    flush()
    return items


def _assistant_items(blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        text = "\n\n".join(t for t in texts if t)
        if text:
            items.append({"role": "assistant", "content": text})
        texts.clear()

    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            flush()
            items.append(
                {
                    "type": "function_call",
                    "call_id": str(block.get("id", "")),
                    "name": str(block.get("name", "")),
                    "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                }
            )
        elif is_opaque_block(block):
            flush()
            items.append(dict(block["item"]))
    flush()
    return items


def _input_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """One user content part, or None for a block the Responses API cannot carry."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "input_text", "text": str(block.get("text", ""))}
    source = block.get("source") or {}
    if kind == "image":
        if source.get("type") == "file":
            return {
                "type": "input_image",
                "file_id": str(source.get("file_id", "")),
                "detail": "auto",
            }
        return {"type": "input_image", "image_url": _url(source, "image/png"), "detail": "auto"}
    if kind == "document":
        if source.get("type") == "text":
            return {"type": "input_text", "text": str(source.get("data", ""))}
        if source.get("type") == "file":
            return {"type": "input_file", "file_id": str(source.get("file_id", ""))}
        if source.get("type") == "base64":
            return {
                "type": "input_file",
                "filename": str(block.get("title") or "document.pdf"),
                "file_data": _url(source, "application/pdf"),
            }
        return {"type": "input_file", "file_url": str(source.get("url", ""))}
    return None


def _url(source: Mapping[str, Any], default_type: str) -> str:
    if source.get("type") == "base64":
        media_type = source.get("media_type") or default_type
        return f"data:{media_type};base64,{source.get('data', '')}"
    return str(source.get("url", ""))


def _output(content: Any) -> str | list[dict[str, Any]]:
    """A tool result's content as a `function_call_output` output: a string when it is all
    text, else the list of input parts."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = [p for b in content if isinstance(b, Mapping) and (p := _input_part(b)) is not None]
    if all(p["type"] == "input_text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


__all__ = [
    "OPAQUE_ITEM",
    "RESPONSES_FORMAT",
    "is_opaque_block",
    "items_to_messages",
    "messages_to_items",
    "opaque_block",
    "plain_item",
]
