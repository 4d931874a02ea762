"""Names of the outputs a store keeps on the side: one per tool result part, never shared.

An output too large to send whole (`compaction.large_output`) is kept under a name made from
the id of the tool call it answers and the position of the text in its result (0 for a
string result or the first block). The name must tell every id apart, whatever the provider
puts in it: `call.1`, `call:1` and `call/1` are three calls, `toolu_1` and `TOOLU_1` are two
even on a case-insensitive disk, and the second block of `x`'s result is not the result of a
call named `x-1`. So the id is written in lowercase base32 (letters and 2-7 only, safe in a
file name anywhere) and the part after a dot: `id-<base32>.<part>`, which decodes back to
the id. An id whose encoding would not fit in a file name (over `MAX_ENCODED_CHARS`) is named
by its SHA-256 instead, `sha-<hex>.<part>`.

Earlier versions named the file after the id with every character other than a letter, digit,
`-` or `_` replaced by `_` (and the part appended as `-<part>`), which let ids collide.
`legacy_side_output_name` gives that name, so outputs kept by those versions can still be
read; since such a name may belong to another call, a reader checks what it finds against the
shortened copy in the transcript (`large_output.is_kept_copy_of`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from unbounded.errors import ConfigError

MAX_ENCODED_CHARS = 200
"""Longest base32 id kept in a name (file names stop at 255 bytes)."""
_NAME = re.compile(r"(?:id-([a-z2-7]*)|sha-([0-9a-f]{64}))\.(0|[1-9][0-9]{0,5})")
_LEGACY_MAX_CHARS = 200


def side_output_name(tool_id: str, part: int = 0) -> str:
    """The name under which part `part` of the result of tool call `tool_id` is kept."""
    if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part <= 999_999:
        raise ConfigError(f"a side output part must be a whole number 0-999999, not {part!r}")
    raw = str(tool_id).encode("utf-8", "surrogatepass")
    encoded = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    if len(encoded) > MAX_ENCODED_CHARS:
        return f"sha-{hashlib.sha256(raw).hexdigest()}.{part}"
    return f"id-{encoded}.{part}"


def check_side_output_name(name: str) -> str:
    """`name` when `side_output_name` could have made it; else a ConfigError."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ConfigError(
            f"{str(name)[:80]!r} is not a side output name: make keys with "
            "unbounded.side_outputs.side_output_name(tool_id, part)"
        )
    return name


def parse_side_output_name(name: str) -> tuple[str, int] | None:
    """(tool id, part) a name was made from; None for a hashed or foreign name."""
    match = _NAME.fullmatch(name)
    if match is None or match.group(1) is None:
        return None
    encoded = match.group(1).upper()
    padded = encoded + "=" * (-len(encoded) % 8)
    try:
        raw = base64.b32decode(padded)
    except (binascii.Error, ValueError):
        return None
    return raw.decode("utf-8", "surrogatepass"), int(match.group(3))


def legacy_side_output_name(name: str) -> str | None:
    """The name earlier versions gave the same output (see the module docstring), or None
    when they could not have kept it (a hashed name, an id with no letter or digit)."""
    parsed = parse_side_output_name(name)
    if parsed is None:
        return None
    tool_id, part = parsed
    key = tool_id if part == 0 else f"{tool_id}-{part}"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in key)[:_LEGACY_MAX_CHARS]
    return safe if safe.strip("_") else None


__all__ = [
    "MAX_ENCODED_CHARS",
    "check_side_output_name",
    "legacy_side_output_name",
    "parse_side_output_name",
    "side_output_name",
]
