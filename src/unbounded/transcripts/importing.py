"""Small pieces every importer of a foreign transcript format (Codex, OpenHands, SWE-agent)
needs: naming a JSON value's kind in an error, and tool-call ids made unique."""

from __future__ import annotations

from typing import Any


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
