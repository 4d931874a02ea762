"""Type checks of the numbers and receipts unbounded reads from a record, shared by the readers.

A transcript is input: a token count that is negative or not a whole number, or a receipt
whose fields have the wrong types, would otherwise surface later as a negative total in
`inspect`, a TypeError in `recall`, or a traceback in `compact` and `eval`. Each check
returns what is wrong (naming the field) or None; the reader turns it into a TranscriptError
with the file and line, so every command and `Session.run_recall` fail the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RECEIPT_KEY = "receipt"
"""The key of a compaction's receipt in its boundary's compactMetadata."""
MICROCOMPACT_RECEIPT_SUBTYPE = "microcompact_receipt"
"""The subtype of the system record holding a microcompaction's receipt."""
MICROCOMPACT_RECEIPT_FIELD = "microcompactReceipt"
"""The field of that record holding the receipt."""

USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
"""The token counts of a Messages API usage object that unbounded adds up."""

# Receipt fields (recall/receipts.py): name -> kind. "count" is a whole number >= 0.
_RECEIPT_FIELDS = {
    "version": "count",
    "tier": "text",
    "messages": "count",
    "tokens": "count",
    "breaksCache": "flag",
    "toolResults": "items",
    "files": "texts",
    "covered": "covered",
}
_ITEM_FIELDS = {
    "id": "text",
    "tool": "text",
    "tokens": "count",
    "command": "text",
    "path": "text",
    "alreadyCleared": "flag",
}
_COVERED_FIELDS = {
    "by": "text",
    "summaryTokens": "count",
    "filesMentioned": "texts",
    "filesNotMentioned": "texts",
}


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return type(value).__name__ if value is not None else "null"


def count_problem(value: object, field: str) -> str | None:
    """What is wrong with a token count (absent is fine), or None."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return f"field '{field}' should be a whole number >= 0, found {_kind(value)}"
    return None


def usage_problem(usage: object, where: str = "message.usage") -> str | None:
    """What is wrong with a usage object (absent is fine), or None."""
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        return f"field '{where}' should be an object, found {_kind(usage)}"
    for name in USAGE_COUNTS:
        problem = count_problem(usage.get(name), f"{where}.{name}")
        if problem is not None:
            return problem
    return None


def token_counts_problem(usage: object, where: str) -> str | None:
    """What is wrong with a usage object in any agent's names (absent is fine), or None.

    Every `*_tokens` count (OpenAI's and litellm's `prompt_tokens`, the OpenHands SDK's
    `cache_read_tokens`, ...) must be a whole number >= 0, at the top level and inside its
    `*_details` objects; other fields are not read and not checked.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        return f"field '{where}' should be an object, found {_kind(usage)}"
    for name, value in usage.items():
        if not isinstance(name, str):
            continue
        problem = None
        if name.endswith("_tokens"):
            problem = count_problem(value, f"{where}.{name}")
        elif name.endswith("_details"):
            problem = token_counts_problem(value, f"{where}.{name}")
        if problem is not None:
            return problem
    return None


_EXPECTED: dict[str, tuple[type, str]] = {
    "text": (str, "a string"),
    "flag": (bool, "true or false"),
    "items": (list, "a list of objects"),
    "texts": (list, "a list of strings"),
    "covered": (Mapping, "an object"),
}


def _field_problem(value: Any, kind: str, field: str) -> str | None:
    if value is None:
        return None
    if kind == "count":
        return count_problem(value, field)
    expected, described = _EXPECTED[kind]
    if not isinstance(value, expected):
        return f"field '{field}' should be {described}, found {_kind(value)}"
    if kind == "covered":
        return _object_problem(value, _COVERED_FIELDS, field, ())
    items: list[Any] = value if isinstance(value, list) else []
    for position, item in enumerate(items):
        where = f"{field}[{position}]"
        if kind == "texts" and not isinstance(item, str):
            return f"field '{where}' should be a string, found {_kind(item)}"
        if kind == "items":
            problem = _object_problem(item, _ITEM_FIELDS, where, ("id",))
            if problem is not None:
                return problem
    return None


def _object_problem(
    value: object, fields: Mapping[str, str], where: str, required: tuple[str, ...]
) -> str | None:
    if not isinstance(value, Mapping):
        return f"field '{where}' should be an object, found {_kind(value)}"
    for name in required:
        if value.get(name) is None:
            return f"field '{where}.{name}' is missing"
    for name, kind in fields.items():
        problem = _field_problem(value.get(name), kind, f"{where}.{name}")
        if problem is not None:
            return problem
    return None


def receipt_problem(receipt: object, where: str) -> str | None:
    """What is wrong with a compaction's or microcompaction's receipt (absent is fine)."""
    if receipt is None:
        return None
    return _object_problem(receipt, _RECEIPT_FIELDS, where, ())
