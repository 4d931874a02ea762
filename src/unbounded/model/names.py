"""Names in text that look like code: what a summary should keep so an agent can search.

Used by the continuation measure (which names the agent went on to use); the offline
hand-over does not use them (a summary built to hold the measure's names would only satisfy
the measure):

- dotted names: `Module.function`, `pkg.mod.Class` (not file names such as `app.js`);
- `snake_case` (an inner underscore) and `camelCase` / `PascalCase` (an inner capital);
- `kebab-case`: CSS classes, task ids such as `spotter-dov`, flags' names;
- hexadecimal ids with both letters and digits, 7 to 40 long (`b7636e2`, commit shas).

Names shorter than 4 characters are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_FILE_EXTENSIONS = re.compile(
    r"\.(?:py|pyi|js|jsx|ts|tsx|mjs|cjs|ex|exs|heex|eex|erl|go|rs|java|kt|rb|php|c|h|cc|cpp|"
    r"hpp|cs|swift|sh|md|json|jsonl|yaml|yml|toml|css|scss|html|sql|txt|lock|cfg|ini|xml|vue|"
    r"svelte|lua|dart|zig)$",
    re.I,
)
_IDENTIFIER_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?<![\w.-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w-])"),  # dotted names
    re.compile(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9](?![\w-])"),  # snake_case
    re.compile(r"(?<![\w.-])[A-Za-z][a-z0-9]+[A-Z][A-Za-z0-9]*(?![\w-])"),  # camelCase, PascalCase
    re.compile(r"(?<![\w.-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])"),  # kebab-case
    # hexadecimal ids with letters and digits
    re.compile(r"(?<![\w.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])"),
)
MIN_IDENTIFIER_CHARS = 4
"""Shorter names are too common to mean anything."""
_LONG_TOKEN = re.compile(r"\S{200,}")
"""Runs this long are data (base64, minified code), not names: dropped before matching,
which also keeps the patterns linear in the text's length."""


def identifiers_in(text: str) -> list[str]:
    """Names in `text` that look like code (see the module docstring), each once, in a fixed
    order (pattern by pattern, then as they appear): never a set's, which varies with the
    string-hash seed and would reorder what callers rank."""
    found: dict[str, None] = {}
    text = _LONG_TOKEN.sub(" ", text)
    for pattern in _IDENTIFIER_PATTERNS:
        for match in pattern.findall(text):
            name = match.strip(".")
            if len(name) < MIN_IDENTIFIER_CHARS or _FILE_EXTENSIONS.search(name):
                continue
            found.setdefault(name)
    return list(found)




__all__ = ["MIN_IDENTIFIER_CHARS", "identifiers_in"]


def strings_in(value: Any) -> Iterable[str]:
    """Every string inside a JSON-like value (a tool call's input), where names are sought."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
