"""Text that can always be written: lone UTF-16 surrogates repaired to U+FFFD.

Python strings can hold lone surrogates (`"\\ud83d"` from an emoji sliced in half, or
`os.listdir()` of a Latin-1 file name decoded with `surrogateescape`); JSON may carry them as
`\\ud83d` escapes too. UTF-8 cannot encode them, so orjson refuses to write them and the API
refuses to read them. A valid surrogate pair is joined into its character; a lone one becomes
U+FFFD, the Unicode replacement character.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def has_lone_surrogate(text: str) -> bool:
    """True when `text` cannot be encoded as UTF-8 because of a surrogate code point."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def repair_surrogates(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if not has_lone_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_value(value: Any) -> tuple[Any, int]:
    """A JSON value with every string repaired; returns it and how many strings changed."""
    if isinstance(value, str):
        repaired = repair_surrogates(value)
        return repaired, int(repaired is not value)
    if isinstance(value, list):
        changed = 0
        items = []
        for item in value:
            new, count = repair_value(item)
            items.append(new)
            changed += count
        return (items, changed) if changed else (value, 0)
    if isinstance(value, dict):
        changed = 0
        fields: dict[Any, Any] = {}
        for key, item in value.items():
            new_key, key_count = repair_value(key) if isinstance(key, str) else (key, 0)
            new, count = repair_value(item)
            fields[new_key] = new
            changed += count + key_count
        return (fields, changed) if changed else (value, 0)
    return value, 0
