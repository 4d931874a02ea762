"""API keys never reach what unbounded writes: a key is planted in the environment and in the
provider, a session runs through the real SDK (turns, a retried 429, a refused key, a
compaction by the model, a cache-break diff, a hook, the CLI on the result) with every log at
DEBUG going to a file, and then every file written is searched for the key.

Also the opt-in redaction of secret-looking strings (`unbounded.redaction`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary
from typer.testing import CliRunner

import apiserver
from apiserver import (
    RecordedRequest,
    Reply,
    auth_error,
    message,
    rate_limited,
    start_server,
    tool_use_block,
)
from unbounded.cli import app, compact_command, inspect_command  # noqa: F401  (registers them)
from unbounded.events import Event, ReceiptWritten
from unbounded.hooks import HookRunner
from unbounded.policy import Policy
from unbounded.providers.base import AuthenticationError
from unbounded.providers.retry import RetryingProvider
from unbounded.redaction import (
    Redactor,
    find_secrets,
    redact,
    redact_data,
    redact_url,
    redacting_sink,
    redactor_for,
    strings_in,
)
from unbounded.session import Session, SessionConfig

anthropic = pytest.importorskip("anthropic")

KEY = "sk-ant-test-PLANTED-" + secrets.token_hex(16)
OPENAI_KEY = "sk-proj-PLANTED" + secrets.token_hex(16)
CONFIG = SessionConfig(
    model="claude-sonnet-5-5",
    system="You are a careful agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=60_000,
)
SUMMARY = nine_section_summary("keep going")


@pytest.fixture(autouse=True)
def _fast_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apiserver._Handler, "disable_nagle_algorithm", True)


def _replies(request: RecordedRequest) -> Reply:
    body = request.json if isinstance(request.json, dict) else {}
    last = body.get("messages", [{}])[-1].get("content")
    if "<summary>" in str(last):
        return message(SUMMARY, chunk_size=4096)
    turn = int(request.request_id.rsplit("_", 1)[-1])
    read = 8_000 if turn < 10 else 0  # the cache read collapses late: a cache-break diff
    return message("ok", tool_use_block("Bash", {"command": f"step {turn}"}, id=f"toolu_{turn:03d}"), usage={"input_tokens": 500, "cache_read_input_tokens": read}, chunk_size=4096)


def _files_under(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def test_a_planted_api_key_appears_in_no_file_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    log_file = tmp_path / "debug.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    events: list[Event] = []
    folder, diffs = tmp_path / "session", tmp_path / "diffs"
    try:
        with start_server() as api:
            api.anthropic.push(auth_error(), rate_limited("1"), *([_replies] * 200))
            provider = AnthropicProvider(api_key=KEY, base_url=api.anthropic_base_url, timeout=60)  # far beyond a stall: one retry is asserted
            sleeps: list[float] = []

            async def sleep(delay: float) -> None:
                sleeps.append(delay)

            retrying = RetryingProvider(provider, sleep=sleep, events=events.append)
            hook = f"{sys.executable} -c \"import sys; sys.stdin.read(); print('hook context')\""
            hooks = HookRunner({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": hook}]}]}}, session_id="s", cwd=tmp_path)
            session = Session.open(folder, CONFIG, policy=Policy(), summarizer=retrying, events=events.append, hooks=hooks, diff_dir=diffs, allowed_roots=[str(tmp_path)])
            session.add_user("Please run the steps.")

            async def drive() -> None:
                with pytest.raises(AuthenticationError) as refused:
                    await session.call(retrying, stream=True)
                logging.getLogger("test").error("the call failed: %s", refused.value)
                previous: list[str] = []
                for _ in range(10):
                    if previous:
                        session.add_tool_results([{"type": "tool_result", "tool_use_id": tool_id, "content": "done"} for tool_id in previous])
                    response = await session.call(retrying, stream=True)
                    previous = [str(block["id"]) for block in response.tool_uses]
                session.reconfigure(dataclasses.replace(session.config, system="You are a careful agent. Be brief."))
                session.add_tool_results([{"type": "tool_result", "tool_use_id": tool_id, "content": "done"} for tool_id in previous])
                await session.compact()

            asyncio.run(drive())
            sent = api.requests[0].headers
            assert KEY in (sent.get("x-api-key", "") + sent.get("authorization", ""))  # the key was in use
            assert sleeps == [1.0]
            transcript = folder / "transcript.jsonl"
            logging.getLogger("test").info("events: %r", events)
        runner = CliRunner()
        for args in (["inspect", str(transcript), "--json"], ["compact", str(transcript), "--summarizer", "extractive", "--json", "-o", str(tmp_path / "compacted.jsonl")]):
            outcome = runner.invoke(app, args)
            assert outcome.exit_code == 0, outcome.output
            (tmp_path / f"cli-{args[0]}.out").write_text(outcome.output)
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()

    assert any(path.name.startswith("cache-break-") for path in _files_under(diffs))
    assert log_file.stat().st_size > 0
    written = _files_under(tmp_path)
    assert len(written) >= 8
    for path in written:
        data = path.read_bytes()
        for planted in (KEY, OPENAI_KEY):
            assert planted.encode() not in data, f"{path} holds the API key"
            assert planted[-12:].encode() not in data, f"{path} holds part of the API key"


# -- redaction ------------------------------------------------------------------------------------------------

SAMPLES = {
    "anthropic_key": "sk-ant-api03-" + "A1b2C3d4E5" * 4,
    "openai_key": "sk-proj-" + "Zz9Yy8Xx7W" * 3,
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "slack_token": "xoxb-123456789012-abcdefghij",
    "google_api_key": "AIza" + "S" * 35,
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_kind_of_key_is_redacted(kind: str) -> None:
    text = f"before {SAMPLES[kind]} after"
    assert redact(text) == f"before [REDACTED:{kind}] after"


def test_bearer_tokens_aws_secrets_and_private_keys() -> None:
    text = (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\n"
        "-----BEGIN RSA PRIVATE KEY-----\ncut off mid-way"
    )
    assert redact(text) == (
        "Authorization: Bearer [REDACTED:bearer_token]\n"
        "aws_secret_access_key = [REDACTED:aws_secret_access_key]\n"
        "[REDACTED:private_key]\n"
        "[REDACTED:private_key]"
    )


@pytest.mark.parametrize(
    "harmless",
    ["task-list of sk-items", "the risk-ant-colony model", "AKIA is a prefix", "bearer of bad news", "ghp_short", "a normal sentence about keys and tokens"],
)
def test_ordinary_text_is_left_alone(harmless: str) -> None:
    assert redact(harmless) == harmless and find_secrets(harmless) == []


def test_environment_secrets_and_nested_data() -> None:
    redactor = Redactor.from_environment({"MY_SERVICE_TOKEN": "plain-looking-value-123", "SHORT_TOKEN": "abc", "HOME": "/root"})
    data = {"content": [{"type": "text", "text": "token plain-looking-value-123 and abc"}], SAMPLES["github_token"]: 1}
    assert redactor.redact_data(data) == {"content": [{"type": "text", "text": "token [REDACTED:secret] and abc"}], "[REDACTED:github_token]": 1}
    assert redact_data(["x", 1, None, {"k": SAMPLES["aws_access_key_id"]}]) == ["x", 1, None, {"k": "[REDACTED:aws_access_key_id]"}]
    extra = Redactor().with_patterns(("ticket", r"TICKET-\d{6}"))
    assert extra.redact("see TICKET-123456") == "see [REDACTED:ticket]"


def _session_with_a_pasted_key(tmp_path: Path, redact_secrets: bool | Redactor, monkeypatch: pytest.MonkeyPatch) -> tuple[Session, Any]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    secret_file = tmp_path / "project" / "config.env"
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    secret_file.write_text(f"GITHUB_TOKEN={SAMPLES['github_token']}\n")
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(), allowed_roots=[str(secret_file.parent)], redact_secrets=redact_secrets)
    session.add_user(f"Use the key {KEY} and the AWS id {SAMPLES['aws_access_key_id']}.")
    session.record({"content": [{"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": str(secret_file)}}], "usage": {"input_tokens": 10, "output_tokens": 2}})
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "r1", "content": "(the file)"}])
    result = asyncio.run(session.compact())
    return session, result


def test_session_redacts_what_a_compaction_writes_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session, result = _session_with_a_pasted_key(tmp_path, True, monkeypatch)
    written = [entry.data for entry in result.new_entries()]
    assert KEY not in str(written) and SAMPLES["aws_access_key_id"] not in str(written)
    assert SAMPLES["github_token"] not in str(written)  # the re-read file, redacted too
    assert "[REDACTED:" in result.summary_text
    assert "[REDACTED:github_token]" in str([a.data for a in result.attachments])
    # what the user wrote stays as it was: the transcript is append-only
    assert KEY in str(session.entries[0].data)


def test_without_the_flag_nothing_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, result = _session_with_a_pasted_key(tmp_path, False, monkeypatch)
    assert SAMPLES["aws_access_key_id"] in result.summary_text


# -- the shapes that leaked, and everything the session writes ------------------------------------

AWS_SECRET = "wJalrXUtnFEMI+K7MDENG/bPxRfiCYEXAMPLEKEY"  # 40 characters, with + and /


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw end", "token [REDACTED:jwt] end"),
        ("psql postgresql://bob:hunter2pass@db:5432/x", "psql postgresql://bob:[REDACTED:password]@db:5432/x"),
        ("mysql --password=hunter2pass -h db", "mysql --password=[REDACTED:password] -h db"),
        ("tool --password 'hunter2pass' --verbose", "tool --password '[REDACTED:password]' --verbose"),
        ("tool --passwd hunter2pass", "tool --passwd [REDACTED:password]"),
        ("DB_PASSWORD=s3cr3t! make", "DB_PASSWORD=[REDACTED:password] make"),
        ('{"password": "abc123", "user": "bob"}', '{"password": "[REDACTED:password]", "user": "bob"}'),
        ("curl -u admin:pw1234 https://x", "curl -u admin:[REDACTED:password] https://x"),
        (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "export AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]"),
        (f"aws configure set aws_secret_access_key {AWS_SECRET}", "aws configure set aws_secret_access_key [REDACTED:aws_secret_access_key]"),
        (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET[:33]}…", "export AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]…"),
        (f"AKIAIOSFODNN7EXAMPLE,{AWS_SECRET}", "[REDACTED:aws_access_key_id],[REDACTED:aws_secret_access_key]"),
        (f"id AKIAIOSFODNN7EXAMPLE secret {AWS_SECRET} done", "id [REDACTED:aws_access_key_id] secret [REDACTED:aws_secret_access_key] done"),
    ],
)
def test_the_shapes_that_used_to_leak(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "harmless",
    [
        "run --password-file ./pw.txt",  # a flag, not a value
        "tool --password --verbose",
        "the password: is",  # too short to be one
        "see https://example.com/path@2x.png",
        "sha 3f786850e387550fdab836ed7e6dc881de23001b",  # 40 characters, no key id on the line
        "eyJhbGciOiJIUzI1NiJ9 alone",
        "bypass: true",
    ],
)
def test_their_neighbours_are_left_alone(harmless: str) -> None:
    assert redact(harmless) == harmless


def test_overlapping_matches_are_redacted_as_their_union() -> None:
    # the password's value runs into the key: no part of either stays
    text = "password=hunter2AKIAIOSFODNN7EXAMPLE next"
    assert redact(text) == "password=[REDACTED:password] next"
    literal = Redactor(literals=frozenset({"EXAMPLE hunter2"}))
    assert literal.redact("x AKIAIOSFODNN7EXAMPLE hunter2 y") == "x [REDACTED:secret] y"
    matches = find_secrets("a AKIAIOSFODNN7EXAMPLE b sk-ant-" + "x" * 30)
    assert [(m.kind, m.start) for m in matches] == [("aws_access_key_id", 2), ("anthropic_key", 25)]


def test_learning_from_a_source_redacts_pieces_of_its_secrets() -> None:
    source = f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}"
    learned = Redactor().learning_from([source, "nothing here"])
    assert AWS_SECRET in learned.literals and "bPxRfiCYEXAMPLEKEY" in learned.literals
    assert "K7MDENG" in learned.literals and "wJalrXUtnFEMI" in learned.literals
    summary = "Names: wJalrXUtnFEMI, K7MDENG, bPxRfiCYEXAMPLEKEY; ran export"
    assert learned.redact(summary) == "Names: [REDACTED:secret], [REDACTED:secret], [REDACTED:secret]; ran export"
    assert Redactor().learning_from(["no secret"]) == Redactor()  # nothing learned: the same


def test_strings_in_walks_keys_and_values() -> None:
    assert sorted(strings_in({"a": ["b", {"c": 1, "d": "e"}], "f": None})) == ["a", "b", "c", "d", "e", "f"]


def _redacting_session(
    tmp_path: Path, events: list[Event], telemetry: Any = None, clock: Any = None
) -> Session:
    return Session.open(
        tmp_path / "s",
        SessionConfig(model="claude-sonnet-4-5", tools=[{"name": "Bash", "input_schema": {"type": "object"}}], context_window=200_000),
        policy=Policy(tool_result_max_tokens=500, time_based_keep_recent=1),
        redact_secrets=Redactor(),
        events=events.append,
        telemetry=telemetry,
        **({"clock": clock} if clock is not None else {}),
    )


def test_receipts_side_files_and_events_are_redacted(tmp_path: Path) -> None:
    events: list[Event] = []
    session = _redacting_session(tmp_path, events)
    command = f"aws configure set aws_secret_access_key {AWS_SECRET} && psql postgresql://u:hunter2pass@db/x"
    session.add_user("set it up")
    session.record({"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}], "usage": {"input_tokens": 10, "output_tokens": 2}})
    big = "".join(f"line {n}: token=ghp_{'a1B2c3D4e5' * 4}\n" for n in range(400))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "t1", "content": big}])
    result = asyncio.run(session.compact())
    receipt = result.boundary.compact_metadata["receipt"]
    assert receipt["toolResults"][0]["command"].startswith("aws configure set aws_secret_access_key [REDACTED:")
    assert "hunter2pass" not in str(receipt)
    written = str([entry.data for entry in result.new_entries()])
    assert AWS_SECRET not in written and "hunter2pass" not in written
    session.close()
    for path in (tmp_path / "s").rglob("*"):
        if path.is_file() and path.name != "transcript.jsonl":  # the host's own records stay as written
            data = path.read_text(errors="replace")
            assert AWS_SECRET not in data and "hunter2pass" not in data and "a1B2c3D4e5" * 4 not in data, path
    stored = (tmp_path / "s" / "transcript.jsonl").read_text()
    assert "a1B2c3D4e5" * 4 not in stored  # the shortened copy of the kept output, redacted alike
    kept = next((tmp_path / "s" / "tool-outputs").iterdir()).read_text()
    assert "[REDACTED:github_token]" in kept and kept.count("\n") == 400
    assert "hunter2pass" not in str(events) and AWS_SECRET not in str(events)


def test_a_microcompaction_receipt_is_redacted(tmp_path: Path) -> None:
    events: list[Event] = []
    now = [datetime.now(timezone.utc)]
    session = _redacting_session(tmp_path, events, clock=lambda: now[0])
    session.add_user("go")
    for turn in range(3):
        asyncio.run(session.prepare())
        use = {"type": "tool_use", "id": f"t{turn}", "name": "Bash", "input": {"command": f"mysql --password=hunter{turn}pass -e 'select {turn}'"}}
        session.record({"content": [use], "usage": {"input_tokens": 10, "output_tokens": 2}})
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": f"row {turn}\n" * 300}])
    session.micro.cleared_ids  # noqa: B018 - nothing cleared yet
    now[0] = datetime(2030, 1, 1, tzinfo=timezone.utc)  # an hour later: the time tier clears
    asyncio.run(session.prepare())
    receipts = [e for e in session.entries if e.subtype == "microcompact_receipt"]
    assert receipts, "the time tier cleared nothing"
    data = str(receipts[0].data)
    assert "hunter0pass" not in data and "--password=[REDACTED:password]" in data
    session.close()


def test_span_attributes_and_recorded_exceptions_are_redacted() -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from unbounded.telemetry import Telemetry

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(tracer_provider=provider).redacting(Redactor().redact)
    with telemetry.span("step", {"note": "Bearer abcdefghijklmnopqrstuvwxyz"}) as span:
        span.set_attributes({"more": "--password=hunter2pass"})
        span.set_attribute("list", ["--password=hunter3pass", "plain"])
    with pytest.raises(RuntimeError), telemetry.span("failing"):
        raise RuntimeError("refused key sk-ant-" + "z" * 30)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert dict(spans["step"].attributes or {}) == {"note": "Bearer [REDACTED:bearer_token]", "more": "--password=[REDACTED:password]", "list": ("--password=[REDACTED:password]", "plain")}
    (event,) = spans["failing"].events
    assert event.name == "exception" and "[REDACTED:anthropic_key]" in str(event.attributes)
    assert "zzzz" not in str(event.attributes)
    plain = Telemetry(tracer_provider=provider)
    with plain.span("plain", {"note": "--password=hunter2pass"}):
        pass
    assert dict(exporter.get_finished_spans()[-1].attributes or {})["note"] == "--password=hunter2pass"  # only when asked


# -- every rule of the redactor, each held by a test ----------------------------------------------


def test_environment_literals_from_twelve_characters_on() -> None:
    redactor = Redactor.from_environment({"A_TOKEN": "x" * 12, "B_TOKEN": "y" * 11, "PATH": "z" * 30})
    assert redactor.literals == frozenset({"x" * 12})
    assert redactor.redact("xxxxxxxxxxxx yyyyyyyyyyy") == "[REDACTED:secret] yyyyyyyyyyy"
    extra = Redactor.from_environment({}, extra=["a-literal-of-some-length"])
    assert extra.redact("use a-literal-of-some-length now") == "use [REDACTED:secret] now"


def test_literals_are_found_everywhere_longest_first() -> None:
    redactor = Redactor(literals=frozenset({"abcdefghijklmn", "abcdefghijklmnop"}))
    assert redactor.redact("abcdefghijklmnop at the start, again abcdefghijklmn, and abcdefghijklmnopq") == (
        "[REDACTED:secret] at the start, again [REDACTED:secret], and [REDACTED:secret]q"
    )
    assert [(m.start, m.end) for m in redactor.find("abcdefghijklmnopabcdefghijklmnop")] == [(0, 16), (16, 32)]  # touching, not overlapping
    assert redactor.redact("") == "" and redactor.redact("clean text") == "clean text"


def test_pieces_are_learned_from_six_characters_on() -> None:
    learned = Redactor().learning_from(["DB_PASSWORD=abcdef+ghijk"])
    assert "abcdef" in learned.literals and "ghijk" not in learned.literals
    assert learned.literals == frozenset({"abcdef+ghijk", "abcdef"})


def test_overlaps_keep_the_kind_listed_first_and_reach_the_furthest_end() -> None:
    redactor = Redactor(literals=frozenset({"sk-ant-literal"})).with_patterns(("late", r"literal-and-more-text"))
    text = "key sk-ant-literal-and-more-text end"
    assert redactor.redact(text) == "key [REDACTED:secret] end"
    later_first = Redactor(patterns=(("one", re.compile(r"bcd")), ("two", re.compile(r"abc"))))
    assert [(m.kind, m.start, m.end) for m in later_first.find("xabcdx")] == [("one", 1, 5)]  # "two" starts first, "one" is listed first
    touching = Redactor(patterns=(("one", re.compile(r"ab")), ("two", re.compile(r"cd"))))
    assert [(m.kind, m.start, m.end) for m in touching.find("abcd")] == [("one", 0, 2), ("two", 2, 4)]


def test_redact_data_maps_every_string_keys_included() -> None:
    key = SAMPLES["github_token"]
    assert redact_data(key) == "[REDACTED:github_token]"
    assert redact_data(5) == 5 and redact_data(None) is None
    data = {key: [key, {"n": 1, "t": key}], "list": [[key]], 3: "x"}
    assert redact_data(data) == {"[REDACTED:github_token]": ["[REDACTED:github_token]", {"n": 1, "t": "[REDACTED:github_token]"}], "list": [["[REDACTED:github_token]"]], 3: "x"}
    assert data[key][0] == key  # a copy


def test_redactor_for_each_option() -> None:
    custom = Redactor(literals=frozenset({"my-own-literal"}))
    assert redactor_for(custom) is custom
    assert redactor_for(False) is None and redactor_for(None) is None
    default = redactor_for(True)
    assert isinstance(default, Redactor) and default.patterns == Redactor().patterns


@dataclasses.dataclass(frozen=True, slots=True)
class NestedDataEvent(Event):
    """An extension's own event, with nested data."""

    data: dict[str, Any]


def test_redacting_sink_redacts_text_lists_and_tuples_only_when_needed() -> None:
    seen: list[Event] = []
    sink = redacting_sink(seen.append, Redactor())
    assert sink is not None and redacting_sink(None, Redactor()) is None
    key = SAMPLES["anthropic_key"]
    clean = ReceiptWritten(source="compaction", trigger="auto", tool_results=1, tokens=5, files=("/a.py",), record_uuid="u")
    sink(clean)
    sink(ReceiptWritten(source="compaction", trigger=f"auto {key}", tool_results=1, tokens=5, files=(f"/{key}/a.py",), record_uuid=None))
    sink(NestedDataEvent({"nested": [key]}))
    assert seen[0] is clean  # nothing to redact: the event itself
    second = seen[1]
    assert isinstance(second, ReceiptWritten)
    assert second.trigger == "auto [REDACTED:anthropic_key]" and second.files == ("/[REDACTED:anthropic_key]/a.py",)
    assert second.tool_results == 1 and second.tokens == 5 and second.record_uuid is None
    third = seen[2]
    assert isinstance(third, NestedDataEvent) and third.data == {"nested": ["[REDACTED:anthropic_key]"]}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://bob:pa:ss@db.example/agents", "postgresql://bob:***@db.example/agents"),
        ("postgresql://bob@db/agents", "postgresql://bob@db/agents"),
        ("postgresql://db/agents", "postgresql://db/agents"),
        ("not a url bob:pw@x", "not a url bob:pw@x"),
        ("postgresql://u:p@h", "postgresql://u:***@h"),
        ("postgresql://u:p@h/d?x=a:b@c", "postgresql://u:***@h/d?x=a:b@c"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
