"""Every exception unbounded raises: one hierarchy, each carrying where and how to fix.

    UnboundedError
    ├── ConfigError (also ValueError)        a parameter, variable or file we cannot use
    ├── TranscriptError                      a transcript that cannot be read (file:line)
    ├── InvalidRequestError (also ValueError) a message list the Messages API would refuse
    ├── ProviderError                        a model call failed (status, request_id)
    │   ├── PromptTooLongError               over the window (token_gap)
    │   ├── RetryableError                   transient (retry_after)
    │   │   ├── RateLimitedError             429
    │   │   ├── OverloadedError              529 / 503
    │   │   └── ServerError                  other 5xx, reset connection, timeout
    │   ├── AuthenticationError              401 / 403, never retried
    │   └── BadRequestError                  other 400, never retried
    ├── CompactionError                      no usable summary (reason); history untouched
    ├── SessionClosedError                   a closed session was used
    ├── SessionLockedError                   another process holds the session's folder
    ├── StoreDamagedError                    a failed write could not be undone
    ├── HookBlockingError                    a callable hook blocks, like exit code 2
    ├── RecallArgumentError                  the model's `recall` arguments name nothing
    ├── ToolArgumentError (also ValueError)  the model's tool arguments misfit the signature
    └── SettledMessageError (also LookupError) a replay read what a settled message let go

Every class is importable from `unbounded` and from here, and from nowhere else: no other
module lists one among its public names. `tests/test_errors_module.py` keeps every exception
class of the package in this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


class ProviderError(UnboundedError):
    """A model call failed. `status` and `request_id` come from the server when it answered."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.request_id = request_id
        self.body = body


class PromptTooLongError(ProviderError):
    """The request is over the context window; `token_gap` is how far over, when the server said."""

    def __init__(
        self,
        message: str,
        *,
        actual_tokens: int | None = None,
        limit_tokens: int | None = None,
        status: int | None = 400,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, status=status, request_id=request_id, body=body)
        self.actual_tokens = actual_tokens
        self.limit_tokens = limit_tokens

    @property
    def token_gap(self) -> int | None:
        """Tokens to remove for the request to fit, or None when the error did not say."""
        if self.actual_tokens is None or self.limit_tokens is None:
            return None
        return max(0, self.actual_tokens - self.limit_tokens)


class RetryableError(ProviderError):
    """A transient failure; `retry_after` (seconds) when the server asked for a wait."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, status=status, request_id=request_id, body=body)
        self.retry_after = retry_after


class RateLimitedError(RetryableError):
    """HTTP 429."""


class OverloadedError(RetryableError):
    """HTTP 529 (Anthropic) or 503: the service is overloaded."""


class ServerError(RetryableError):
    """HTTP 5xx other than overload, a reset connection or a timeout."""


class AuthenticationError(ProviderError):
    """The API key was refused (401/403). Never retried."""


class BadRequestError(ProviderError):
    """The request was refused as malformed (400 other than prompt-too-long). Never retried."""


class CompactionError(UnboundedError):
    """A compaction could not produce a usable summary; the history is left untouched."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SessionClosedError(UnboundedError):
    """The session was closed; open it again to go on."""


class SessionLockedError(UnboundedError):
    """Another process holds this session's folder."""


class StoreDamagedError(UnboundedError):
    """A failed write could not be undone; the store refuses appends until it is reopened."""


class HookBlockingError(UnboundedError):
    """Raised by a callable hook to block, like a command exiting with code 2."""


class RecallArgumentError(UnboundedError):
    """The model's arguments to `recall` do not name one thing to bring back."""


class ToolArgumentError(UnboundedError, ValueError):
    """A tool call's arguments do not fit the function's signature (the model's to fix)."""


class SettledMessageError(UnboundedError, LookupError):
    """A replay read the content of a message it had settled (packed without its text):
    a reader the settling rules missed, never a wrong figure."""
