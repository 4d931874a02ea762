"""Type checks of the numbers and receipts unbounded reads from a record, shared by the readers.

A transcript is input: a token count that is negative or not a whole number, or a receipt
whose fields have the wrong types, would otherwise surface later as a negative total in
`inspect`, a TypeError in `recall`, or a traceback in `compact` and `eval`. Each check
returns what is wrong (naming the field) or None; the reader turns it into a TranscriptError
with the file and line, so every command and `Session.run_recall` fail the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


COUNT_LIMIT = 2**63
"""Token counts (and their sums within one usage) stay below this: they are held in 64-bit
signed columns (`array('q')`), which a larger number overflows."""

CACHE_CREATION_SPLIT = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
"""The counts of a usage's `cache_creation` object: cache writes at 5 minutes and at 1 hour."""


def count_problem(value: object, field: str) -> str | None:
    """What is wrong with a token count (absent is fine), or None."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return f"field '{field}' should be a whole number >= 0, found {_kind(value)}"
    if value >= COUNT_LIMIT:
        return f"field '{field}' is too large to be a token count: {value} (the limit is 2**63)"
    return None


def sum_problem(counts: Mapping[str, object], names: Iterable[str], where: str) -> str | None:
    """What is wrong with the sum of already checked counts (too large to hold), or None."""
    present = {name: value for name in names if isinstance(value := counts.get(name), int)}
    total = sum(present.values())
    if total >= COUNT_LIMIT:
        listed = " + ".join(f"{where}.{name}" for name in present)
        return f"the token counts {listed} add up to {total}, too large to hold (limit 2**63)"
    return None


def usage_problem(usage: object, where: str = "message.usage") -> str | None:
    """What is wrong with a usage object (absent is fine), or None."""
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        return f"field '{where}' should be an object, found {_kind(usage)}"
    problem = _first_count_problem(usage, USAGE_COUNTS, where)
    if problem is not None:
        return problem
    split = usage.get("cache_creation")
    if split is not None:
        # The 5m / 1h split of the cache writes, which replay prices apart.
        at = f"{where}.cache_creation"
        if not isinstance(split, Mapping):
            return f"field '{at}' should be an object, found {_kind(split)}"
        problem = _first_count_problem(split, CACHE_CREATION_SPLIT, at) or sum_problem(
            split, CACHE_CREATION_SPLIT, at
        )
        if problem is not None:
            return problem
    return sum_problem(usage, USAGE_COUNTS, where)


def _first_count_problem(
    counts: Mapping[str, object], names: Iterable[str], where: str
) -> str | None:
    """The problem of the first of `names` in `counts` that is no token count, or None."""
    for name in names:
        problem = count_problem(counts.get(name), f"{where}.{name}")
        if problem is not None:
            return problem
    return None


def token_counts_problem(usage: object, where: str) -> str | None:
    """What is wrong with a usage object in any agent's names (absent is fine), or None.

    Every `*_tokens` count (OpenAI's and litellm's `prompt_tokens`, the OpenHands SDK's
    `cache_read_tokens`, ...) must be a whole number >= 0 below 2**63, at the top level and
    inside its `*_details` objects, and the counts of one object must add up to less than
    2**63; other fields are not read and not checked.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        return f"field '{where}' should be an object, found {_kind(usage)}"
    counts: list[str] = []
    for name, value in usage.items():
        if not isinstance(name, str):
            continue
        problem = None
        if name.endswith("_tokens"):
            problem = count_problem(value, f"{where}.{name}")
            counts.append(name)
        elif name.endswith("_details"):
            problem = token_counts_problem(value, f"{where}.{name}")
        if problem is not None:
            return problem
    return sum_problem(usage, counts, where)


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
