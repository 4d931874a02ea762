"""Review of session 17's merged changes (i37f, 102be10..5c375ad): each test is a bug found,
marked strict xfail until it is fixed (the reason says what is wrong and since when)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from unbounded.catalog import load_model_table
from unbounded.model.entries import Entry
from unbounded.session import Session, SessionConfig
from unbounded.tokens.estimate import entry_tokens, pad_estimate, token_count_with_estimation

# -- thinking left out of the estimate (102be10) ------------------------------------------

THINK = {"type": "thinking", "thinking": "t" * 400, "signature": "sig"}  # 100 tokens
STRIPS = "claude-sonnet-4-5-20250929"  # drops earlier turns' thinking
KEEPS = "claude-opus-4-5"  # keeps it


def _turn(model: str, n: int) -> list[Entry]:
    """A tool loop on `model`: a prompt, thinking and a call, its result, thinking and an
    answer (200 tokens of thinking in all), no usage."""
    call = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}}
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "r" * 40}
    return [
        Entry.user(f"question {n}"),
        Entry.assistant([THINK, call], message_id=f"a{n}", model=model),
        Entry.user([result]),
        Entry.assistant([THINK, {"type": "text", "text": "done"}], message_id=f"b{n}", model=model),
    ]


def _everything(entries: list[Entry]) -> int:
    return pad_estimate(sum(entry_tokens(e) for e in entries))


def test_a_keeping_model_after_a_dropping_one_counts_all_thinking_sent() -> None:
    entries = [*_turn(STRIPS, 1), *_turn(KEEPS, 2), Entry.user("question 3")]
    assert token_count_with_estimation(entries) == _everything(entries)


def test_a_synthetic_entry_does_not_decide_whether_thinking_is_dropped() -> None:
    synthetic = Entry.assistant(
        [{"type": "text", "text": "No response requested."}],
        message_id="syn",
        model="<synthetic>",
    )
    entries = [*_turn(STRIPS, 1), synthetic, Entry.user("question 2")]
    assert token_count_with_estimation(entries) == pad_estimate(
        sum(entry_tokens(e) for e in entries) - 200
    )


def _calibration(model: str, table: Any = None) -> float | None:
    options = {} if table is None else {"model_table": table}
    session = Session(SessionConfig(model=model), **options)
    session.add_user("q1")
    thinking = {"type": "thinking", "thinking": "t" * 4000, "signature": "sig"}
    session.record(
        {"content": [thinking, {"type": "text", "text": "a"}], "usage": {"input_tokens": 50}}
    )
    session.add_user("q2")
    session.record({"content": [{"type": "text", "text": "b"}], "usage": {"input_tokens": 60}})
    return session.calibration


def test_the_sessions_own_model_table_decides_whether_thinking_is_dropped() -> None:
    table = load_model_table()
    sonnet = table.get("claude-sonnet-4-5")
    renamed = table.with_model(dataclasses.replace(sonnet, name="acme-sonnet", aliases=()))
    assert _calibration("acme-sonnet", renamed) == _calibration("claude-sonnet-4-5")
    kept = table.with_model(dataclasses.replace(sonnet, keeps_previous_thinking=True))
    assert _calibration("claude-sonnet-4-5", kept) == _calibration("claude-opus-4-5")


# -- break detector: effort (58decbe) ------------------------------------------------------


def test_a_top_level_effort_change_beside_an_output_config_effort_is_named() -> None:
    from unbounded.caching.break_detector import CacheBreak, PromptCacheBreakDetector

    request: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "system": "You are a careful coding agent.",
        "messages": [{"role": "user", "content": "Fix the login bug."}],
        "output_config": {"effort": "low"},
    }
    detector = PromptCacheBreakDetector()
    detector.record_prompt_state({**request, "effort": "low"}, now=0)
    assert (
        detector.check_response_for_cache_break({"cache_read_input_tokens": 50_000}, now=0) is None
    )
    detector.record_prompt_state({**request, "effort": "high"}, now=1)
    event = detector.check_response_for_cache_break({"cache_read_input_tokens": 0}, now=1)
    assert isinstance(event, CacheBreak)
    assert "server_side" not in event.causes


# -- SDK blocks nested in a tool result (e16c788) ------------------------------------------


def test_add_tool_results_takes_sdk_blocks_in_a_results_content() -> None:
    types = pytest.importorskip("anthropic.types")
    session = Session(SessionConfig(model="claude-sonnet-4-5"))
    session.add_user("run it")
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    session.record({"content": [call], "usage": {"input_tokens": 10}})
    block = types.TextBlock(type="text", text="a.py", citations=None)
    session.add_tool_results(
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [block]}]
    )
    [result] = session.entries[-1].content
    assert result["content"] == [{"type": "text", "text": "a.py"}]


# -- postgres 57P03 retry (38b15b8) --------------------------------------------------------

# The server writes this FATAL in its own lc_messages (here a German wording of "the database
# system is starting up"); libpq gives no SQLSTATE for it.
STARTING_DE = (
    'connection to server at "db" (172.18.0.2), port 5432 failed: FATAL:  das Datenbanksystem '
    "startet"
)


def test_a_server_starting_up_in_another_language_is_asked_again() -> None:
    psycopg = pytest.importorskip("psycopg")
    from unbounded.postgres.connect import _try_connecting

    clock = [0.0]
    errors = [STARTING_DE]

    class Connection:
        def close(self) -> None:
            """Given back."""

    def connect(url: str, *, connect_timeout: int) -> Connection:
        if errors:
            raise psycopg.OperationalError(errors.pop())
        return Connection()

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    _try_connecting(
        "postgresql://app@db/app", 10.0, connect=connect, clock=lambda: clock[0], sleep=sleep
    )
    assert clock[0] == pytest.approx(0.1)


# -- parse_address: a ? in the password (d8842ad) -----------------------------------------


@pytest.mark.parametrize(
    "text",
    ["postgresql://u:pa?ss/w=x@h/db?session=S", "postgresql://u:pa?session=X/w@h/db?session=S"],
)
def test_a_password_with_a_question_mark_and_a_slash_never_shows(text: str) -> None:
    from unbounded.addresses import parse_address
    from unbounded.errors import ConfigError

    with pytest.raises(ConfigError, match="%3F") as refused:
        parse_address(text)
    assert "u:***@h/db" in str(refused.value)


def test_a_password_beginning_with_a_question_mark_never_shows() -> None:
    from unbounded.addresses import parse_address
    from unbounded.errors import ConfigError

    address = parse_address("postgresql://u:?secret@h/db?session=S")
    assert address.display == "postgresql://u:***@h/db?session=S"
    with pytest.raises(ConfigError, match="%3F") as refused:
        parse_address("postgresql://u:?se/cret@h/db?session=S")
    assert "cret" not in str(refused.value)


# -- the models file read by the count (102be10) -------------------------------------------


def test_a_session_with_its_own_table_does_not_read_the_models_file_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    table = load_model_table(environ={})
    monkeypatch.setenv("UNBOUNDED_MODELS_FILE", str(tmp_path / "missing.toml"))
    session = Session(SessionConfig(model="claude-sonnet-4-5"), model_table=table)
    session.add_user("q")
    session.record({"content": [{"type": "text", "text": "a"}], "usage": {"input_tokens": 5}})
    assert session.status().tokens == 5


def test_an_at_sign_in_a_query_value_of_an_address_without_a_path_keeps_the_session() -> None:
    from unbounded.addresses import DatabaseAddress, parse_address

    address = parse_address("postgresql://h?user=admin@srv&session=S")
    assert address == DatabaseAddress("postgresql://h?user=admin%40srv", "S")


def test_the_connection_parameters_reach_libpq_as_given() -> None:
    conninfo = pytest.importorskip("psycopg.conninfo")
    from unbounded.addresses import parse_address

    given = "postgresql://h/db?options=-c%20search_path%3Dx&password=a%20b&session=S"
    address = parse_address(given)
    assert conninfo.conninfo_to_dict(address.url) == {
        "host": "h",
        "dbname": "db",
        "options": "-c search_path=x",
        "password": "a b",
    }


def test_a_model_lookup_that_raises_leaves_the_count_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from unbounded.errors import ConfigError
    from unbounded.tokens.estimate import ContextCounter

    counter = ContextCounter([Entry.user("q")])
    before = (counter.total, counter.entries_seen)
    monkeypatch.setenv("UNBOUNDED_MODELS_FILE", str(tmp_path / "missing.toml"))
    answer = Entry.assistant([THINK], message_id="a", model="not-cached-model-name-17a")
    with pytest.raises(ConfigError):
        counter.append(answer)
    assert (counter.total, counter.entries_seen) == before


# A reason in a language the module does not know (French wording, for the probe's sake).
STARTING_FR = 'connection to server at "db", port 5432 failed: FATAL:  le système démarre'


@pytest.mark.parametrize("rejects", [True, False])
def test_a_reason_in_an_unknown_language_is_told_by_the_probe(rejects: bool) -> None:
    psycopg = pytest.importorskip("psycopg")
    from unbounded.errors import ConfigError
    from unbounded.postgres.connect import _try_connecting

    clock = [0.0]
    errors = [STARTING_FR]
    probed: list[tuple[str, int]] = []

    class Connection:
        def close(self) -> None:
            """Given back."""

    def connect(url: str, *, connect_timeout: int) -> Connection:
        if errors:
            raise psycopg.OperationalError(errors.pop())
        return Connection()

    def ping(url: str, timeout: int) -> bool:
        probed.append((url, timeout))
        return rejects

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    def run() -> None:
        _try_connecting(
            "postgresql://app@db/app",
            10.0,
            connect=connect,
            ping=ping,
            clock=lambda: clock[0],
            sleep=sleep,
        )

    if rejects:
        run()
        assert clock[0] == pytest.approx(0.1)
    else:
        with pytest.raises(ConfigError, match="le système démarre"):
            run()
        assert clock[0] == 0
    assert probed == [("postgresql://app@db/app", 2)]


def test_the_probe_of_a_closed_port_says_not_starting() -> None:
    pytest.importorskip("psycopg")
    from unbounded.postgres.connect import _refuses_connections_now

    assert _refuses_connections_now("postgresql://app@127.0.0.1:1/app", 1) is False


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # No host follows the @: it is a query value's, as parse_address reads it.
        ("postgresql://h:5432?user=a@b&session=S", "postgresql://h:5432?user=a@b&session=S"),
        # A host follows it: libpq's user part, a password holding ? & and =.
        ("postgresql://u:s?e&x=y@h/db", "postgresql://u:***@h/db"),
        # No ? before the @: a user part whatever follows it (never a password shown).
        ("postgresql://u:secret@h&x=1", "postgresql://u:***@h&x=1"),
    ],
)
def test_redact_url_reads_an_at_after_a_question_mark_as_parse_address_does(
    url: str, shown: str
) -> None:
    from unbounded.redaction import redact_url

    assert redact_url(url) == shown


def test_a_dropping_model_after_a_keeping_one_drops_the_earlier_turns_thinking_at_once() -> None:
    call = {"type": "tool_use", "id": "t9", "name": "Bash", "input": {}}
    answer = Entry.assistant([THINK, call], message_id="c2", model=STRIPS)
    entries = [*_turn(KEEPS, 1), Entry.user("question 2"), answer]
    # Turn 1's 200 tokens of thinking go as the dropping model answers; its own 100 stay.
    assert token_count_with_estimation(entries) == pad_estimate(
        sum(entry_tokens(e) for e in entries) - 200
    )
