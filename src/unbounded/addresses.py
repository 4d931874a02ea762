"""Where a transcript is: a file path, or a session in PostgreSQL (`postgresql://…/db?session=ID`).

Every command that reads a transcript parses its argument here, so a file and a database
session are named the same way everywhere. A database address is a libpq connection URL
(`postgresql://` or `postgres://`) with one extra query parameter, `session`, naming the
session; every other parameter (`host=`, `sslmode=`, `options=`…) goes to the connection.
Passwords never appear in what `display` returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode

from unbounded.errors import ConfigError
from unbounded.redaction import redact_url

if TYPE_CHECKING:
    from unbounded.model.transcript import Transcript

DATABASE_SCHEMES = ("postgresql", "postgres")
SESSION_PARAMETER = "session"


@dataclass(frozen=True, slots=True)
class FileAddress:
    """A transcript file."""

    path: Path

    @property
    def display(self) -> str:
        """The path as given."""
        return str(self.path)


@dataclass(frozen=True, slots=True)
class DatabaseAddress:
    """A PostgreSQL database, and optionally one session in it."""

    url: str
    """The connection URL without the `session` parameter (what libpq is given)."""
    session: str | None

    @property
    def display(self) -> str:
        """The address with its password hidden, for messages and reports."""
        shown = redact_url(self.url)
        if self.session is None:
            return shown
        joiner = "&" if "?" in shown else "?"
        return f"{shown}{joiner}{urlencode({SESSION_PARAMETER: self.session})}"

    def with_session(self, session: str | None) -> DatabaseAddress:
        """The same database, another session (None keeps this one)."""
        return DatabaseAddress(self.url, session if session is not None else self.session)

    def require_session(self, option: str | None = None) -> str:
        """The session id, or a clear error telling how to give one: in the address, or with
        `option` when the command has one (export's `--session`)."""
        if not self.session:
            also = f" or pass {option} ID" if option else ""
            raise ConfigError(
                f"{self.display}: no session named: add ?session=ID to the address{also} "
                "(`unbounded sessions URL` lists them)"
            )
        return self.session


Address = FileAddress | DatabaseAddress


def is_database_address(text: str) -> bool:
    """Whether `text` is a PostgreSQL URL rather than a file path."""
    scheme, separator, _ = text.partition("://")
    return bool(separator) and scheme.lower() in DATABASE_SCHEMES


def parse_address(text: str | Path) -> Address:
    """A file path or a `postgresql://…/db?session=ID` URL (see the module docstring)."""
    if isinstance(text, Path) or not is_database_address(text):
        return FileAddress(Path(text))
    # Split by hand: urlunsplit would turn `postgresql:///db` (empty host) into `postgresql:/db`.
    base, query = _split_query(text)
    sessions: list[str] = []
    kept: list[tuple[str, str]] = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == SESSION_PARAMETER:
            sessions.append(value)
        else:
            kept.append((name, value))
    if len(sessions) > 1:
        raise ConfigError(f"{redact_url(text)}: give `session=` once, not {len(sessions)} times")
    if sessions and not sessions[0]:
        raise ConfigError(f"{redact_url(text)}: `session=` is empty; name a session id")
    # %20, not +, for a space: libpq decodes only %XX (options=-c%20x would reach it as -c+x).
    url = f"{base}?{urlencode(kept, quote_via=quote)}" if kept else base
    return DatabaseAddress(url, sessions[0] if sessions else None)


_NOT_A_HOST = re.compile(r"[^/?]*[&=]")
"""What follows an @ when it is not a host (`srv&session=S`): the @ is a query value's."""
_HOST_THEN_MORE = re.compile(r"[^/?&=]*(?:[/?]|$)")
"""What follows an @ that ends a user part: a host, then the path, query or end."""


def _split_query(text: str) -> tuple[str, str]:
    """The URL and its query, split where libpq splits them: after the user:password part
    (up to the first @ before any /), so a ? in a password stays in it; refused where libpq
    would read a password's ? as the query's start."""
    start = text.index("://") + 3
    at, slash = text.find("@", start), text.find("/", start)
    user_part = at >= 0 and (slash < 0 or at < slash)
    if user_part and "?" in text[start:at] and _NOT_A_HOST.match(text, at + 1):
        # `h?user=admin@srv&session=S`: no host follows the @, so it is in a query value
        # (libpq would take `h?user=admin` for a user); sent encoded, it reads the same.
        user_part = False
    mark = text.find("?", at + 1 if user_part else start)
    if mark < 0:
        return text, ""
    query = text[mark + 1 :]
    if not user_part and at > slash > mark >= 0 and (
        any("@" in p.partition("=")[0] for p in query.split("&"))
        or _HOST_THEN_MORE.match(text, at + 1)
    ):
        # libpq ends the user part at the first /, so a ? before it begins the query: it
        # would refuse the rest ("invalid URI query parameter") and show the password.
        raise ConfigError(
            f"{redact_url(text)}: a ? in the password ends the address's user part where a "
            "/ follows it: percent-encode ? in the password as %3F (and / as %2F)"
        )
    return text[:mark], query


def load_address(
    address: str | Path | Address, *, skip_invalid: bool = False, file_order: bool = False
) -> tuple[Transcript, str]:
    """Read the transcript at an address, and a name for it: a file (any supported format,
    detected from its content) or a database session (read-only: no lock is taken).

    As with `load_transcript`, the main thread is rebuilt from parent links and what that
    leaves out is in the warnings; `file_order=True` takes records in file order instead.
    """
    where = (
        address if isinstance(address, (FileAddress, DatabaseAddress)) else parse_address(address)
    )
    if isinstance(where, FileAddress):
        from unbounded.transcripts.loader import load_transcript

        transcript = load_transcript(where.path, skip_invalid=skip_invalid, file_order=file_order)
        return transcript, where.path.name
    from unbounded.postgres.store import PostgresStore

    session = where.require_session()
    with PostgresStore(where.url, session, lock=False, create=False) as store:
        transcript = store.load()
    if file_order:
        transcript.thread_order = "file"
    transcript.warnings.extend(transcript.thread_report().warnings())
    return transcript, session
