"""Rehydration rules the session-14 mutation run left untested: a memory file is known by the
name it was read under or by the name it resolves to, and the default resolver resolves each
directory of a compaction once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction.rehydrate import WorkingState, rehydrate
from unbounded.policy import Policy

MEMORY = "memory file (restored with the instructions)"


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_memory_file_is_skipped_under_either_of_its_names(tmp_path: Path) -> None:
    # A link named otherwise pointing at CLAUDE.md, and CLAUDE.md linking to a file named
    # otherwise: each is the memory file, restored with the instructions, not as a file.
    claude = _write(tmp_path / "CLAUDE.md", "# rules\n")
    alias = tmp_path / "rules-link.md"
    alias.symlink_to(claude)
    target = _write(tmp_path / "shared" / "team-rules.md", "# team\n")
    nested = tmp_path / "sub" / "CLAUDE.md"
    nested.parent.mkdir()
    nested.symlink_to(target)
    plain = _write(tmp_path / "a.py", "print(1)\n")
    state = WorkingState()
    state.record_read(str(alias), 1.0)
    state.record_read(str(nested), 2.0)
    state.record_read(plain, 3.0)
    result = rehydrate(
        state,
        allowed_roots=[tmp_path],
        memory_file_names=("CLAUDE.md",),
        policy=Policy(rehydrate_max_files=10),
    )
    assert result.skipped_reasons() == {str(alias): MEMORY, str(nested): MEMORY}
    assert [a["filename"] for a in result.attachments if a["type"] == "file"] == [plain]


def test_the_default_resolver_looks_at_a_shared_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `os.path.realpath` on each path would look up every directory of it again for each
    # file; the default resolver looks each directory up once (same answers, see
    # test_rehydrate's test_paths_resolved_by_directory_are_realpath).
    directory = tmp_path / "project" / "src"
    paths = [_write(directory / f"m{i}.py", f"x = {i}\n") for i in range(6)]
    state = WorkingState()
    for index, path in enumerate(paths):
        state.record_read(path, float(index))
    looked: list[str] = []
    real_lstat = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        looked.append(os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    result = rehydrate(state, allowed_roots=[tmp_path], policy=Policy(rehydrate_max_files=10))
    monkeypatch.undo()
    assert len(result.attachments) >= 1
    assert looked.count(str(directory)) == 1
    assert looked.count(str(tmp_path / "project")) == 1
    assert sorted(p for p in looked if p.endswith(".py")) == sorted(paths)


def test_a_resolver_of_the_callers_is_the_one_used(tmp_path: Path) -> None:
    # The caller's resolver (a sandbox's view of the disk, say) decides where a path lands:
    # ours, which would find the file inside the roots, must not stand in for it.
    inside = _write(tmp_path / "a.py", "print(1)\n")
    moved = _write(tmp_path / "secret.py", "KEY = 1\n")
    state = WorkingState()
    state.record_read(inside, 1.0)
    state.record_read(moved, 2.0)

    def resolve(path: str) -> str:
        return "/outside/secret.py" if path.endswith("secret.py") else path

    result = rehydrate(
        state,
        allowed_roots=[tmp_path],
        resolve_path=resolve,
        policy=Policy(rehydrate_max_files=10),
    )
    assert result.skipped_reasons() == {moved: "resolves outside the allowed roots"}
    assert [a["filename"] for a in result.attachments if a["type"] == "file"] == [inside]
