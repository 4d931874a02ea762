"""The exceptions unbounded raises: a small hierarchy, each carrying where and how to fix."""

from __future__ import annotations

from pathlib import Path


class UnboundedError(Exception):
    """Base class of every error unbounded raises on purpose."""


class ConfigError(UnboundedError, ValueError):
    """A parameter, environment variable or data file has a value we cannot use."""


class TranscriptError(UnboundedError):
    """A transcript cannot be read: names the file, the line and what to do about it."""

    def __init__(
        self,
        reason: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """Render as `file:line: reason (hint)` on a single line."""
        where = self.path or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        text = f"{where}: {self.reason}"
        if self.hint:
            text = f"{text} ({self.hint})"
        return text.replace("\n", " ")


class InvalidRequestError(UnboundedError, ValueError):
    """A message list breaks a rule the Anthropic Messages API enforces."""

    def __init__(self, rule: str, index: int | None, detail: str) -> None:
        self.rule = rule
        self.index = index
        self.detail = detail
        where = f"messages[{index}]" if index is not None else "messages"
        super().__init__(f"{where}: {rule}: {detail}")
