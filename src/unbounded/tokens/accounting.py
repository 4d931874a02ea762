"""Where a conversation's tokens go, by category (length / 4 per block).

Categories: the user's messages, the assistant's messages (thinking included), tool requests
and tool results per tool, local command output, attachments per type, and "other" (images,
documents, unknown blocks). Duplicate file reads are the tokens that re-reading the same file
cost: for a file read n times, floor(total / n) * (n - 1).

Only what reaches the API is counted: progress, system records and synthetic errors are
skipped, as normalization skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from unbounded.model.attachments import attachment_to_content
from unbounded.model.entries import Entry
from unbounded.model.tools import file_read_path
from unbounded.tokens.estimate import TOKENS_PER_IMAGE, rough_token_count, tool_result_tokens

TextCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class DuplicateRead:
    """A file read more than once, and the tokens the extra reads cost."""

    count: int
    tokens: int


@dataclass(slots=True)
class TokenAccounting:
    """Token totals by category."""

    human_messages: int = 0
    assistant_messages: int = 0
    local_command_outputs: int = 0
    other: int = 0
    tool_requests: dict[str, int] = field(default_factory=dict)
    tool_results: dict[str, int] = field(default_factory=dict)
    tool_calls: dict[str, int] = field(default_factory=dict)
    attachments: dict[str, int] = field(default_factory=dict)
    attachment_counts: dict[str, int] = field(default_factory=dict)
    duplicate_file_reads: dict[str, DuplicateRead] = field(default_factory=dict)
    total: int = 0

    @property
    def tool_request_tokens(self) -> int:
        """All tool-call tokens."""
        return sum(self.tool_requests.values())

    @property
    def tool_result_tokens(self) -> int:
        """All tool-result tokens."""
        return sum(self.tool_results.values())

    @property
    def attachment_tokens(self) -> int:
        """All attachment tokens."""
        return sum(self.attachments.values())

    @property
    def duplicate_read_tokens(self) -> int:
        """Tokens spent reading files again."""
        return sum(d.tokens for d in self.duplicate_file_reads.values())

    def categories(self) -> dict[str, int]:
        """Top-level categories that add up to `total`."""
        return {
            "user_messages": self.human_messages,
            "assistant_messages": self.assistant_messages,
            "tool_requests": self.tool_request_tokens,
            "tool_results": self.tool_result_tokens,
            "local_command_output": self.local_command_outputs,
            "attachments": self.attachment_tokens,
            "other": self.other,
        }

    def percent(self, tokens: int) -> int:
        """tokens as a rounded percentage of the total."""
        return round(tokens / self.total * 100) if self.total else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready breakdown with percentages (seed 003 metrics)."""
        return {
            "total_tokens": self.total,
            "categories": self.categories(),
            "percent": {name: self.percent(v) for name, v in self.categories().items()},
            "tool_requests": dict(sorted(self.tool_requests.items(), key=lambda kv: -kv[1])),
            "tool_results": dict(sorted(self.tool_results.items(), key=lambda kv: -kv[1])),
            "tool_calls": dict(sorted(self.tool_calls.items(), key=lambda kv: -kv[1])),
            "attachments": {
                kind: {"count": self.attachment_counts.get(kind, 0), "tokens": tokens}
                for kind, tokens in sorted(self.attachments.items())
            },
            "duplicate_reads": {
                "tokens": self.duplicate_read_tokens,
                "files": len(self.duplicate_file_reads),
                "percent": self.percent(self.duplicate_read_tokens),
                "by_file": {
                    path: {"count": d.count, "tokens": d.tokens}
                    for path, d in sorted(
                        self.duplicate_file_reads.items(), key=lambda kv: -kv[1].tokens
                    )
                },
            },
        }


def _add(table: dict[str, int], key: str, tokens: int) -> None:
    table[key] = table.get(key, 0) + tokens


class TokenAccountant:
    """`build_token_accounting` one entry at a time: `add` returns what the entry added to
    each category (keys of `TokenAccounting.categories`), so a caller can split the totals
    (e.g. before and after the last API usage) without counting twice."""

    def __init__(self, count_text: TextCounter = rough_token_count) -> None:
        self.stats = TokenAccounting()
        self._count_text = count_text
        self._tool_names: dict[str, str] = {}
        self._read_paths: dict[str, str] = {}
        self._reads: dict[str, list[int]] = {}  # path -> [count, total tokens]

    def add(self, entry: Entry) -> dict[str, int]:
        """Account for one entry; the tokens it added per category (empty: none)."""
        added: dict[str, int] = {}
        stats = self.stats
        kind = entry.type
        if kind == "attachment":
            attachment = entry.attachment or {}
            name = str(attachment.get("type", "unknown"))
            tokens = sum(self._text_of(dict(b)) for b in attachment_to_content(attachment))
            _add(stats.attachments, name, tokens)
            _add(stats.attachment_counts, name, 1)
            stats.total += tokens
            added["attachments"] = tokens
            return added
        if kind not in ("user", "assistant") or entry.is_synthetic_api_error:
            return added
        is_user = kind == "user"
        content = entry.content
        if isinstance(content, str):
            self._add_text(content, is_user, added)
            return added
        for raw_block in content:
            self._add_block(dict(raw_block), is_user, added)
        return added

    def finish(self) -> TokenAccounting:
        """The accounting so far, duplicate reads included."""
        reads = {path: counts for path, counts in self._reads.items() if counts[0] > 1}
        self.stats.duplicate_file_reads = {
            path: DuplicateRead(count, (total // count) * (count - 1))
            for path, (count, total) in reads.items()
        }
        return self.stats

    def _text_of(self, block: dict[str, Any]) -> int:
        return self._count_text(str(block.get("text", "")))

    def _add_text(self, text: str, is_user: bool, added: dict[str, int]) -> None:
        tokens = self._count_text(text)
        if is_user and "local-command-stdout" in text:
            self.stats.local_command_outputs += tokens
            _add(added, "local_command_output", tokens)
        elif is_user:
            self.stats.human_messages += tokens
            _add(added, "user_messages", tokens)
        else:
            self.stats.assistant_messages += tokens
            _add(added, "assistant_messages", tokens)
        self.stats.total += tokens

    def _add_block(self, block: dict[str, Any], is_user: bool, added: dict[str, int]) -> None:
        stats = self.stats
        count_text = self._count_text
        block_type = block.get("type")
        if block_type == "text":
            self._add_text(str(block.get("text", "")), is_user, added)
            return
        if block_type in ("thinking", "redacted_thinking"):
            tokens = count_text(str(block.get("thinking") or block.get("data") or ""))
            stats.assistant_messages += tokens
            category = "assistant_messages"
        elif block_type == "tool_use":
            name = str(block.get("name", "unknown"))
            tokens = count_text(name + orjson.dumps(block.get("input", {})).decode())
            _add(stats.tool_requests, name, tokens)
            _add(stats.tool_calls, name, 1)
            tool_id = str(block.get("id"))
            self._tool_names[tool_id] = name
            path = file_read_path(block)
            if path:
                self._read_paths[tool_id] = path
            category = "tool_requests"
        elif block_type == "tool_result":
            tool_id = str(block.get("tool_use_id"))
            if count_text is rough_token_count:
                tokens = tool_result_tokens(block)
            else:
                tokens = _tool_result_tokens(block, count_text)
            _add(stats.tool_results, self._tool_names.get(tool_id, "unknown"), tokens)
            path = self._read_paths.get(tool_id)
            if path:
                record = self._reads.setdefault(path, [0, 0])
                record[0] += 1
                record[1] += tokens
            category = "tool_results"
        elif block_type in ("image", "document"):
            tokens = TOKENS_PER_IMAGE
            stats.other += tokens
            category = "other"
        else:
            tokens = count_text(orjson.dumps(block).decode())
            stats.other += tokens
            category = "other"
        _add(added, category, tokens)
        stats.total += tokens


def build_token_accounting(
    entries: Iterable[Entry], count_text: TextCounter = rough_token_count
) -> TokenAccounting:
    """Break the tokens of these entries down by category (see module docstring)."""
    accountant = TokenAccountant(count_text)
    for entry in entries:
        accountant.add(entry)
    return accountant.finish()


def _tool_result_tokens(block: dict[str, Any], count_text: TextCounter) -> int:
    content = block.get("content")
    if isinstance(content, str):
        return count_text(content)
    total = 0
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                total += count_text(str(part.get("text", "")))
            elif part.get("type") in ("image", "document"):
                total += TOKENS_PER_IMAGE
    return total
