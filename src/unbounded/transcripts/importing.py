"""Small pieces every transcript reader needs: naming a JSON value's kind in an error, tool-call
ids made unique, and counting the record types a reader does not know."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
