"""`SessionOptions`: a session's keywords as one frozen value, checked when made; `SessionDeps`
resolved from it; the parts of a session reached through it."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from pathlib import Path

import pytest

from unbounded.errors import ConfigError
from unbounded.extension import Extension
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig, SessionOptions
from unbounded.session_options import resolve_deps
from unbounded.storage import MemoryStore

CONFIG = SessionConfig(model="claude-sonnet-4-5", context_window=60_000)
NOON = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


def test_options_given_as_one_value_or_as_keywords_build_the_same_session() -> None:
    options = SessionOptions(policy=Policy(), clock=lambda: NOON)
    by_value = Session(CONFIG, options)
    by_keywords = Session(CONFIG, policy=Policy(), clock=lambda: NOON)
    assert by_value.policy == by_keywords.policy
    assert by_value.add_user("hi").data["timestamp"] == by_keywords.add_user("hi").data["timestamp"]
    assert by_value.options is options


def test_keywords_beside_the_options_override_their_fields() -> None:
    store = MemoryStore()
    options = SessionOptions(policy=Policy(tool_result_max_tokens=100))
    session = Session(CONFIG, options, store=store)
    assert session.store is store
    assert session.options.policy == Policy(tool_result_max_tokens=100)
    assert options.store is None  # the value given is left as it was


def test_a_keyword_that_is_no_option_is_a_type_error_naming_the_options() -> None:
    with pytest.raises(TypeError, match=r"unknown option\(s\) polcy; the options are: store, policy"):
        Session(CONFIG, polcy=Policy())


def test_each_session_gets_a_store_of_its_own_from_shared_options() -> None:
    options = SessionOptions(policy=Policy())
    assert Session(CONFIG, options).store is not Session(CONFIG, options).store


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rehydrate_from": "cloud"}, "rehydrate_from must be 'disk' or 'transcript'"),
        ({"compaction_tiers": "all"}, "compaction_tiers must be a list of compaction tiers"),
        ({"compaction_tiers": [object()]}, r"compaction_tiers\[0\]"),
        ({"extensions": [object()]}, r"extensions\[0\] is a object, not an unbounded.Extension"),
        ({"policy": {"auto_compact_enabled": False}}, "policy must be a Policy or a policy file's path, not dict"),
        ({"allowed_roots": "/srv/app"}, "allowed_roots must be a list of folders, not one path"),
        ({"allowed_roots": Path("/srv/app")}, "allowed_roots must be a list of folders, not one path"),
        ({"clock": NOON}, "clock must be a function returning a datetime"),
    ],
)
def test_wrong_options_fail_when_made_saying_what_to_fix(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SessionOptions(**options)  # type: ignore[arg-type]


def test_the_options_hold_their_checked_forms() -> None:
    class Nothing(Extension):
        pass

    extension = Nothing()
    options = SessionOptions(extensions=[extension], allowed_roots=["/a", Path("/b")])
    assert options.extensions == (extension,)
    assert options.allowed_roots == ("/a", "/b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.store = MemoryStore()  # type: ignore[misc]


def test_a_policy_file_is_read_when_the_options_are_made(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[policy]\ntool_result_max_tokens = 123\n")
    for given in (path, str(path)):
        read = SessionOptions(policy=given).policy
        assert isinstance(read, Policy) and read.tool_result_max_tokens == 123


def test_the_dependencies_resolve_each_default() -> None:
    deps = resolve_deps(SessionOptions(policy=Policy(), allowed_roots=["/a"]))
    assert isinstance(deps.store, MemoryStore)
    assert deps.policy == Policy() and deps.allowed_roots == ["/a"]
    assert deps.extensions == () and deps.redactor is None and deps.events is None


def test_the_parts_and_state_of_a_session_are_read_only() -> None:
    session = Session(CONFIG, policy=Policy())
    for name in ("options", "deps", "state", "store", "micro", "calibration", "summarizer", "detector"):
        with pytest.raises(AttributeError):
            setattr(session, name, None)
    session.reconfigure(summarizer=ExtractiveSummarizer())
    assert isinstance(session.summarizer, ExtractiveSummarizer)
    assert session.deps.summarizer is session.summarizer
