"""Optional redaction of secret-looking strings in text unbounded writes (off by default).

`redact(text)` replaces what looks like a credential with `[REDACTED:<kind>]`:

| kind | pattern |
|---|---|
| `anthropic_key` | `sk-ant-` followed by 20 or more key characters |
| `openai_key` | `sk-`, `sk-proj-`, `sk-svcacct-`, `sk-admin-` followed by 20 or more |
| `aws_access_key_id` | `AKIA`, `ASIA`, `ABIA`, `ACCA` + 16 upper-case letters or digits |
| `aws_secret_access_key` | 16 or more base64 characters (`+`, `/` and `=` included, so a |
| | secret cut short too) after `aws_secret_access_key`, `secret_access_key` or |
| | `SecretAccessKey` and `=`, `:` or a space, quoted or not (env, INI, JSON, `aws |
| | configure set`); and 40 such characters on the line of an access key id (CSV, `id:secret`) |
| `github_token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` + 36 or more, `github_pat_` + 22 or more |
| `slack_token` | `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-` tokens |
| `google_api_key` | `AIza` + 35 characters |
| `bearer_token` | the token after `Bearer ` (16 or more token characters; the word is kept) |
| `jwt` | a JSON Web Token anywhere (`eyJ...`.`...`.`...`), with or without `Bearer` |
| `password` | the password of a URL (`scheme://user:PASSWORD@host`), the value of |
| | `--password=`/`--password `/`--passwd`/`--pass`, of `PASSWORD=`, `db_password:`, |
| | `"password": "..."`, and of `curl -u user:PASSWORD` |
| `private_key` | a `-----BEGIN ... PRIVATE KEY-----` block to its END line (or the text's end) |

Where two matches overlap, their union is redacted (a password run into an AWS key leaves no
part of either). A `Redactor` adds literal secrets (for instance every API key in the
environment: `Redactor.from_environment()`) and extra patterns; `learning_from(texts)` adds
every secret found in `texts`, and its pieces, as literals, so text derived from them (a
summary quoting a secret cut short, or a piece of it) is redacted too.

The session applies one to everything it writes when asked (`Session(...,
redact_secrets=True)`): summaries (with the secrets of what they summarized learned first),
re-injected attachments, hook context, receipts (in the boundary and the microcompaction
record), session notes (`session-memory/summary.md`), outputs kept on the side (the kept copy
and the shortened one it leaves in the transcript), cache-break diffs, events
(`redacting_sink`) and span attributes. It never rewrites what the host appended: the
transcript is append-only and holds the conversation as it happened. Callers writing their
own reports use `redact` / `redact_data` directly.

A connection address is shown through `redact_url` (its password, in a URL's userinfo or
query or libpq's `password=` keyword, as `***`), and a connection error's reason through
`redact_address_secrets` (libpq may quote a value of the address back).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from unbounded.events import Event, EventSink
from unbounded.fileio import atomic_write_chunks

if TYPE_CHECKING:
    from unbounded.compaction.conversation import CompactionResult

REPLACEMENT = "[REDACTED:{kind}]"
"""What a secret is replaced with."""
MIN_LITERAL_LENGTH = 12
"""Literal secrets shorter than this are ignored (they would match ordinary text)."""
SECRET_ENV_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.I)
"""Environment variables whose values `Redactor.from_environment` treats as secrets."""

_KEY_CHARS = r"[A-Za-z0-9_\-]"
_B64 = r"A-Za-z0-9/+="

DEFAULT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
            re.S,
        ),
    ),
    ("anthropic_key", re.compile(rf"\bsk-ant-{_KEY_CHARS}{{20,}}")),
    ("openai_key", re.compile(rf"\bsk-(?:proj-|svcacct-|admin-)?{_KEY_CHARS}{{20,}}")),
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    (
        # After its name (env, INI, JSON, `aws configure set`), whole or cut short.
        "aws_secret_access_key",
        re.compile(
            rf"(?i)(?:aws_?)?secret_?access_?key[\"']?(?:\s*[=:]\s*|\s+)[\"']?"
            rf"(?P<secret>[{_B64}]{{16,}})"
        ),
    ),
    (
        # 40 characters on the same line after an access key id (a CSV or `id:secret` pair).
        "aws_secret_access_key",
        re.compile(
            rf"\b(?:AKIA|ASIA)[0-9A-Z]{{16}}\b[^\n]{{0,80}}?(?<![{_B64}])"
            rf"(?P<secret>[{_B64}]{{40}})(?![{_B64}])"
        ),
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_\w{22,255})")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])")),
    ("bearer_token", re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{16,})")),
    # A JSON Web Token anywhere (header and payload are base64url JSON: they start `eyJ`).
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*")),
    # The password of a URL: scheme://user:password@host.
    (
        "password",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@"),
    ),
    # --password=VALUE, --password VALUE, --passwd, --pass (a value, not the next flag).
    (
        "password",
        re.compile(r"(?i)--pass(?:word|wd)?(?:=|\s+)[\"']?(?P<secret>(?!-)[^\s\"']+)"),
    ),
    # PASSWORD=VALUE, DB_PASSWORD: VALUE, "password": "VALUE".
    (
        "password",
        re.compile(
            r"(?i)\b\w*pass(?:word|wd)[\"']?\s*[=:]\s*[\"']?(?P<secret>[^\s\"',;&]{3,})"
        ),
    ),
    # curl -u user:password
    ("password", re.compile(r"(?:^|\s)(?:-u|--user)\s+[^\s:]+:(?P<secret>[^\s\"']+)")),
)
"""(kind, pattern) pairs. A pattern with a `secret` group redacts only that group (the
name before it, e.g. "Bearer ", is kept); otherwise the whole match."""
MIN_FRAGMENT_LENGTH = 6
"""`Redactor.learning_from` also redacts pieces of a found secret at least this long."""
_FRAGMENT_SPLIT = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class SecretMatch:
    """One secret found in a text: its kind and where it is."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Redactor:
    """Replaces secrets in text: the default patterns, extra ones, and literal values."""

    patterns: tuple[tuple[str, re.Pattern[str]], ...] = DEFAULT_PATTERNS
    literals: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, *, extra: Iterable[str] = ()
    ) -> Redactor:
        """A redactor that also knows the values of secret-named environment variables."""
        source = os.environ if environ is None else environ
        values = {v for k, v in source.items() if SECRET_ENV_NAME.search(k)}
        values.update(extra)
        return cls(literals=frozenset(v for v in values if len(v) >= MIN_LITERAL_LENGTH))

    def with_patterns(self, *patterns: tuple[str, str | re.Pattern[str]]) -> Redactor:
        """A copy with extra (kind, pattern) pairs, tried after the built-in ones."""
        compiled = tuple((k, re.compile(p) if isinstance(p, str) else p) for k, p in patterns)
        return Redactor(self.patterns + compiled, self.literals)

    def find(self, text: str) -> list[SecretMatch]:
        """Every secret in `text`, in order. Where matches overlap, their union is one secret
        (so no part of either is left), of the kind listed first (literals before patterns)."""
        literals = sorted(self.literals, key=lambda value: (-len(value), value))
        matchers = [("secret", re.compile(re.escape(value))) for value in literals]
        spans: list[tuple[int, int, int, str]] = []
        for rank, (kind, pattern) in enumerate([*matchers, *self.patterns]):
            secret_group = "secret" in pattern.groupindex
            for match in pattern.finditer(text):
                start, end = match.span("secret") if secret_group else match.span()
                if start < end:
                    spans.append((start, end, rank, kind))
        merged: list[tuple[int, int, int, str]] = []
        for start, end, rank, kind in sorted(spans):
            if merged and start < merged[-1][1]:
                first_start, first_end, first_rank, first_kind = merged[-1]
                if rank < first_rank:
                    first_rank, first_kind = rank, kind
                merged[-1] = (first_start, max(first_end, end), first_rank, first_kind)
            else:
                merged.append((start, end, rank, kind))
        return [SecretMatch(kind, start, end) for start, end, _, kind in merged]

    def learning_from(self, texts: Iterable[str]) -> Redactor:
        """A copy that also knows, as literals, every secret found in `texts` and its pieces
        of `MIN_FRAGMENT_LENGTH` or more letters and digits: text derived from them (a summary
        that quotes a secret cut short, or a piece of it) is then redacted too."""
        found: set[str] = set()
        for text in texts:
            for match in self.find(text):
                secret = text[match.start : match.end]
                found.add(secret)
                found.update(
                    piece
                    for piece in _FRAGMENT_SPLIT.split(secret)
                    if len(piece) >= MIN_FRAGMENT_LENGTH
                )
        return Redactor(self.patterns, self.literals | frozenset(found))

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED:<kind>]`."""
        parts: list[str] = []
        position = 0
        for match in self.find(text):
            parts.append(text[position : match.start])
            parts.append(REPLACEMENT.format(kind=match.kind))
            position = match.end
        parts.append(text[position:])
        return "".join(parts)

    def redact_data(self, value: Any) -> Any:
        """A copy of JSON-like data with every string (keys too) redacted; no recursion."""
        return _map_strings(value, self.redact)


DEFAULT_REDACTOR = Redactor()
"""The built-in patterns, no literals."""


def redact(text: str, redactor: Redactor | None = None) -> str:
    """Replace secret-looking strings in `text` (the built-in patterns by default)."""
    return (redactor or DEFAULT_REDACTOR).redact(text)


def find_secrets(text: str, redactor: Redactor | None = None) -> list[SecretMatch]:
    """The secrets `redact` would replace."""
    return (redactor or DEFAULT_REDACTOR).find(text)


def redact_data(value: Any, redactor: Redactor | None = None) -> Any:
    """A copy of JSON-like data (dicts, lists, strings) with every string redacted."""
    return (redactor or DEFAULT_REDACTOR).redact_data(value)


def redactor_for(option: bool | Redactor | None) -> Redactor | None:
    """The redactor a `redact_secrets=` option asks for (True: patterns + environment keys)."""
    if isinstance(option, Redactor):
        return option
    return Redactor.from_environment() if option else None


def redact_compaction(result: CompactionResult, redactor: Redactor) -> None:
    """Redact, in place, what a compaction is about to append: the summary message, the
    re-injected attachments, the hook context and the boundary's metadata (its receipt names
    the commands and files of the results taken out)."""
    result.summary_text = redactor.redact(result.summary_text)
    for entry in [*result.summary_messages, *result.attachments, *result.hook_results]:
        for key in ("message", "attachment"):
            if key in entry.data:
                entry.data[key] = redactor.redact_data(entry.data[key])
    metadata = result.boundary.data.get("compactMetadata")
    if isinstance(metadata, dict):
        result.boundary.data["compactMetadata"] = redactor.redact_data(metadata)


def redacting_sink(sink: EventSink | None, redactor: Redactor) -> EventSink | None:
    """A sink that passes on each event with its text fields redacted (a failed compaction's
    message, a command in a receipt's files, ...)."""
    if sink is None:
        return None

    def send(event: Event) -> None:
        changes = {}
        for item in dataclasses.fields(event):
            value = getattr(event, item.name)
            if isinstance(value, (str, list, dict, tuple)):
                redacted = (
                    tuple(redactor.redact_data(list(value)))
                    if isinstance(value, tuple)
                    else redactor.redact_data(value)
                )
                if redacted != value:
                    changes[item.name] = redacted
        sink(dataclasses.replace(event, **changes) if changes else event)

    return send


def private_diff_writer(redactor: Redactor | None = None) -> Callable[[Path, str], None]:
    """A cache-break diff writer: folder 0700, file 0600 written atomically, text redacted
    when a redactor is given."""

    def write(path: Path, text: str) -> None:
        body = redactor.redact(text) if redactor is not None else text
        atomic_write_chunks(path, [body.encode("utf-8")])

    return write


def strings_in(value: Any) -> Iterator[str]:
    """Every string in nested dicts and lists (keys too), without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str):
                    yield key
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)


def _map_strings(value: Any, function: Callable[[str], str]) -> Any:
    """Apply `function` to every string in nested dicts and lists, iteratively."""
    if isinstance(value, str):
        return function(value)
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list)):
                child: Any = {} if isinstance(item, dict) else []
                stack.append((item, child))
            elif isinstance(item, str):
                child = function(item)
            else:
                child = item
            if isinstance(target, dict):
                target[function(key) if isinstance(key, str) else key] = child
            else:
                target.append(child)
    return root


_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# libpq's keyword form: `password = value`, the value quoted ('...', backslash escapes; an
# unterminated quote runs to the end) or up to the next unescaped space.
_KEYWORD_PASSWORD = re.compile(
    r"(?i)(?<!\S)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|\S)*)", re.S
)
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)([^&#]*)")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_MASK = "***"
MIN_SHOWN_SECRET = 4
"""`redact_address_secrets` replaces a known password shorter than this only where the text
quotes it whole (replaced everywhere, "on" would garble "connection")."""


_HOST = r"(?:\[[0-9A-Fa-f:.%]*\]|[^:@/?#,\[\]]*)(?::\d*)?"
_QUERY_AFTER_AT = re.compile(r"[^/?]*[&=]")
_HOST_LIST = re.compile(f"{_HOST}(?:,{_HOST})*")
"""A URL's hosts with their ports (`h1:5432,h2`, `[::1]:5432`): an authority of nothing else
holds no password, whatever `@` its path or query has."""


def _credentials_end(rest: str) -> int:
    """Where a URL's `user:password` ends (-1 without one): its first `@`, or a later one
    before the host's end (libpq stops at the first, so a password with an `@`, `/` or `?`
    in it would otherwise be shown in part). An `@` in the path or query is not one: when
    what comes before the first `/` or `#` (not `?`: u:?pw@h) is only hosts, there is none."""
    first = rest.find("@")
    if first < 0:
        return -1
    authority = re.split(r"[/#]", rest, maxsplit=1)[0]
    if len(authority) < first and _HOST_LIST.fullmatch(authority):
        return -1
    if "?" in rest[:first] and _QUERY_AFTER_AT.match(rest, first + 1):
        return -1  # h?user=a@srv&session=S: no host follows, the @ is a query value's
    host_end = len(rest)
    for stop in "/?":
        found = rest.find(stop, first + 1)
        if found >= 0:
            host_end = min(host_end, found)
    return max(first, rest.rfind("@", first + 1, host_end))


def redact_url(url: str) -> str:
    """A connection address with every password replaced by `***`: a URL's
    `user:PASSWORD@` and `?password=` parameter, a libpq keyword string's `password=`."""
    scheme = _URL_SCHEME.match(url)
    if scheme is None:  # libpq's "host=... password=..." form (or not an address at all)
        return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + _MASK, url)
    head, rest = url[: scheme.end()], url[scheme.end() :]
    end = _credentials_end(rest)
    if end >= 0 and ":" in rest[:end]:
        user = rest[:end].partition(":")[0]
        rest = f"{user}:{_MASK}{rest[end:]}"
    return head + _QUERY_PASSWORD.sub(lambda m: m.group(1) + _MASK, rest)


def address_passwords(address: str) -> list[str]:
    """Every password `address` (a URL or a libpq keyword string) holds, as written and as
    libpq reads it (percent-decoded, unquoted), longest first."""
    found: set[str] = set()
    scheme = _URL_SCHEME.match(address)
    if scheme is None:
        for match in _KEYWORD_PASSWORD.finditer(address):
            value = match.group(2)
            found.add(value)
            if value.startswith("'"):
                value = value[1:-1] if len(value) > 1 and value.endswith("'") else value[1:]
            found.add(re.sub(r"\\(.)", r"\1", value, flags=re.S))
    else:
        rest = address[scheme.end() :]
        end = _credentials_end(rest)
        if end >= 0 and ":" in rest[:end]:
            found.add(rest[:end].partition(":")[2])
        found.update(match.group(2) for match in _QUERY_PASSWORD.finditer(rest))
        found.update([unquote(value) for value in found])
    return sorted((value for value in found if value), key=lambda value: (-len(value), value))


def redact_address_secrets(text: str, address: str) -> str:
    """`text` (a connection error's reason, which libpq may write with a value of the
    address in quotes) with every password of `address` replaced by `***`, and every quoted
    token holding a piece of one: libpq quotes what it could not parse, cut where it
    stopped ('invalid percent-encoded token: "hunter%2"', a host 'cret@db' out of se@cret)."""
    passwords = address_passwords(address)
    if not passwords:
        return text
    for password in passwords:
        if len(password) >= MIN_SHOWN_SECRET:
            text = text.replace(password, _MASK)
    pieces = {
        piece
        for password in passwords
        for piece in [password, *re.split(r"[^A-Za-z0-9]+", password)]
        if len(piece) >= MIN_SHOWN_SECRET or piece == password
    }

    def hide(match: re.Match[str]) -> str:
        quoted = match.group(0)
        token = quoted[1:-1]
        held = any(piece in token for piece in pieces) or (
            len(token) >= MIN_SHOWN_SECRET and any(token in password for password in passwords)
        )
        return quoted[0] + _MASK + quoted[-1] if held else quoted

    return _QUOTED.sub(hide, text)


__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_REDACTOR",
    "Redactor",
    "SecretMatch",
    "address_passwords",
    "find_secrets",
    "private_diff_writer",
    "redact",
    "redact_address_secrets",
    "redact_compaction",
    "redact_data",
    "redact_url",
    "redacting_sink",
    "redactor_for",
    "strings_in",
]
