"""Instruction files along the path of a file the agent reads: found, attached once, scoped."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction.conversation import CompactionResult
from unbounded.errors import ConfigError
from unbounded.extensions.instructions import (
    NestedMemory,
    default_read_file,
    instruction_dirs,
    is_inside,
    read_paths_of,
)
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore

FILES = {
    "/repo/CLAUDE.md": "Root rules: run make test.",
    "/repo/src/AGENTS.md": "src rules: type everything.",
    "/repo/src/db/CLAUDE.md": "db rules: never drop tables.",
    "/repo/src/db/AGENTS.md": "db agents: use migrations.",
    "/elsewhere/CLAUDE.md": "not ours",
}


def fake(files: dict[str, str] | None = None) -> tuple[NestedMemory, list[str]]:
    reads: list[str] = []
    table = FILES if files is None else files

    def read(path: str) -> str | None:
        reads.append(path)
        return table.get(path)

    return NestedMemory("/repo", read_file=read, resolve=os.path.normpath, clock=lambda: 1.0), reads


def test_folders_from_the_working_directory_down() -> None:
    assert instruction_dirs("/repo/src/db/models.py", "/repo") == ["/repo", "/repo/src", "/repo/src/db"]
    assert instruction_dirs("/repo/src/db/models.py", "/repo", include_cwd=False) == ["/repo/src", "/repo/src/db"]
    assert instruction_dirs("/repo/a.py", "/repo") == ["/repo"]
    assert instruction_dirs("/other/a.py", "/repo") == [] and instruction_dirs("/repo", "/repo") == []
    assert instruction_dirs("/repository/a.py", "/repo") == []  # a prefix is not a parent
    assert is_inside("/repo/x", "/repo") and not is_inside("/repo2/x", "/repo")


def test_attached_once_outermost_first() -> None:
    memory, _ = fake()
    first = memory.attachments_for("src/db/models.py")
    assert [a["path"] for a in first] == ["/repo/CLAUDE.md", "/repo/src/AGENTS.md", "/repo/src/db/CLAUDE.md", "/repo/src/db/AGENTS.md"]
    assert all(a["type"] == "nested_memory" for a in first)
    assert first[2]["content"]["content"] == "db rules: never drop tables."
    assert memory.attachments_for("/repo/src/db/queries.py") == []  # same folders: nothing new
    assert memory.attachments_for("/repo/src/api.py") == []
    assert "/repo/src/db/models.py" in memory.state and len(memory.state) == 7  # 4 attached, 3 read


def test_outside_the_working_directory_nothing_is_read() -> None:
    memory, reads = fake()
    assert memory.attachments_for("/elsewhere/code.py") == [] and reads == []
    assert memory.attachments_for("../elsewhere/code.py") == [] and reads == []


def test_a_symlink_out_of_the_tree_is_ignored() -> None:
    def resolve(path: str) -> str:
        normal = os.path.normpath(path)
        return "/elsewhere/CLAUDE.md" if normal == "/repo/src/CLAUDE.md" else normal

    reads: list[str] = []
    memory = NestedMemory("/repo", read_file=lambda p: reads.append(p) or FILES.get(p), resolve=resolve)
    paths = [a["path"] for a in memory.attachments_for("/repo/src/x.py")]
    assert paths == ["/repo/CLAUDE.md", "/repo/src/AGENTS.md"] and "/elsewhere/CLAUDE.md" not in reads


def test_an_instruction_file_read_directly_is_not_attached_again() -> None:
    memory, _ = fake()
    assert [a["path"] for a in memory.attachments_for("/repo/src/db/CLAUDE.md")] == ["/repo/CLAUDE.md", "/repo/src/AGENTS.md", "/repo/src/db/AGENTS.md"]
    assert memory.attachments_for("/repo/src/db/x.py") == []


def test_configurable_names_size_cap_and_errors() -> None:
    memory = NestedMemory("/repo", names=["RULES.md"], read_file=lambda p: "r" * 50 if p.endswith("RULES.md") else None, resolve=os.path.normpath, max_chars=10)
    [attachment] = memory.attachments_for("/repo/a.py")
    assert attachment["truncated"] and attachment["content"]["content"].startswith("r" * 10 + "\n[…")
    for names in ([], ["a/b.md"], [".."]):
        with pytest.raises(ConfigError):
            NestedMemory("/repo", names=names)
    with pytest.raises(ConfigError):
        NestedMemory("/repo", max_chars=0)


def test_default_reader_reads_regular_utf8_files_only(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("rules", encoding="utf-8")
    (tmp_path / "bad.md").write_bytes(b"\xff\xfe\x00")
    assert default_read_file(str(tmp_path / "CLAUDE.md")) == "rules"
    assert default_read_file(str(tmp_path / "bad.md")) is None
    assert default_read_file(str(tmp_path)) is None and default_read_file(str(tmp_path / "none")) is None


def test_real_files_with_the_default_resolver(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "AGENTS.md").write_text("top")
    (tmp_path / "pkg" / "CLAUDE.md").write_text("pkg")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "CLAUDE.md").write_text("outside")
    (tmp_path / "pkg" / "link").symlink_to(outside)
    memory = NestedMemory(tmp_path)
    paths = [a["path"] for a in memory.attachments_for(str(tmp_path / "pkg" / "mod.py"))]
    assert paths == [str((tmp_path / "AGENTS.md").resolve()), str((tmp_path / "pkg" / "CLAUDE.md").resolve())]
    assert memory.attachments_for(str(tmp_path / "pkg" / "link" / "x.py")) == []  # resolves outside


def read_call(tool_id: str, path: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": path}}


def test_in_a_session_attached_after_the_results_and_again_after_compaction() -> None:
    memory, _ = fake()
    config = SessionConfig(model="claude-sonnet-4-5", context_window=60_000)
    session = Session(config, store=MemoryStore(), policy=Policy(), extensions=[memory])
    session.add_user("Look at the db models.")
    asyncio.run(session.prepare())
    session.record(ModelResponse([read_call("r1", "src/db/models.py")], "tool_use", {"input_tokens": 5, "output_tokens": 5}, "m"))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "r1", "content": "class Model: ..."}])
    request = asyncio.run(session.prepare())
    validate_request(request["messages"])
    attachments = [e for e in session.entries if e.type == "attachment"]
    assert [e.attachment["path"] for e in attachments if e.attachment] == ["/repo/CLAUDE.md", "/repo/src/AGENTS.md", "/repo/src/db/CLAUDE.md", "/repo/src/db/AGENTS.md"]
    last = request["messages"][-1]["content"]
    assert isinstance(last, list) and last[0]["type"] == "tool_result"
    texts = [block["text"] for block in last if block["type"] == "text"]
    assert any("Instructions from /repo/src/db/CLAUDE.md:\ndb rules: never drop tables." in t for t in texts)
    # reading more in the same folders attaches nothing more
    session.record(ModelResponse([read_call("r2", "/repo/src/db/queries.py")], "tool_use", {"input_tokens": 5, "output_tokens": 5}, "m"))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "r2", "content": "SELECT 1"}])
    asyncio.run(session.prepare())
    assert len([e for e in session.entries if e.type == "attachment"]) == 4
    # a compaction summarizes the attachments away: they are attached again at once, as they
    # are on disk now (a file that is gone is skipped), and a read under them adds nothing
    del FILES["/repo/src/AGENTS.md"]
    try:
        asyncio.run(session.compact())
    finally:
        FILES["/repo/src/AGENTS.md"] = "src rules: type everything."
    attached = [e.attachment["path"] for e in session.view if e.type == "attachment" and e.attachment and e.attachment.get("type") == "nested_memory"]
    assert attached == ["/repo/CLAUDE.md", "/repo/src/db/CLAUDE.md", "/repo/src/db/AGENTS.md"]
    assert len(memory.state) == 3
    session.record(ModelResponse([read_call("r3", "src/db/models.py")], "tool_use", {"input_tokens": 5, "output_tokens": 5}, "m"))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "r3", "content": "class Model: ..."}])
    asyncio.run(session.prepare())
    attached = [e.attachment["path"] for e in session.view if e.type == "attachment" and e.attachment and e.attachment.get("type") == "nested_memory"]
    assert attached == ["/repo/CLAUDE.md", "/repo/src/db/CLAUDE.md", "/repo/src/db/AGENTS.md", "/repo/src/AGENTS.md"]
    validate_request(normalize_messages(session.view))


def test_remember_view_on_resume_and_read_paths() -> None:
    memory, _ = fake()
    attached = Entry.attachment_record({"type": "nested_memory", "path": "/repo/CLAUDE.md", "content": {"content": "x"}})
    memory.remember_view([attached])
    assert "/repo/CLAUDE.md" in memory.state
    assert [a["path"] for a in memory.attachments_for("/repo/x.py")] == []
    entries = [Entry.assistant([read_call("a", "x.py"), {"type": "tool_use", "id": "b", "name": "str_replace_based_edit_tool", "input": {"command": "view", "path": "/repo/y.py"}}])]
    assert read_paths_of(entries) == ["x.py", "/repo/y.py"]
    assert isinstance(CompactionResult, type)
