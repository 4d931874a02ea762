"""One contract for every SessionStore: FolderStore, MemoryStore and PostgresStore.

Each test runs once per store kind (ids `folder`, `memory`, `postgres`; `pytest -k postgres`
selects the PostgreSQL runs). What only some stores do (persistence across objects, the
lock, read-only mode) is skipped for the kinds without it, saying why.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from unbounded.errors import ConfigError, SessionLockedError, StoreDamagedError
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.side_outputs import side_output_name
from unbounded.storage import FolderStore, MemoryStore, SessionStore
from unbounded.transcripts.jsonl import dumps_line

CONFIG = SessionConfig(model="claude-sonnet-4-5", system="sys", context_window=30_000)


@dataclass
class StoreKind:
    """How to open stores of one kind on one session."""

    name: str
    open: Callable[..., SessionStore]
    persistent: bool
    locking: bool
    lines: Callable[[], list[bytes]] | None = None
    """The stored JSONL lines (newline included), where the store keeps them."""


def _folder_kind(tmp_path: Path) -> StoreKind:
    folder = tmp_path / "session"

    def lines() -> list[bytes]:
        path = folder / "transcript.jsonl"
        return path.read_bytes().splitlines(keepends=True) if path.exists() else []

    def open_store(lock: bool = True, wait: float | None = None) -> SessionStore:
        return FolderStore(folder, lock=lock, wait=wait)

    return StoreKind("folder", open_store, persistent=True, locking=True, lines=lines)


def _memory_kind() -> StoreKind:
    def open_store(lock: bool = True, wait: float | None = None) -> SessionStore:
        return MemoryStore()

    return StoreKind("memory", open_store, persistent=False, locking=False)


def _postgres_kind(url: str) -> StoreKind:
    from unbounded.postgres import PostgresStore
    from unbounded.postgres.transfer import iter_session_lines

    def open_store(lock: bool = True, wait: float | None = None) -> SessionStore:
        return PostgresStore(url, "contract", lock=lock, wait=wait)

    def lines() -> list[bytes]:
        return list(iter_session_lines(url, "contract"))

    return StoreKind("postgres", open_store, persistent=True, locking=True, lines=lines)


@pytest.fixture(params=["folder", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreKind]:
    if request.param == "folder":
        yield _folder_kind(tmp_path)
    elif request.param == "memory":
        yield _memory_kind()
    else:
        yield _postgres_kind(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(kind: StoreKind) -> Iterator[SessionStore]:
    opened = kind.open()
    yield opened
    opened.close()


def _records(count: int, prefix: str = "m") -> list[Entry]:
    return [Entry.user(f"{prefix} {index}") for index in range(count)]


# -- the transcript --------------------------------------------------------------------------


def test_a_new_session_is_empty(store: SessionStore) -> None:
    transcript = store.load()
    assert transcript.entries == [] and transcript.format == "claude-code"
    assert store.load_state("session") is None
    assert store.read_memory() is None
    assert store.load_tool_output(side_output_name("nothing")) is None
    assert store.read_only is False


def test_appends_come_back_in_order_with_every_field(store: SessionStore) -> None:
    first = _records(3)
    unusual = Entry(
        {
            "type": "user",
            "uuid": "u-odd",
            "zeta": 1,
            "alpha": {"z": [1, 2.5, None], "a": "é \u0000 🎉 \\u0000"},
            "message": {"role": "user", "content": "keys stay in their order"},
        }
    )
    store.append(first)
    store.append([unusual])
    store.append([])
    loaded = store.load().entries
    assert [e.data for e in loaded] == [e.data for e in [*first, unusual]]
    assert list(loaded[-1].data) == ["type", "uuid", "zeta", "alpha", "message"]


def test_the_stored_lines_are_what_the_jsonl_writer_writes(kind: StoreKind, store: SessionStore) -> None:
    if kind.lines is None:
        pytest.skip(f"a {kind.name} store keeps no lines")
    entries = [*_records(2), Entry({"type": "user", "b": 2, "a": "\u0000", "message": {"role": "user", "content": "x"}})]
    store.append(entries)
    assert kind.lines() == [dumps_line(e.data) for e in entries]


def test_a_compaction_batch_is_one_append(kind: StoreKind, store: SessionStore) -> None:
    session = Session(CONFIG, store=store, policy=Policy())
    session.add_user("start " + "words " * 200)
    before = len(store.load().entries)
    result = asyncio.run(session.compact())
    after = store.load().entries
    assert len(after) == before + len(result.new_entries())
    assert after[before].is_compact_boundary
    assert after[before + 1].is_compact_summary


# -- state, notes, tool outputs ------------------------------------------------------------


def test_state_documents_are_replaced_whole(store: SessionStore) -> None:
    store.save_state("session", {"b": 1, "a": {"nested": [1, 2]}})
    store.save_state("other", {"x": True})
    store.save_state("session", {"c": 3})
    assert store.load_state("session") == {"c": 3}
    assert store.load_state("other") == {"x": True}
    assert store.load_state("never") is None


def test_a_bad_state_name_is_refused(kind: StoreKind, store: SessionStore) -> None:
    if kind.name == "memory":
        pytest.skip("a memory store keys states by any name")
    with pytest.raises(Exception, match="letters, digits"):
        store.save_state("../escape", {})


def test_notes_are_replaced(store: SessionStore) -> None:
    store.write_memory("# Notes\nfirst")
    store.write_memory("# Notes\nsecond é")
    assert store.read_memory() == "# Notes\nsecond é"


def test_tool_outputs_are_kept_by_key(kind: StoreKind, store: SessionStore) -> None:
    big = "line of output\n" * 10_000 + "binary \x00 byte"
    where = store.save_tool_output(side_output_name("toolu_01/../x"), big)
    assert store.load_tool_output(side_output_name("toolu_01/../x")) == big
    assert store.load_tool_output(side_output_name("toolu_02")) is None
    if kind.name == "folder":
        assert where is not None and Path(where).read_text(encoding="utf-8") == big
        assert Path(where).parent.name == "tool-outputs"  # the id's slashes name no folder
    else:
        assert where is None


# Ids that an earlier naming (punctuation to "_", part n as "-n") sent to one file.
COLLIDING = [("call.1", 0), ("call:1", 0), ("call/1", 0), ("call_1", 0), ("CALL_1", 0), ("x", 1), ("x-1", 0), ("...", 0), ("", 0)]


def test_every_id_and_part_has_an_output_of_its_own(store: SessionStore) -> None:
    for tool_id, part in COLLIDING:
        store.save_tool_output(side_output_name(tool_id, part), f"output of {tool_id!r} part {part}")
    for tool_id, part in COLLIDING:
        assert store.load_tool_output(side_output_name(tool_id, part)) == f"output of {tool_id!r} part {part}"


def test_a_key_that_is_not_a_side_output_name_is_refused(store: SessionStore) -> None:
    for bad in ("toolu_01", "../x", "id-abc.0/..", "id-ABC.0"):
        with pytest.raises(ConfigError, match="side_output_name"):
            store.save_tool_output(bad, "text")
        with pytest.raises(ConfigError, match="side_output_name"):
            store.load_tool_output(bad)


# -- persistence, locking, read-only mode ------------------------------------------------------


def _need(kind: StoreKind, feature: str) -> None:
    if not getattr(kind, feature):
        pytest.skip(f"a {kind.name} store is not {feature}")


def test_everything_survives_a_reopen(kind: StoreKind) -> None:
    _need(kind, "persistent")
    records = _records(2)
    first = kind.open()
    first.append(records)
    first.save_state("session", {"turns": 2})
    first.write_memory("notes")
    first.save_tool_output(side_output_name("k"), "kept")
    first.close()
    again = kind.open()
    try:
        assert [e.data for e in again.load().entries] == [e.data for e in records]
        assert again.load_state("session") == {"turns": 2}
        assert again.read_memory() == "notes"
        assert again.load_tool_output(side_output_name("k")) == "kept"
    finally:
        again.close()


def test_a_second_writer_is_refused_at_once(kind: StoreKind, store: SessionStore) -> None:
    _need(kind, "locking")
    with pytest.raises(SessionLockedError, match="wait=") as refused:
        kind.open()
    assert "after waiting" not in str(refused.value)  # refused without a wait


def test_a_writer_waits_for_the_lock_and_gives_up(kind: StoreKind, store: SessionStore) -> None:
    _need(kind, "locking")
    with pytest.raises(SessionLockedError, match=r"after waiting 0\.3 s"):
        kind.open(wait=0.3)


def test_the_lock_is_free_once_closed(kind: StoreKind, store: SessionStore) -> None:
    _need(kind, "locking")
    store.close()
    store.close()
    second = kind.open(wait=math.inf)
    second.append(_records(1))
    second.close()
    with pytest.raises(StoreDamagedError, match="closed"):
        store.append(_records(1))


def test_a_read_only_store_reads_and_never_writes(kind: StoreKind, store: SessionStore) -> None:
    _need(kind, "locking")
    store.append(_records(2))
    store.save_state("session", {"v": 1})
    reader = kind.open(lock=False)
    try:
        assert reader.read_only
        assert len(reader.load().entries) == 2
        reader.append(_records(1, "only in memory"))
        reader.save_state("session", {"v": 2})
        reader.write_memory("mine")
        assert len(reader.load().entries) == 3
        assert reader.load_state("session") == {"v": 2}
        store.append(_records(1, "writer"))
        assert len(reader.load().entries) == 4
    finally:
        reader.close()
    assert len(store.load().entries) == 3
    assert store.load_state("session") == {"v": 1}
    assert store.read_memory() is None


# -- a whole session over the store ---------------------------------------------------------------


def _turn(session: Session, number: int) -> None:
    session.add_user(f"step {number}: " + "please look " * 40)
    asyncio.run(session.prepare())
    tool_id = f"toolu_{number:04d}"
    session.record(
        ModelResponse(
            [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}],
            "tool_use",
            {"input_tokens": 50 + 900 * number, "output_tokens": 20},
            "claude-sonnet-4-5",
            id=f"msg_{number:04d}",
        )
    )
    session.add_tool_results(
        [{"type": "tool_result", "tool_use_id": tool_id, "content": "file.py\n" * 400}]
    )
    asyncio.run(session.prepare())
    session.record(
        ModelResponse(
            [{"type": "text", "text": f"done {number}"}],
            "end_turn",
            {"input_tokens": 60 + 1_000 * number, "output_tokens": 10},
            "claude-sonnet-4-5",
            id=f"msg_{number:04d}b",
        )
    )


def test_a_session_compacts_and_resumes_on_the_store(kind: StoreKind) -> None:
    first = kind.open()
    session = Session(CONFIG, store=first, policy=Policy())
    for number in range(30):
        _turn(session, number)
    assert session.micro.stats.compactions >= 1
    view = [dict(m) for m in normalize_messages(session.view)]
    validate_request(view)
    first.close()
    if not kind.persistent:
        return
    again = kind.open()
    try:
        resumed = Session(CONFIG, store=again, policy=Policy())
        assert [dict(m) for m in normalize_messages(resumed.view)] == view
        assert resumed.micro.stats.compactions == session.micro.stats.compactions
    finally:
        again.close()
