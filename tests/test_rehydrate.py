"""Post-compaction rehydration: files, skills, plan, todos, agents, deltas; budgets and skips."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction.rehydrate import (
    AgentState,
    WorkingState,
    attachment_tokens,
    make_rehydrator,
    rehydrate,
    rehydrate_skills,
    truncate_to_tokens,
    working_state_from_entries,
)
from unbounded.model.attachments import attachment_to_content
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.tokens.estimate import rough_token_count


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def _files(rehydration: Any) -> list[str]:
    return [a["filename"] for a in rehydration.attachments if a["type"] == "file"]


def test_five_most_recent_files_are_reread_now(tmp_path: Path) -> None:
    state = WorkingState()
    for i in range(7):
        state.record_read(_write(tmp_path / f"f{i}.py", f"old {i}\n"), read_at=float(i))
    # changed on disk after it was read: the attachment shows the current content
    (tmp_path / "f6.py").write_text("new 6\n", encoding="utf-8")
    result = rehydrate(state, allowed_roots=[tmp_path])
    assert _files(result) == [str(tmp_path / f"f{i}.py") for i in (6, 5, 4, 3, 2)]
    first = result.attachments[0]
    assert first == {
        "type": "file",
        "filename": str(tmp_path / "f6.py"),
        "content": "new 6\n",
        "truncated": False,
    }
    reasons = result.skipped_reasons()
    assert reasons[str(tmp_path / "f1.py")] == "not among the 5 most recent"
    assert reasons[str(tmp_path / "f0.py")] == "not among the 5 most recent"
    assert result.file_tokens == sum(attachment_tokens(a) for a in result.attachments)


def test_per_file_cap_truncates_with_a_marker(tmp_path: Path) -> None:
    path = _write(tmp_path / "big.py", "".join(f"line {i:05d} of the file\n" for i in range(3_000)))
    state = WorkingState()
    state.record_read(path, 1.0)
    result = rehydrate(state, allowed_roots=[tmp_path])
    (attachment,) = result.attachments
    assert attachment["truncated"] is True
    assert rough_token_count(attachment["content"]) <= Policy().rehydrate_tokens_per_file
    assert attachment["content"].startswith("line 00000 of the file\n")
    assert attachment["content"].endswith(f"Read {path} again to see the rest.]")
    # cut at a line end, not inside a line
    assert attachment["content"].split("\n\n[File truncated")[0].endswith("of the file")


def test_total_budget_skips_what_does_not_fit(tmp_path: Path) -> None:
    state = WorkingState()
    for i in range(4):
        state.record_read(_write(tmp_path / f"f{i}.txt", "x" * 1_000), read_at=float(i))
    state.record_read(_write(tmp_path / "small.txt", "tiny"), read_at=-1.0)
    unlimited = rehydrate(
        state, allowed_roots=[tmp_path], policy=Policy(rehydrate_tokens_per_file=100)
    )
    sizes = {a["filename"]: attachment_tokens(a) for a in unlimited.attachments}
    big, small = sizes[str(tmp_path / "f3.txt")], sizes[str(tmp_path / "small.txt")]
    assert big > 100 and small < big  # each file capped at 100 tokens of content, plus its JSON
    total = 2 * big + small
    policy = Policy(rehydrate_tokens_per_file=100, rehydrate_total_file_tokens=total)
    result = rehydrate(state, allowed_roots=[tmp_path], policy=policy)
    assert _files(result) == [
        str(tmp_path / "f3.txt"),
        str(tmp_path / "f2.txt"),
        str(tmp_path / "small.txt"),
    ]
    assert result.file_tokens == total
    reasons = result.skipped_reasons()
    assert reasons[str(tmp_path / "f1.txt")] == "over the total file budget"
    assert reasons[str(tmp_path / "f0.txt")] == "over the total file budget"


def test_skips_plan_memory_stub_kept_and_missing(tmp_path: Path) -> None:
    plan = _write(tmp_path / "plans" / "plan.md", "# plan")
    claude = _write(tmp_path / "CLAUDE.md", "rules")
    agents = _write(tmp_path / "sub" / "AGENTS.md", "rules")
    notes = _write(tmp_path / "NOTES.md", "notes")
    stub = _write(tmp_path / "stub.py", "x")
    kept_message = _write(tmp_path / "kept_message.py", "x")
    kept_entry = _write(tmp_path / "kept_entry.py", "x")
    gone = _write(tmp_path / "gone.py", "x")
    os.remove(gone)
    good = _write(tmp_path / "good.py", "print('ok')\n")
    state = WorkingState(plan_file_path=plan, plan_content="# plan")
    for index, path in enumerate(
        [plan, claude, agents, notes, kept_message, kept_entry, gone, good]
    ):
        state.record_read(path, float(index))
    state.record_read(stub, 100.0, unchanged_stub=True)
    kept: list[Any] = [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "1",
                    "name": "Read",
                    "input": {"file_path": kept_message},
                }
            ],
        },
        Entry.assistant(
            [{"type": "tool_use", "id": "2", "name": "Read", "input": {"file_path": kept_entry}}]
        ),
    ]
    result = rehydrate(
        state,
        allowed_roots=[tmp_path],
        kept_messages=kept,
        memory_file_names=("CLAUDE.md", "AGENTS.md", "NOTES.md"),
        policy=Policy(rehydrate_max_files=10),
    )
    assert _files(result) == [good]
    assert result.skipped_reasons() == {
        stub: "last read was an unchanged-file stub",
        gone: "no longer exists",
        kept_entry: "already read in a kept message",
        kept_message: "already read in a kept message",
        notes: "memory file (restored with the instructions)",
        agents: "memory file (restored with the instructions)",
        claude: "memory file (restored with the instructions)",
        plan: "plan file (restored as the plan)",
    }
    # the plan comes back as the plan attachment instead
    assert {
        "type": "plan_file_reference",
        "planFilePath": plan,
        "planContent": "# plan",
    } in result.attachments


def test_symlink_escaping_the_roots_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    secret = _write(tmp_path / "outside" / "secret.txt", "password")
    inside = _write(root / "real.txt", "fine")
    root.joinpath("link_out.txt").symlink_to(secret)
    root.joinpath("link_in.txt").symlink_to(inside)
    state = WorkingState()
    state.record_read(str(root / "link_out.txt"), 3.0)
    state.record_read(str(root / "link_in.txt"), 2.0)
    state.record_read(secret, 1.0)
    calls: list[str] = []

    def reader(path: str) -> str:
        calls.append(path)
        return Path(path).read_text(encoding="utf-8")

    result = rehydrate(state, allowed_roots=[root], read_file=reader)
    assert _files(result) == [str(root / "link_in.txt")]
    assert result.attachments[0]["content"] == "fine"
    reasons = result.skipped_reasons()
    assert reasons[str(root / "link_out.txt")] == "resolves outside the allowed roots"
    assert reasons[secret] == "resolves outside the allowed roots"
    assert calls == [os.path.realpath(inside)]
    assert all("password" not in str(a) for a in result.attachments)


def test_no_roots_means_nothing_is_read(tmp_path: Path) -> None:
    state = WorkingState()
    state.record_read(_write(tmp_path / "a.py", "x"), 1.0)
    result = rehydrate(state, allowed_roots=[])
    assert result.attachments == []
    assert result.skipped_reasons() == {
        str(tmp_path / "a.py"): "resolves outside the allowed roots"
    }


def test_sibling_directory_with_a_common_prefix_is_outside(tmp_path: Path) -> None:
    state = WorkingState()
    state.record_read(_write(tmp_path / "app-secrets" / "key.txt", "k"), 1.0)
    result = rehydrate(state, allowed_roots=[tmp_path / "app"])
    assert result.attachments == []


def test_relative_paths_need_a_cwd(tmp_path: Path) -> None:
    _write(tmp_path / "rel.py", "relative")
    state = WorkingState()
    state.record_read("rel.py", 1.0)
    assert rehydrate(state, allowed_roots=[tmp_path]).skipped_reasons() == {
        "rel.py": "relative path and no cwd given"
    }
    result = rehydrate(state, allowed_roots=[tmp_path], cwd=str(tmp_path))
    assert result.attachments[0]["filename"] == "rel.py"
    assert result.attachments[0]["content"] == "relative"


def test_large_files_are_skipped_before_reading(tmp_path: Path) -> None:
    huge = tmp_path / "huge.log"
    with open(huge, "wb") as handle:
        handle.truncate(5 * 1024 * 1024)  # sparse: 5 MiB, nothing written
    directory = tmp_path / "adir"
    directory.mkdir()
    state = WorkingState()
    state.record_read(str(huge), 2.0)
    state.record_read(str(directory), 1.0)
    calls: list[str] = []

    def reader(path: str) -> str:
        calls.append(path)
        return ""

    result = rehydrate(
        state, allowed_roots=[tmp_path], read_file=reader, max_file_bytes=1024 * 1024
    )
    assert result.attachments == []
    assert calls == []
    reasons = result.skipped_reasons()
    assert reasons[str(huge)] == "too large to re-read (5,242,880 bytes)"
    assert reasons[str(directory)] == "no longer exists"


def test_injected_file_access_and_unreadable_files() -> None:
    state = WorkingState()
    state.record_read("/virtual/a.py", 2.0)
    state.record_read("/virtual/b.py", 1.0)

    def reader(path: str) -> str:
        if path.endswith("b.py"):
            raise PermissionError("denied")
        return "virtual content"

    result = rehydrate(
        state,
        allowed_roots=["/virtual"],
        read_file=reader,
        file_size=lambda path: 10,
        resolve_path=lambda path: path,
    )
    assert _files(result) == ["/virtual/a.py"]
    assert result.skipped_reasons() == {"/virtual/b.py": "unreadable: denied"}


def test_a_resolver_of_the_callers_that_gives_paths_is_read_as_before(tmp_path: Path) -> None:
    # `resolve_path` may return a `Path` (`Path.resolve`): the names are taken by
    # `os.path.basename`, which takes one, not by slicing a str.
    read = _write(tmp_path / "src" / "a.py", "print(1)\n")
    memory = _write(tmp_path / "CLAUDE.md", "# rules\n")
    state = WorkingState()
    state.record_read(read, 2.0)
    state.record_read(memory, 1.0)
    result = rehydrate(state, allowed_roots=None, resolve_path=lambda path: Path(path).resolve())
    assert _files(result) == [read]
    assert result.skipped_reasons() == {memory: "memory file (restored with the instructions)"}


def test_skills_newest_first_capped_and_budgeted() -> None:
    policy = Policy(rehydrate_tokens_per_skill=50, rehydrate_total_skill_tokens=120)
    state = WorkingState()
    state.record_skill("old", "o" * 100, invoked_at=1.0, path="/skills/old/SKILL.md")
    state.record_skill("new", "n" * 1_000, invoked_at=3.0)
    state.record_skill("mid", "m" * 100, invoked_at=2.0)
    attachment, skipped, tokens = rehydrate_skills(state, policy=policy)
    assert attachment is not None and attachment["type"] == "invoked_skills"
    names = [skill["name"] for skill in attachment["skills"]]
    assert names == ["new", "mid"]
    newest = attachment["skills"][0]
    assert newest["truncated"] is True
    assert rough_token_count(newest["content"]) <= 50
    assert "Skill truncated after compaction" in newest["content"]
    assert [(s.name, s.reason) for s in skipped] == [("old", "over the total skill budget")]
    assert tokens <= 120
    assert rehydrate_skills(WorkingState())[0] is None


def test_every_attachment_kind_in_order_and_rendered(tmp_path: Path) -> None:
    state = WorkingState(
        plan_file_path=str(tmp_path / "plan.md"),
        plan_content="1. do it",
        plan_mode=True,
        todos=[{"content": "write tests", "status": "in_progress"}],
        background_agents={
            "b": AgentState("completed", "lint the repo", result="2 warnings"),
            "a": AgentState("running", "run the test suite"),
            "c": AgentState("completed", "already reported", result_seen=True),
        },
        tool_delta="Read, Edit, Bash",
        mcp_instructions_delta="github: use search_issues first",
    )
    state.record_read(_write(tmp_path / "main.py", "print(1)\n"), 1.0)
    state.record_skill("pdf", "Use pdftotext.", 1.0)
    result = rehydrate(state, allowed_roots=[tmp_path])
    kinds = [a["type"] for a in result.attachments]
    assert kinds == [
        "file",
        "todo",
        "plan_file_reference",
        "plan_mode",
        "invoked_skills",
        "agent_status",
        "agent_status",
        "tool_delta",
        "mcp_instructions_delta",
    ]
    todo = result.attachments[1]
    assert todo == {
        "type": "todo",
        "content": state.todos,
        "itemCount": 1,
        "context": "post-compact",
    }
    agents = [a for a in result.attachments if a["type"] == "agent_status"]
    assert [a["agentId"] for a in agents] == ["a", "b"]
    rendered = {
        a["type"]: attachment_to_content(a)[0]["text"]
        for a in result.attachments
        if a["type"] != "agent_status"
    }
    assert (
        "### Skill: pdf" in rendered["invoked_skills"]
        and "Use pdftotext." in rendered["invoked_skills"]
    )
    assert rendered["tool_delta"].startswith(
        "<system-reminder>\nTools available now:\nRead, Edit, Bash"
    )
    assert "github: use search_issues first" in rendered["mcp_instructions_delta"]
    agent_text = attachment_to_content(agents[1])[0]["text"]
    assert "Background agent b (lint the repo) is completed. Do not start it again." in agent_text
    assert "Result: 2 warnings" in agent_text


def test_empty_state_gives_nothing() -> None:
    result = rehydrate(WorkingState(), allowed_roots=["/"])
    assert result.attachments == [] and result.skipped == []


def test_deterministic(tmp_path: Path) -> None:
    state = WorkingState()
    for name in ("b.py", "a.py", "c.py"):
        state.record_read(_write(tmp_path / name, name), 1.0)  # same time: ordered by path
    first = rehydrate(state, allowed_roots=[tmp_path])
    second = rehydrate(state, allowed_roots=[tmp_path])
    assert first == second
    assert _files(first) == [str(tmp_path / n) for n in ("a.py", "b.py", "c.py")]


@pytest.mark.parametrize(("text", "limit", "cut"), [("short", 10, False), ("a\n" * 100, 10, True)])
def test_truncate_to_tokens(text: str, limit: int, cut: bool) -> None:
    result, truncated = truncate_to_tokens(text, limit, "[cut]")
    assert truncated is cut
    assert rough_token_count(result) <= max(limit, rough_token_count(text) if not cut else limit)
    if cut:
        assert result.endswith("\n\n[cut]")


def test_working_state_from_the_fixture(session_2_1: Path) -> None:
    from unbounded import load_transcript
    from unbounded.compaction.facts import compaction_points

    (point,) = compaction_points(load_transcript(session_2_1).main_thread())
    state = working_state_from_entries(point.before)
    assert list(state.files_read) == ["/work/demo/cli.py", "/work/demo/test_cli.py"]
    # cli.py was read, then edited: its time is the edit's
    assert (
        state.files_read["/work/demo/cli.py"].read_at
        > state.files_read["/work/demo/test_cli.py"].read_at
    )
    assert state.todos == [
        {"content": "Add --verbose", "status": "completed"},
        {"content": "Run the tests", "status": "in_progress"},
    ]
    assert state.plan_file_path is None and state.plan_mode is False


def _tool(entry_id: str, name: str, **tool_input: Any) -> Entry:
    return Entry.assistant(
        [{"type": "tool_use", "id": entry_id, "name": name, "input": tool_input}],
        timestamp=f"2026-03-01T10:00:{len(entry_id):02d}.000Z",
    )


def _answer(entry_id: str, text: str) -> Entry:
    return Entry.user([{"type": "tool_result", "tool_use_id": entry_id, "content": text}])


def test_working_state_stubs_plan_and_skills() -> None:
    entries = [
        _tool("r", "Read", file_path="/p/a.py"),
        _answer("r", "code"),
        _tool("rr", "Read", file_path="/p/a.py"),
        _answer("rr", "File unchanged since last read. The content from the earlier Read …"),
        _tool("eee", "EnterPlanMode"),
        _answer("eee", "Entered plan mode."),
        _tool("wwww", "Write", file_path="/home/u/.claude/plans/p.md", content="# draft"),
        _answer("wwww", "ok"),
        _tool("sssss", "Skill", skill="pdf"),
        _answer("sssss", "Launching skill: pdf"),
        Entry.user(
            [{"type": "text", "text": "Base directory for this skill: /s/pdf\n\nUse pdftotext."}],
            is_meta=True,
        ),
        _tool("xxxxxx", "ExitPlanMode", plan="# final plan"),
        _answer("xxxxxx", "approved"),
    ]
    state = working_state_from_entries(entries)
    assert state.files_read["/p/a.py"].unchanged_stub is True
    assert state.plan_file_path == "/home/u/.claude/plans/p.md"
    assert state.plan_content == "# final plan"
    assert state.plan_mode is False
    assert state.invoked_skills["pdf"].content.endswith("Use pdftotext.")
    plan_only = working_state_from_entries(entries[:6])
    assert plan_only.plan_mode is True


def test_make_rehydrator_is_the_orchestrator_callback(tmp_path: Path) -> None:
    state = WorkingState()
    kept_path = _write(tmp_path / "kept.py", "k")
    state.record_read(_write(tmp_path / "a.py", "a"), 2.0)
    state.record_read(kept_path, 1.0)
    callback = make_rehydrator(state, allowed_roots=[tmp_path], policy=Policy())
    kept = [
        Entry.assistant(
            [{"type": "tool_use", "id": "1", "name": "Read", "input": {"file_path": kept_path}}]
        )
    ]
    attachments, skipped = callback(kept)
    assert [a["filename"] for a in attachments] == [str(tmp_path / "a.py")]
    assert skipped == [f"file {kept_path}: already read in a kept message"]


def test_the_readers_of_a_growing_transcript_equal_a_fresh_read(session_2_1: Path) -> None:
    """What a session's compactions read of its transcript, each entry once, is what reading
    the whole transcript again would give, at every length (and after a list replaced)."""
    from unbounded.compaction.glue import RecordedState, session_roots
    from unbounded.compaction.recorded_files import recorded_files
    from unbounded.transcripts.loader import load_transcript

    entries = load_transcript(session_2_1).main_thread()
    recorded = RecordedState()
    grown: list[Entry] = []
    for end in range(0, len(entries) + 1, 7):
        grown.extend(entries[len(grown) : end])
        assert recorded.working.read(grown) == working_state_from_entries(grown)
        assert recorded.files.read(grown) == recorded_files(grown)
        assert recorded.roots(grown) == session_roots(grown)
    shorter = grown[: len(grown) // 2]  # another list: read from its start
    assert recorded.working.read(shorter) == working_state_from_entries(shorter)
    assert recorded.files.read(shorter) == recorded_files(shorter)


@pytest.mark.skipif(os.name != "posix", reason="the directory rule follows posixpath's walk")
def test_paths_resolved_by_directory_are_realpath(tmp_path: Path) -> None:
    """Each directory resolved once gives what `os.path.realpath` gives the whole path: file
    and directory links, relative and absolute targets, dangling links, a loop, missing names,
    ".", ".." and doubled separators."""
    from unbounded.compaction.rehydrate import _realpath_by_directory

    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (real / "a.py").write_text("a")
    (real / "sub" / "b.py").write_text("b")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.py").write_text("c")
    (real / "link.py").symlink_to("sub/b.py")  # a file link, relative target
    (real / "abs.py").symlink_to(tmp_path / "elsewhere" / "c.py")
    (real / "dangling.py").symlink_to("nowhere.py")
    (real / "dir").symlink_to(tmp_path / "elsewhere")  # a directory link
    (real / "up").symlink_to("..")
    (real / "loop").symlink_to("loop")
    (real / "sub" / "parent").symlink_to(real / "dir")
    base = str(tmp_path)
    paths = [
        f"{base}/real/a.py",
        f"{base}/real/sub/b.py",
        f"{base}/real/link.py",
        f"{base}/real/abs.py",
        f"{base}/real/dangling.py",
        f"{base}/real/missing.py",
        f"{base}/real/dir/c.py",
        f"{base}/real/dir/..",
        f"{base}/real/dir/../real/a.py",
        f"{base}/real/sub/parent/../a.py",
        f"{base}/real/sub/parent/c.py",
        f"{base}/real/up/real/a.py",
        f"{base}/real/loop/a.py",
        f"{base}/real/./a.py",
        f"{base}/real//a.py",
        f"{base}/real/sub/",
        f"{base}/real/sub/.",
        f"{base}/real/sub/./b.py",
        "/",
        "/nonexistent-root-name",
        "relative/a.py",
        f"{base}/gone/a.py",  # a directory that does not exist
        f"{base}/gone/deeper/a.py",
        f"{base}/real/a.py/x.py",  # a "directory" that is a file
        f"{base}/real/dir/gone/a.py",  # missing, under a directory link
        f"{base}/real/dangling.py/a.py",  # under a dangling link
        f"{base}/real/loop/x/a.py",
    ]
    resolve = _realpath_by_directory()
    for _ in range(2):  # the second time from the directories it kept
        assert [resolve(p) for p in paths] == [os.path.realpath(p) for p in paths]


def test_names_in_a_missing_directory_are_not_looked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paths recorded on another machine: their directory is missing (or is a file), so
    none of its names can be a link, and none is looked up (one lstat per name in a
    directory that exists)."""
    from unbounded.compaction.rehydrate import _realpath_by_directory

    (tmp_path / "here").mkdir()
    looked: list[str] = []
    real_lstat = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        looked.append(str(path))
        return real_lstat(path, *args, **kwargs)

    (tmp_path / "here" / "file.txt").write_text("not a directory")
    gone = [f"{tmp_path}/gone/m{i}.py" for i in range(5)] + [f"{tmp_path}/here/file.txt/m.py"]
    here = [f"{tmp_path}/here/m{i}.py" for i in range(3)]
    expected = [os.path.realpath(p) for p in gone + here]
    resolve = _realpath_by_directory()
    monkeypatch.setattr(os, "lstat", lstat)
    resolved = [resolve(p) for p in gone + here]
    monkeypatch.undo()
    assert resolved == expected
    assert [p for p in looked if p.endswith(".py")] == here
