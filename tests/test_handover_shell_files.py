"""The hand-over and rehydration read shell-driven agents' files: every file of a patch, a
`sed -i` edit, shell reads, unwrapped outputs, and a capped list of earlier changes."""

from __future__ import annotations

import json
from typing import Any

from conversation import edit, result, use, user

from unbounded.compaction.extractive import _LEVELS, _Cuts, _Renderer, extractive_summary
from unbounded.compaction.handover import read_handover
from unbounded.compaction.rehydrate import (
    SHELL_AGENT_TOOLS,
    rehydrate_files,
    working_state_from_entries,
)
from unbounded.model.entries import Entry

LEANEST = _LEVELS[-1]


def section(text: str, number: int) -> str:
    start = text.index(f"\n{number}. ")
    end = text.find(f"\n\n{number + 1}. ", start)
    return text[start : end if end >= 0 else len(text)]


def _codex(tool_id: str, command: str, output: str, exit_code: int = 0) -> list[dict[str, Any]]:
    """A Codex `shell` call with its JSON-wrapped output."""
    envelope = json.dumps({"output": output, "metadata": {"exit_code": exit_code}})
    return [use(tool_id, "shell", command=command), result(tool_id, envelope)]


_TWO_FILE_PATCH = (
    "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n"
    "*** Add File: src/b.py\n+def helper(value):\n+    return value\n*** End Patch\nPATCH"
)


def test_a_patch_changing_several_files_lists_each_with_the_added_file_s_definitions() -> None:
    messages = [user("Split the module."), *_codex("p", _TWO_FILE_PATCH, "Success.")]
    handover = read_handover(messages)
    assert [c.path for c in handover.changes] == ["src/a.py", "src/b.py"]
    added = next(c for c in handover.changes if c.path == "src/b.py")
    assert added.created and added.definitions == ["helper"]
    updated = next(c for c in handover.changes if c.path == "src/a.py")
    assert not updated.created
    files = section(_Renderer(handover, up_to=False).render(_LEVELS[0], _Cuts()), 3)
    assert "   - src/b.py (created; shell)\n     Defines: helper" in files
    assert "   - src/a.py (edited; shell)" in files


def test_a_sed_edit_is_a_change() -> None:
    messages = [user("Bump it."), *_codex("s", "sed -i 's/1/2/' src/version.py", "")]
    assert [c.path for c in read_handover(messages).changes] == ["src/version.py"]


def test_a_shell_read_of_a_status_file_gives_its_open_items() -> None:
    status = "# Status\n- [x] parser\n- [ ] writer\n"
    messages = [user("Go on."), *_codex("c", "cat TODO.md", status)]
    handover = read_handover(messages)
    assert handover.calls[0].paths_read == ("TODO.md",)
    assert [(s.path, s.open_items) for s in handover.status_files] == [("TODO.md", ("[ ] writer",))]


def test_outputs_are_read_and_quoted_unwrapped() -> None:
    status = "On branch feature-x\nChanges not staged for commit:\n\tmodified:   src/a.py\n"
    mini = f"<returncode>0</returncode>\n<output>\n{status}</output>"
    for wrapped in (
        [*_codex("g", "git status", status)],
        [use("g", "bash", command="git status"), result("g", mini)],
    ):
        messages = [user("Where are we?"), *wrapped]
        handover = read_handover(messages)
        assert handover.calls[0].result == status
        assert handover.branch == "feature-x"
        text = extractive_summary(messages)
        assert (
            "On branch feature-x" in text and '{"output"' not in text and "<returncode>" not in text
        )


def _many_changes(count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [user("Rename everything.")]
    for n in range(count):
        messages += edit(f"e{n}", f"/r/src/module_{n:03}.py", "x = 1")
    return messages


def test_the_earlier_changes_are_capped_newest_first() -> None:
    renderer = _Renderer(read_handover(_many_changes(40)), up_to=False)
    files = section(renderer.render(LEANEST, _Cuts()), 3)
    shown, listed = LEANEST.files, LEANEST.earlier_files
    line = next(line for line in files.splitlines() if "Also changed, earlier:" in line)
    newest_unshown = 39 - shown
    names = [f"module_{n:03}.py" for n in range(newest_unshown, newest_unshown - listed, -1)]
    assert (
        line
        == "   - Also changed, earlier: "
        + ", ".join(f"/r/src/{n}" for n in names)
        + f" ({40 - shown - listed} more)"
    )
    assert f"module_{newest_unshown - listed:03}.py" not in files


def test_the_cut_to_fit_shortens_the_earlier_changes() -> None:
    messages = _many_changes(40)
    full = extractive_summary(messages, max_tokens=100_000, target_ratio=1.0)
    # Tight enough that the file lists are cut too (the last steps go before them).
    tight = extractive_summary(messages, max_tokens=300)
    assert "Also changed, earlier:" in full
    earlier = [
        line
        for line in tight.splitlines()
        if "Also changed, earlier:" in line or line == "   - (40 more)"
    ]
    assert earlier, tight
    kept = earlier[0].count("module_")
    assert kept < LEANEST.earlier_files


# -- rehydration -------------------------------------------------------------------------------


def _call(tool_id: str, name: str, second: int, **tool_input: Any) -> Entry:
    return Entry.assistant(
        [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
        timestamp=f"2026-03-01T10:00:{second:02d}.000Z",
    )


def _answer(tool_id: str, text: str) -> Entry:
    return Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": text}])


def test_a_shell_driven_agent_s_shell_reads_are_its_reads() -> None:
    entries = [
        _call("c", "shell", 1, command="cat /p/a.py && sed -n '1,40p' /p/b.py"),
        _answer("c", "x = 1"),
        _call("m", "bash", 2, command="nl -ba /p/c.py"),
        _answer("m", "1 y = 2"),
    ]
    state = working_state_from_entries(entries)
    assert sorted(state.files_read) == ["/p/a.py", "/p/b.py", "/p/c.py"]
    assert not any(read.modified for read in state.files_read.values())


def test_claude_code_s_bash_reads_are_not_restored() -> None:
    assert (
        "Bash" not in SHELL_AGENT_TOOLS
        and {"shell", "exec_command", "bash", "execute_bash"} <= SHELL_AGENT_TOOLS
    )
    entries = [_call("b", "Bash", 1, command="cat /p/a.py"), _answer("b", "x = 1")]
    assert working_state_from_entries(entries).files_read == {}


def test_a_file_a_kept_shell_call_reads_is_not_restored() -> None:
    state = working_state_from_entries(
        [_call("c", "shell", 1, command="cat /p/a.py"), _answer("c", "x")]
    )
    kept = [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "k",
                    "name": "exec_command",
                    "input": {"cmd": "cat /p/a.py"},
                }
            ],
        }
    ]
    common: dict[str, Any] = {
        "allowed_roots": None,
        "read_file": lambda path: "x = 1",
        "file_size": lambda path: 5,
        "resolve_path": lambda path: path,
    }
    restored, _, _ = rehydrate_files(state, **common)
    assert [a["filename"] for a in restored] == ["/p/a.py"]
    restored, skipped, _ = rehydrate_files(state, kept_messages=kept, **common)
    assert restored == [] and [s.name for s in skipped] == ["/p/a.py"]


def test_a_shell_read_s_output_is_quoted_among_the_last_steps_a_file_tool_s_counted() -> None:
    messages = [
        user("Start the server."),
        use("t", "Bash", command="tail -2 /tmp/server.log"),
        result("t", "Listening on :4000\nready"),
        use("r", "Read", file_path="/w/app.py"),
        result("r", "x = 1\ny = 2"),
    ]
    eight = section(extractive_summary(messages), 8)
    assert (
        "   - Bash `tail -2 /tmp/server.log`\n     -> ok:\n       Listening on :4000\n       ready\n"
        in eight
    )
    assert "   - Read /w/app.py\n     -> ok (2 lines)" in eight
