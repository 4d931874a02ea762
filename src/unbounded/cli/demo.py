"""A built-in demo session: a long, tool-heavy Claude Code session the project writes itself.

`unbounded replay` falls back to it when no Claude Code session is on the machine, so the main
command works with no key, no network and no data of anyone else's. It is deterministic (a
seeded generator, fixed timestamps, derived uuids) and written in Claude Code 2.1's format:
one assistant line per content block sharing the message id and usage, tool results between
the lines of a response with parallel tool calls, records chained by parentUuid.

The story: a developer and an agent spend a working day on `inventory-service`, a Python web
service. Fifteen requests and follow-ups (an endpoint with pagination, CSV export, Decimal
prices, async repositories, a cache, a migration, an audit log, metrics, rate limiting…),
each worked through in about twenty API calls: todo lists, searches, file reads (sometimes
several in parallel), edits and new files, test runs that fail with real-looking tracebacks
and are fixed, a sub-agent research task now and then, and a summary at the end. About 300
calls from 09:00 to 16:30 UTC, with short pauses between requests and a lunch break of more
than an hour (the prompt cache expires; a time-based microcompaction fires on replay).

The recorded usage grows as Claude Code's would: a 18,000-token system prompt and tools,
messages counted at about 1.2 tokens per estimated token, everything read from the 5-minute
cache when the previous call is recent and written again after a pause. Like Claude Code, the
recording compacts itself when its context reaches the 200K window's auto-compact threshold
(167,000 tokens): a compact boundary and a summary written by "the model" (a short
template that keeps some facts and loses others, as model summaries do). A replay ignores
those and decides for itself.
"""

from __future__ import annotations

import random
import uuid as uuid_module
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.tokens.estimate import content_tokens

DEMO_SOURCE = "demo session (built in)"
"""How reports name the demo session."""
DEMO_MODEL = "claude-sonnet-4-5-20250929"
DEMO_SEED = 20250602
DEMO_START = datetime(2025, 6, 2, 9, 0, 0, tzinfo=timezone.utc)
CWD = "/home/dev/inventory-service"
SESSION_ID = "3f2b9c1e-7a41-4d2e-9c55-0d1e2f3a4b5c"
VERSION = "2.1.39"
SYSTEM_PROMPT_TOKENS = 18_000
"""Recorded size of the system prompt and tools (what a replay infers back)."""
TOKEN_DENSITY = 1.2
"""Recorded tokens per estimated (characters / 4) token."""
RECORDED_AUTOCOMPACT = 167_000
"""Where the recording compacts (200K window, 64K output model)."""
CACHE_TTL_SECONDS = 300

_WORDS: tuple[str, ...] = (
    "item",
    "sku",
    "supplier",
    "warehouse",
    "stock",
    "level",
    "reorder",
    "threshold",
    "quantity",
    "price",
    "order",
    "invoice",
    "report",
    "page",
    "cursor",
    "filter",
    "export",
    "audit",
    "event",
    "metric",
    "limit",
    "window",
    "token",
    "session",
    "cache",
    "entry",
    "record",
    "batch",
    "result",
    "query",
    "repository",
    "service",
    "handler",
    "schema",
)
_VERBS = (
    "load",
    "save",
    "build",
    "parse",
    "apply",
    "check",
    "compute",
    "fetch",
    "list",
    "update",
    "merge",
    "render",
    "validate",
    "normalize",
    "resolve",
    "collect",
)


@dataclass(frozen=True, slots=True)
class _Task:
    """One user request and how the agent works through it."""

    prompt: str
    read: tuple[str, ...]
    edit: tuple[str, ...]
    create: tuple[str, ...]
    test: str
    failures: int
    research: str | None = None
    pause_minutes: float = 4.0
    """Minutes the developer takes before sending this request."""


_TASKS: tuple[_Task, ...] = (
    _Task(
        "Add a GET /reports/low-stock endpoint that lists every item whose stock is below its "
        "reorder level, with cursor pagination (limit default 50, max 500), and cover it with "
        "tests. Follow the style of the existing reports module.",
        (
            "app/main.py",
            "app/reports/routes.py",
            "app/reports/service.py",
            "app/models.py",
            "app/db.py",
            "tests/conftest.py",
        ),
        ("app/reports/routes.py", "app/reports/service.py", "app/models.py"),
        ("app/reports/pagination.py", "tests/test_low_stock.py"),
        "tests/test_low_stock.py",
        2,
        "How do the other report endpoints paginate, and is there a shared cursor helper?",
        0.0,
    ),
    _Task(
        "CI is failing on test_pagination_cursor_roundtrip with a KeyError on 'next'. Can you "
        "look? It passes locally for me.",
        ("tests/test_low_stock.py", "app/reports/pagination.py", ".github/workflows/ci.yml"),
        ("app/reports/pagination.py",),
        (),
        "tests/test_low_stock.py",
        1,
        None,
        6.0,
    ),
    _Task(
        "Also add CSV export to the low-stock report: ?format=csv should stream a CSV with "
        "sku, name, stock, reorder_level and supplier columns.",
        ("app/reports/routes.py", "app/reports/service.py", "app/suppliers/service.py"),
        ("app/reports/routes.py", "app/reports/service.py"),
        ("app/reports/csv_export.py", "tests/test_csv_export.py"),
        "tests/test_csv_export.py",
        2,
        None,
        3.0,
    ),
    _Task(
        "Prices are floats everywhere and we get rounding errors in invoices. Switch prices "
        "to Decimal with 2 places end to end (models, schemas, serialization), without "
        "breaking the API contract.",
        (
            "app/models.py",
            "app/schemas.py",
            "app/invoices/service.py",
            "app/invoices/totals.py",
            "app/serialization.py",
            "tests/test_invoices.py",
        ),
        (
            "app/models.py",
            "app/schemas.py",
            "app/invoices/totals.py",
            "app/serialization.py",
            "app/invoices/service.py",
        ),
        ("tests/test_decimal_prices.py",),
        "tests/test_invoices.py",
        3,
        "Find every place that does arithmetic on price or total fields.",
        5.0,
    ),
    _Task(
        "Refactor the repository layer to async SQLAlchemy 2.0 sessions. Keep the public "
        "function names so the routes do not change.",
        (
            "app/db.py",
            "app/repositories/items.py",
            "app/repositories/suppliers.py",
            "app/repositories/orders.py",
            "tests/conftest.py",
        ),
        (
            "app/db.py",
            "app/repositories/items.py",
            "app/repositories/suppliers.py",
            "app/repositories/orders.py",
            "tests/conftest.py",
        ),
        ("app/repositories/base.py",),
        "tests/test_repositories.py",
        3,
        "Which call sites use the repositories synchronously?",
        7.0,
    ),
    _Task(
        "The supplier lookup is slow. Add an in-process cache with a 5 minute TTL for "
        "get_supplier and invalidate it when a supplier is updated.",
        ("app/suppliers/service.py", "app/repositories/suppliers.py", "app/settings.py"),
        ("app/suppliers/service.py", "app/settings.py"),
        ("app/cache.py", "tests/test_supplier_cache.py"),
        "tests/test_supplier_cache.py",
        2,
        None,
        3.0,
    ),
    _Task(
        "Write an Alembic migration that adds reorder_level (integer, not null, default 0) "
        "and a partial index for low-stock queries.",
        ("migrations/env.py", "migrations/versions/0007_suppliers.py", "app/models.py"),
        ("app/models.py",),
        ("migrations/versions/0008_reorder_level.py",),
        "tests/test_migrations.py",
        1,
        None,
        62.0,
    ),
    _Task(
        "Add an audit log: every stock change (orders, manual adjustments, returns) writes an "
        "audit_event row with who, what, before and after.",
        (
            "app/orders/service.py",
            "app/stock/adjustments.py",
            "app/returns/service.py",
            "app/models.py",
            "app/auth.py",
        ),
        (
            "app/orders/service.py",
            "app/stock/adjustments.py",
            "app/returns/service.py",
            "app/models.py",
        ),
        ("app/audit.py", "tests/test_audit.py"),
        "tests/test_audit.py",
        2,
        "How is the current user passed to services today?",
        4.0,
    ),
    _Task(
        "Expose Prometheus metrics: request latency histogram per route, low-stock item gauge, "
        "and cache hit ratio.",
        ("app/main.py", "app/cache.py", "app/reports/service.py"),
        ("app/main.py", "app/cache.py", "app/reports/service.py"),
        ("app/metrics.py", "tests/test_metrics.py"),
        "tests/test_metrics.py",
        1,
        None,
        5.0,
    ),
    _Task(
        "Rate limit the public API: 100 requests per minute per API key, 429 with Retry-After "
        "when exceeded. Internal callers are exempt.",
        ("app/main.py", "app/auth.py", "app/settings.py"),
        ("app/main.py", "app/settings.py"),
        ("app/rate_limit.py", "tests/test_rate_limit.py"),
        "tests/test_rate_limit.py",
        2,
        None,
        6.0,
    ),
    _Task(
        "test_rate_limit_window_reset is flaky, it failed twice today. Make it deterministic.",
        ("tests/test_rate_limit.py", "app/rate_limit.py"),
        ("tests/test_rate_limit.py", "app/rate_limit.py"),
        (),
        "tests/test_rate_limit.py",
        1,
        None,
        4.0,
    ),
    _Task(
        "Add a bulk stock import endpoint: POST /stock/import takes a CSV upload, validates "
        "every row, and applies the valid rows in one transaction with a per-row error report.",
        (
            "app/stock/routes.py",
            "app/stock/adjustments.py",
            "app/reports/csv_export.py",
            "app/schemas.py",
        ),
        ("app/stock/routes.py", "app/stock/adjustments.py", "app/schemas.py"),
        ("app/stock/importer.py", "tests/test_stock_import.py"),
        "tests/test_stock_import.py",
        3,
        "What limits do we have on upload sizes and request bodies?",
        3.0,
    ),
    _Task(
        "Orders placed while an import runs can oversell. Add row-level locking around stock "
        "decrements and a test that runs two orders concurrently.",
        (
            "app/orders/service.py",
            "app/stock/adjustments.py",
            "app/repositories/items.py",
            "app/db.py",
        ),
        ("app/orders/service.py", "app/stock/adjustments.py", "app/repositories/items.py"),
        ("tests/test_concurrent_orders.py",),
        "tests/test_concurrent_orders.py",
        2,
        "Where is stock decremented, and inside which transactions?",
        8.0,
    ),
    _Task(
        "Add a nightly job that emails suppliers a reorder suggestion for their low-stock "
        "items, using the low-stock report service. Dry-run mode by default.",
        (
            "app/reports/service.py",
            "app/suppliers/service.py",
            "app/settings.py",
            "app/jobs/__init__.py",
        ),
        ("app/settings.py", "app/jobs/__init__.py"),
        ("app/jobs/reorder_mail.py", "tests/test_reorder_mail.py"),
        "tests/test_reorder_mail.py",
        2,
        "How are scheduled jobs registered and configured today?",
        5.0,
    ),
    _Task(
        "The low-stock report is slow on the big tenant (2M items). Profile it and make it "
        "fast; the partial index should help.",
        (
            "app/reports/service.py",
            "app/repositories/items.py",
            "migrations/versions/0008_reorder_level.py",
        ),
        ("app/reports/service.py", "app/repositories/items.py"),
        ("tests/test_low_stock_perf.py",),
        "tests/test_low_stock_perf.py",
        1,
        "Which queries does the report run and what does EXPLAIN say about them?",
        6.0,
    ),
    _Task(
        "Update the README and the OpenAPI descriptions for everything we added today.",
        ("README.md", "app/reports/routes.py", "app/stock/routes.py", "app/main.py"),
        ("README.md", "app/reports/routes.py", "app/stock/routes.py"),
        (),
        "tests/test_openapi.py",
        1,
        None,
        5.0,
    ),
    _Task(
        "Run the whole test suite and mypy, and fix whatever is red.",
        ("pyproject.toml", "app/audit.py", "app/metrics.py"),
        ("app/audit.py", "app/metrics.py", "app/stock/importer.py"),
        (),
        "tests",
        3,
        None,
        4.0,
    ),
    _Task(
        "Last thing: write a CHANGELOG entry for today's work and a short summary I can paste "
        "into the pull request.",
        ("CHANGELOG.md",),
        ("CHANGELOG.md",),
        (),
        "tests",
        0,
        None,
        3.0,
    ),
)


_PROJECT_FILES: tuple[str, ...] = tuple(
    sorted({f for t in _TASKS for f in (*t.read, *t.edit, *t.create) if f.endswith(".py")})
)

# -- text generators -------------------------------------------------------------------------


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_WORDS)}"


def _python_source(rng: random.Random, module: str, lines: int) -> list[str]:
    """Plausible Python source of about `lines` lines."""
    out = [
        f'"""{module}: {" ".join(rng.sample(_WORDS, 5))}."""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from decimal import Decimal",
        "",
    ]
    while len(out) < lines:
        if rng.random() < 0.3:
            cls = "".join(w.capitalize() for w in rng.sample(_WORDS, 2))
            out += [
                "",
                "@dataclass(frozen=True)",
                f"class {cls}:",
                f'    """A {rng.choice(_WORDS)} {rng.choice(_WORDS)}."""',
                "",
            ]
            for _ in range(rng.randint(2, 6)):
                out.append(
                    f"    {rng.choice(_WORDS)}_{rng.choice(_WORDS)}: "
                    f"{rng.choice(['int', 'str', 'Decimal', 'bool', 'list[str]'])}"
                )
        else:
            fn = _name(rng)
            args = ", ".join(
                f"{w}: {rng.choice(['int', 'str', 'Decimal'])}"
                for w in rng.sample(_WORDS, rng.randint(1, 3))
            )
            out += [
                "",
                "",
                f"def {fn}({args}) -> {rng.choice(['int', 'str', 'dict[str, int]'])}:",
                f'    """{rng.choice(_VERBS).capitalize()} the {rng.choice(_WORDS)} '
                f'for a {rng.choice(_WORDS)}."""',
            ]
            for _ in range(rng.randint(3, 12)):
                a, b = rng.sample(_WORDS, 2)
                out.append(
                    rng.choice(
                        [
                            f"    {a} = {_name(rng)}({b})",
                            f'    if {a} is None:\n        raise ValueError("missing {a} for {b}")',
                            f"    {a}_total += {b}.quantity * {b}.price",
                            f'    result["{a}"] = {b}',
                            f"    for {a} in {b}s:\n        {_name(rng)}({a})",
                        ]
                    )
                )
            out.append(f"    return {rng.choice(_WORDS)}")
    return "\n".join(out).split("\n")[:lines]


def _text_file(rng: random.Random, path: str, lines: int) -> list[str]:
    if path.endswith(".py"):
        return _python_source(rng, path, lines)
    if path.endswith((".md", ".toml", ".yml")):
        out = [f"# {path}"]
        while len(out) < lines:
            out.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14))))
        return out
    return [" ".join(rng.sample(_WORDS, 6)) for _ in range(lines)]


def _numbered(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{number:>6}\t{line}" for number, line in enumerate(lines, start))


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS + _VERBS) for _ in range(words)).capitalize() + "."


def _thinking(rng: random.Random, topic: str, sentences: int) -> str:
    parts = [f"I need to {topic}."]
    parts += [_sentence(rng, rng.randint(8, 20)) for _ in range(sentences)]
    return " ".join(parts)


def _pytest_failure(rng: random.Random, test_path: str, source_path: str) -> str:
    test = f"test_{_name(rng)}"
    frames = []
    for _ in range(rng.randint(2, 4)):
        fn = _name(rng)
        frames.append(
            f"{source_path}:{rng.randint(20, 300)}: in {fn}\n"
            f"    {rng.choice(_WORDS)} = {_name(rng)}({rng.choice(_WORDS)})"
        )
    error = rng.choice(
        [
            f"KeyError: '{rng.choice(_WORDS)}'",
            f"AssertionError: assert Decimal('{rng.randint(1, 99)}.10') == "
            f"Decimal('{rng.randint(1, 99)}.1')",
            f"TypeError: {_name(rng)}() missing 1 required positional argument: "
            f"'{rng.choice(_WORDS)}'",
            f"AttributeError: 'NoneType' object has no attribute '{rng.choice(_WORDS)}'",
            "sqlalchemy.exc.MissingGreenlet: greenlet_spawn has not been called",
        ]
    )
    passed = rng.randint(20, 140)
    return (
        f"Exit code 1\n============================= test session starts "
        f"==============================\nplatform linux -- Python 3.12.3, pytest-8.3.2\n"
        f"collected {passed + 1} items\n\n{test_path} {'.' * rng.randint(5, 30)}F\n\n"
        f"=================================== FAILURES ===================================\n"
        f"_____________________ {test} _____________________\n\n"
        + "\n\n".join(frames)
        + f"\nE   {error}\n\n=========================== short test summary info "
        f"============================\nFAILED {test_path}::{test} - {error}\n"
        f"========================= 1 failed, {passed} passed in {rng.uniform(2, 40):.2f}s "
        f"========================="
    )


def _pytest_pass(rng: random.Random, test_path: str) -> str:
    count = rng.randint(30, 260)
    dots = "".join("." for _ in range(min(count, 80)))
    return (
        f"============================= test session starts ==============================\n"
        f"platform linux -- Python 3.12.3, pytest-8.3.2\ncollected {count} items\n\n"
        f"{test_path} {dots}\n\n============================= {count} passed in "
        f"{rng.uniform(2, 60):.2f}s =============================="
    )


# -- the recorder ------------------------------------------------------------------------------


@dataclass
class _Tool:
    """A tool call and its result."""

    name: str
    input: dict[str, Any]
    result: str
    is_error: bool = False
    seconds: float = 2.0


@dataclass
class _Recorder:
    """Writes records as Claude Code 2.1 would, with the usage its context implies."""

    rng: random.Random
    now: datetime = DEMO_START
    records: list[dict[str, Any]] = field(default_factory=list)
    parent: str | None = None
    messages_tokens: float = 0.0
    """Estimated tokens of the messages since the recording's last compaction."""
    last_call: datetime | None = None
    previous_prompt: int = 0
    calls: int = 0
    tool_ids: int = 0
    prompts: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def uuid(self) -> str:
        """A uuid from the generator (deterministic)."""
        return str(uuid_module.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self, seconds: float) -> None:
        """Let time pass."""
        self.now += timedelta(seconds=seconds)

    def _stamp(self) -> str:
        return self.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _base(self, kind: str) -> dict[str, Any]:
        record: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": SESSION_ID,
            "version": VERSION,
            "gitBranch": "feature/low-stock-report",
            "type": kind,
        }
        return record

    def _append(self, record: dict[str, Any]) -> None:
        record["uuid"] = self.uuid()
        record["timestamp"] = self._stamp()
        self.records.append(record)
        self.parent = record["uuid"]

    def user(self, content: str | list[dict[str, Any]]) -> None:
        """A user record (a prompt or tool results)."""
        record = self._base("user")
        record["message"] = {"role": "user", "content": content}
        if isinstance(content, str):
            record["thinkingMetadata"] = {"maxThinkingTokens": 31999}
            record["todos"] = []
            record["permissionMode"] = "default"
            self.prompts.append(content)
        self._append(record)
        self.messages_tokens += content_tokens(content)

    def _usage(self, output_tokens: int) -> dict[str, Any]:
        prompt = SYSTEM_PROMPT_TOKENS + round(self.messages_tokens * TOKEN_DENSITY)
        warm = (
            self.last_call is not None
            and (self.now - self.last_call).total_seconds() <= CACHE_TTL_SECONDS
        )
        read = min(self.previous_prompt, prompt) if warm else SYSTEM_PROMPT_TOKENS
        fresh = self.rng.randint(1, 9)
        creation = max(0, prompt - read - fresh)
        self.previous_prompt = prompt
        self.last_call = self.now
        return {
            "input_tokens": fresh,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": creation,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }

    def maybe_compact(self) -> None:
        """Compact the recording as Claude Code would at its auto-compact threshold."""
        prompt = SYSTEM_PROMPT_TOKENS + round(self.messages_tokens * TOKEN_DENSITY)
        if prompt < RECORDED_AUTOCOMPACT:
            return
        self.tick(45)
        boundary = self._base("system")
        boundary.update(
            {
                "parentUuid": None,
                "logicalParentUuid": self.parent,
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": prompt},
            }
        )
        self._append(boundary)
        summary = self._summary()
        record = self._base("user")
        record["message"] = {"role": "user", "content": summary}
        record["isVisibleInTranscriptOnly"] = True
        record["isCompactSummary"] = True
        self._append(record)
        self.messages_tokens = content_tokens(summary)
        self.previous_prompt = SYSTEM_PROMPT_TOKENS
        self.tick(3)

    def _summary(self) -> str:
        first = self.prompts[0] if self.prompts else ""
        latest = self.prompts[-1] if self.prompts else ""
        files = ", ".join(dict.fromkeys(reversed(self.modified)))
        recent = list(dict.fromkeys(reversed(self.modified)))[:6]
        commands = "; ".join(self.commands[-3:])
        return (
            "This session is being continued from a previous conversation that ran out of "
            "context. The conversation is summarized below:\n"
            "Analysis:\nThe user is extending inventory-service across several requests.\n\n"
            "Summary:\n1. Primary Request and Intent:\n   "
            f"{first[:160]}\n   Latest: {latest[:200]}\n"
            "2. Key Technical Concepts:\n   - FastAPI routes, SQLAlchemy, pytest, Decimal prices\n"
            f"3. Files and Code Sections:\n   - {', '.join(recent)}\n"
            "4. Errors and fixes:\n   - Test failures were fixed as they came up.\n"
            f"5. Problem Solving:\n   Recent commands: {commands}\n"
            f"6. All user messages:\n   - {latest[:120]}\n"
            "7. Pending Tasks:\n   - Continue the latest request.\n"
            f"8. Current Work:\n   Working on {files[:200]}\n"
            "9. Optional Next Step:\n   Continue with the latest request.\n\n"
            "Please continue the conversation from where we left it off without asking the "
            "user any further questions. Continue with the last task that you were asked to "
            "work on."
        )

    def response(
        self,
        *,
        thinking: str | None,
        text: str | None,
        tools: list[_Tool],
        parallel: bool = False,
    ) -> None:
        """One API call: its lines (thinking, text, tool calls), then the tool results."""
        self.maybe_compact()
        self.calls += 1
        message_id = f"msg_01demo{self.calls:05d}{self.rng.getrandbits(40):010x}"
        request_id = f"req_01demo{self.calls:05d}"
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": thinking,
                    "signature": f"sig{self.rng.getrandbits(64):016x}",
                }
            )
        if text:
            blocks.append({"type": "text", "text": text})
        uses: list[dict[str, Any]] = []
        for tool in tools:
            self.tool_ids += 1
            uses.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_01demo{self.tool_ids:06d}",
                    "name": tool.name,
                    "input": tool.input,
                }
            )
        output = round(content_tokens([*blocks, *uses]) * TOKEN_DENSITY) + self.rng.randint(5, 40)
        self.tick(self.rng.uniform(6, 40))
        usage = self._usage(output)
        stop = "tool_use" if tools else "end_turn"

        def line(block: dict[str, Any], last: bool) -> None:
            record = self._base("assistant")
            record["message"] = {
                "model": DEMO_MODEL,
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": stop if last else None,
                "stop_sequence": None,
                "usage": usage,
            }
            record["requestId"] = request_id
            self._append(record)
            self.messages_tokens += content_tokens([block])
            self.tick(self.rng.uniform(0.2, 1.5))

        for number, block in enumerate(blocks):
            line(block, last=not uses and number == len(blocks) - 1)
        results = [self._result(use, tool) for use, tool in zip(uses, tools, strict=True)]
        if parallel:
            for number, (use, result) in enumerate(zip(uses, results, strict=True)):
                line(use, last=number == len(uses) - 1)
                self.tick(tools[number].seconds)
                self.user([result])
        else:
            for number, use in enumerate(uses):
                line(use, last=number == len(uses) - 1)
            if results:
                self.tick(sum(tool.seconds for tool in tools))
                self.user(results)

    def _result(self, use: dict[str, Any], tool: _Tool) -> dict[str, Any]:
        block: dict[str, Any] = {
            "tool_use_id": use["id"],
            "type": "tool_result",
            "content": tool.result,
        }
        if tool.is_error:
            block["is_error"] = True
        if tool.name in ("Edit", "Write"):
            self.modified.append(str(tool.input.get("file_path", "")))
        if tool.name == "Bash":
            self.commands.append(str(tool.input.get("command", ""))[:60])
        return block


# -- the story -------------------------------------------------------------------------------


class _Story:
    """Works through the tasks, keeping the files it has written."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rec = _Recorder(rng)
        self.files: dict[str, list[str]] = {}

    def path(self, relative: str) -> str:
        return f"{CWD}/{relative}"

    def file(self, relative: str) -> list[str]:
        if relative not in self.files:
            size = self.rng.randint(120, 420)
            self.files[relative] = _text_file(self.rng, relative, size)
        return self.files[relative]

    def read(self, relative: str) -> _Tool:
        lines = self.file(relative)
        return _Tool(
            "Read",
            {"file_path": self.path(relative)},
            _numbered(lines),
            seconds=self.rng.uniform(0.1, 0.6),
        )

    def edit(self, relative: str) -> _Tool:
        lines = self.file(relative)
        start = self.rng.randint(0, max(0, len(lines) - 40))
        length = self.rng.randint(15, 60)
        old = lines[start : start + length]
        new = _python_source(self.rng, relative, length + self.rng.randint(10, 50))[6:]
        self.files[relative] = lines[:start] + new + lines[start + length :]
        snippet = _numbered(self.files[relative][start : start + 12], start + 1)
        result = (
            f"The file {self.path(relative)} has been updated. Here's the result of "
            f"running `cat -n` on a snippet of the edited file:\n{snippet}"
        )
        return _Tool(
            "Edit",
            {
                "file_path": self.path(relative),
                "old_string": "\n".join(old),
                "new_string": "\n".join(new),
            },
            result,
            seconds=self.rng.uniform(0.1, 0.4),
        )

    def write(self, relative: str) -> _Tool:
        lines = _text_file(self.rng, relative, self.rng.randint(140, 380))
        self.files[relative] = lines
        return _Tool(
            "Write",
            {"file_path": self.path(relative), "content": "\n".join(lines)},
            f"File created successfully at: {self.path(relative)}",
            seconds=self.rng.uniform(0.1, 0.3),
        )

    def bash(
        self, command: str, output: str, *, error: bool = False, seconds: float = 5.0
    ) -> _Tool:
        return _Tool(
            "Bash",
            {"command": command, "description": command[:40]},
            output,
            is_error=error,
            seconds=seconds,
        )

    def grep(self, pattern: str) -> _Tool:
        hits = [
            f"{self.path(rel)}:{self.rng.randint(1, 300)}: "
            f"{self.rng.choice(self.file(rel)) if rel in self.files else pattern}"
            for rel in self.rng.sample(
                sorted(self.files) or ["app/main.py"], min(len(self.files) or 1, 8)
            )
        ]
        return _Tool(
            "Grep",
            {"pattern": pattern, "path": CWD, "output_mode": "content"},
            "\n".join(hits),
            seconds=0.3,
        )

    def run(self) -> list[dict[str, Any]]:
        for number, task in enumerate(_TASKS):
            self.task(number, task)
        return self.rec.records

    def think(self, topic: str) -> str:
        return _thinking(self.rng, topic, self.rng.randint(6, 20))

    def task(self, number: int, task: _Task) -> None:
        rec, rng = self.rec, self.rng
        rec.tick(task.pause_minutes * 60 + rng.uniform(5, 50))
        rec.user(task.prompt)
        todos = [
            {
                "content": f"{verb} {target}",
                "status": "pending",
                "activeForm": f"{verb}ing {target}",
            }
            for verb, target in zip(
                ("Read", "Change", "Add", "Test"),
                (*task.read[:1], *task.edit[:1], *task.create[:1], task.test),
                strict=False,
            )
        ]
        rec.response(
            thinking=self.think("plan this request"),
            text="Let me plan this and look at the code first.",
            tools=[
                _Tool(
                    "TodoWrite",
                    {"todos": todos},
                    "Todos have been modified successfully.",
                    seconds=0.1,
                )
            ],
        )
        rec.response(
            thinking=self.think("find the relevant code"),
            text=None,
            tools=[
                self.grep(rng.choice(_WORDS)),
                _Tool(
                    "Glob",
                    {"pattern": "**/*.py"},
                    "\n".join(self.path(f) for f in _PROJECT_FILES),
                    seconds=0.2,
                ),
            ],
        )
        reads = list(task.read)
        while reads:
            size = rng.choice((1, 2, 3))
            batch, reads = reads[:size], reads[size:]
            rec.response(
                thinking=self.think("read " + ", ".join(batch)),
                text=None,
                tools=[self.read(relative) for relative in batch],
                parallel=len(batch) > 1,
            )
        if task.research:
            report = "\n".join(
                f"- {self.path(rel)}: {_sentence(rng, rng.randint(14, 40))}"
                for rel in rng.sample(sorted(self.files), min(12, len(self.files)))
            )
            rec.response(
                thinking=self.think("delegate the research"),
                text="I'll have a sub-agent survey the code base for this.",
                tools=[
                    _Tool(
                        "Task",
                        {
                            "description": "Survey the code base",
                            "prompt": task.research,
                            "subagent_type": "Explore",
                        },
                        f"Findings for: {task.research}\n{report}\n\n"
                        + "\n".join(
                            _sentence(rng, rng.randint(12, 30)) for _ in range(rng.randint(40, 90))
                        ),
                        seconds=rng.uniform(40, 120),
                    )
                ],
            )
        for relative in task.edit:
            rec.response(
                thinking=self.think(f"change {relative}"),
                text=rng.choice((None, f"Now updating {relative}.")),
                tools=[self.edit(relative)],
            )
        for relative in task.create:
            rec.response(
                thinking=self.think(f"write {relative}"), text=None, tools=[self.write(relative)]
            )
        command = f"cd {CWD} && python -m pytest {task.test} -x -q"
        source = (task.edit or task.create or task.read)[0]
        for _ in range(task.failures):
            rec.response(
                thinking=self.think("run the tests"),
                text=None,
                tools=[
                    self.bash(
                        command,
                        _pytest_failure(rng, task.test, source),
                        error=True,
                        seconds=rng.uniform(8, 70),
                    )
                ],
            )
            rec.response(
                thinking=self.think("understand the failure"),
                text=None,
                tools=[self.read(task.test if task.test.endswith(".py") else source)],
            )
            target = rng.choice(task.edit or task.create or task.read)
            rec.response(
                thinking=self.think(f"fix {target}"),
                text="The failure points at this code; fixing it.",
                tools=[self.edit(target)],
            )
        rec.response(
            thinking=self.think("run the tests again"),
            text=None,
            tools=[self.bash(command, _pytest_pass(rng, task.test), seconds=rng.uniform(8, 70))],
        )
        for relative in (task.edit or task.create)[:2]:
            rec.response(
                thinking=self.think(f"tidy up {relative}"),
                text=f"Tidying {relative} now that the tests pass.",
                tools=[self.edit(relative)],
            )
        rec.response(
            thinking=None,
            text=None,
            tools=[
                self.bash(
                    f"cd {CWD} && ruff check app tests && git diff --stat",
                    "All checks passed!\n"
                    + "\n".join(
                        f" {f} | {rng.randint(2, 90)} {'+' * rng.randint(1, 30)}"
                        for f in (*task.edit, *task.create)
                    ),
                    seconds=rng.uniform(2, 6),
                )
            ],
        )
        if number % 3 == 2:
            rec.response(
                thinking=self.think("check types"),
                text=None,
                tools=[
                    self.bash(
                        f"cd {CWD} && mypy app",
                        "Success: no issues found in 64 source files",
                        seconds=rng.uniform(5, 20),
                    )
                ],
            )
        done = [dict(item, status="completed") for item in todos]
        rec.response(
            thinking=None,
            text=None,
            tools=[
                _Tool(
                    "TodoWrite",
                    {"todos": done},
                    "Todos have been modified successfully.",
                    seconds=0.1,
                )
            ],
        )
        changed = ", ".join(f"`{f}`" for f in (*task.edit, *task.create))
        rec.response(
            thinking=None,
            text=f"Done. I changed {changed or 'nothing'} and the tests pass.\n\n"
            + "\n".join(
                f"- {_sentence(rng, rng.randint(10, 24))}" for _ in range(rng.randint(3, 7))
            ),
            tools=[],
        )


def demo_records() -> list[dict[str, Any]]:
    """The demo session's records, as Claude Code 2.1 writes them (deterministic)."""
    return _Story(random.Random(DEMO_SEED)).run()


def demo_transcript() -> Transcript:
    """The demo session as a loaded transcript (no file involved)."""
    entries = [Entry(record, line) for line, record in enumerate(demo_records(), 1)]
    return Transcript(entries=entries, format="claude-code")


def demo_jsonl() -> Iterator[bytes]:
    """The demo session's lines (JSON, newline-terminated)."""
    for record in demo_records():
        yield orjson.dumps(record) + b"\n"


def write_demo_session(path: str | Path) -> Path:
    """Write the demo session as a Claude Code .jsonl file and return its path."""
    target = Path(path)
    target.write_bytes(b"".join(demo_jsonl()))
    return target
