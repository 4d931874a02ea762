"""Review rev17c: regressions and bugs found in the merged i37g (shell files, envelopes) and
i37h (offline hand-over) work, each pinned as a strict xfail until it is fixed."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from conversation import bash, read, result, says, use, user, write

from unbounded.compaction.extractive import DEFAULT_MAX_SUMMARY_TOKENS, extractive_summary
from unbounded.compaction.handover import approves, read_handover
from unbounded.compaction.recorded_files import recorded_files
from unbounded.model import shell_files
from unbounded.model.entries import Entry
from unbounded.model.shell_files import heredoc_writes, in_place_edits, parse_patch, shell_reads
from unbounded.tokens.estimate import rough_token_count

_ids = itertools.count()


def _envelope(output: str, code: int) -> str:
    return json.dumps({"output": output, "metadata": {"exit_code": code, "duration_seconds": 1}})


def _call(command: str, output: str) -> list[Entry]:
    call_id = f"call_{next(_ids)}"
    use = Entry.assistant(
        [{"type": "tool_use", "id": call_id, "name": "shell", "input": {"command": command}}]
    )
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    return [use, Entry.user([result])]


# -- shell reads and writes ----------------------------------------------------------------


def test_a_cat_into_dev_null_is_no_read_of_the_file() -> None:
    entries = [
        *_call("cat app.py", _envelope("x = 1\n", 0)),
        *_call("cat app.py >/dev/null", _envelope("", 0)),
    ]
    assert recorded_files(entries)["app.py"].text == "x = 1\n"


def test_a_here_document_write_after_cd_is_not_a_write_of_the_relative_path() -> None:
    entries = [
        *_call("cat app.py", _envelope("x = 1\n", 0)),
        *_call("cd sub && cat > app.py << 'EOF'\nother\nEOF", _envelope("", 0)),
    ]
    assert recorded_files(entries)["app.py"].text == "x = 1\n"


def test_a_sed_in_place_after_cd_leaves_the_relative_path_alone() -> None:
    assert in_place_edits("cd sub && sed -i 's/a/b/' app.py") == ()


def test_a_tab_stripping_here_document_writes_the_body_without_leading_tabs() -> None:
    (written,) = heredoc_writes("cat > f.py <<-EOF\n\tx = 1\n\tEOF\n")
    assert written.text == "x = 1\n"


def test_an_unquoted_here_document_with_expansions_is_no_known_text() -> None:
    (written,) = heredoc_writes("cat > env.txt << EOF\nhome=$HOME\nEOF\n")
    assert written.text != "home=$HOME\n"


def test_a_hunk_replaces_whole_lines_not_a_line_s_tail() -> None:
    (update,) = parse_patch(
        "*** Begin Patch\n*** Update File: f.py\n@@\n-b = 1\n+b = 2\n*** End Patch"
    )
    assert update.applied_to("ab = 1\nb = 1\n") == "ab = 1\nb = 2\n"


def test_a_hunk_is_placed_after_its_context_header() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: f.py\n@@ def g():\n-    return x\n+    return y\n"
        "*** End Patch"
    )
    (update,) = parse_patch(patch)
    before = "def f():\n    return x\ndef g():\n    return x\n"
    assert update.applied_to(before) == "def f():\n    return x\ndef g():\n    return y\n"


def test_a_patch_whose_command_exited_non_zero_changes_nothing() -> None:
    patch = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    entries = [
        *_call("cat app.py", _envelope("x = 1\n", 0)),
        *_call(
            f"apply_patch << 'PATCH'\n{patch}\nPATCH",
            "Exit code: 1\nOutput:\nFailed to find expected lines in app.py",
        ),
    ]
    assert recorded_files(entries)["app.py"].text == "x = 1\n"


def test_the_sed_in_place_scan_splits_only_sed_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    # shlex builds each token by string concatenation: a 1 MB quoted patch argument takes
    # 25 s (0.74 MB: 6 s). Counted, not timed: no segment but a sed one reaches the splitter.
    split: list[str] = []
    real = shell_files._words

    def counting(segment: str) -> list[str] | None:
        split.append(segment)
        return real(segment)

    monkeypatch.setattr(shell_files, "_words", counting)
    body = "".join(f"+line {i}: run sed -i on it\n" for i in range(50))
    command = f"apply_patch '*** Begin Patch\n*** Add File: notes.md\n{body}*** End Patch'"
    in_place_edits.__wrapped__(command)
    assert not split


# -- the offline hand-over -------------------------------------------------------------------


def test_a_questioning_yes_approves_nothing() -> None:
    assert not approves("yes?")


def test_ok_thanks_after_a_report_of_done_work_asks_for_no_redo() -> None:
    report = (
        "Done. Here is what I changed:\n1. Added the refunds columns to shop/exporter.py\n"
        "2. Wrote tests for the export button\n3. Updated docs/export.md"
    )
    messages = [
        user("Audit the exporter."),
        *read("r", "/w/shop/exporter.py"),
        says(report),
        user("ok thanks"),
    ]
    summary = extractive_summary(messages)
    assert "Added the refunds columns" not in summary[summary.index("\n9. ") :]


def test_a_finding_stays_when_a_later_file_only_uses_the_name_it_mentions() -> None:
    finding = "The `parse_config` function returns None for an empty file, which callers rely on."
    test_code = (
        "from config import parse_config\n\ndef test_x():\n    assert parse_config('a') == 1\n"
    )
    messages = [
        user("Add tests for config."),
        says(finding),
        *read("r", "/w/config.py"),
        *write("w", "/w/tests/test_other.py", test_code),
        *bash("b", "pytest", "1 passed"),
    ]
    assert [text for _, text in read_handover(messages).findings] == [finding]


def test_many_codex_commits_keep_the_summary_within_its_maximum_and_the_user_prompts() -> None:
    # Before i37g the envelope hid the commits; now each is listed and no cut shortens the
    # list: the summary passes its maximum and the user's messages are cut instead (the
    # OpenPrintKit rollout of the corpus: user-prompt retention 1.0 -> 0.09).
    messages: list[Any] = []
    for i in range(150):
        messages.append(user(f"Please implement feature number {i} of the printer toolkit."))
        text = f"feature {i}: add the printer profile generator for slicer model {i} with tests"
        output = f"[main {i:07x}] {text}\n 4 files changed, 120 insertions(+), 3 deletions(-)\n"
        messages += [
            use(f"c{i}", "shell", command=f"git commit -am '{text}'"),
            result(f"c{i}", _envelope(output, 0)),
            says(f"Committed feature {i}."),
        ]
    summary = extractive_summary(messages)
    assert rough_token_count(summary) <= DEFAULT_MAX_SUMMARY_TOKENS
    assert "feature number 70 of" in summary


def test_a_cat_next_to_another_printing_command_is_not_the_file_s_whole_text() -> None:
    entries = [
        *_call("cat app.py", _envelope("x = 1\n", 0)),
        *_call("echo start; cat app.py", _envelope("start\nx = 1\n", 0)),
    ]
    file = recorded_files(entries)["app.py"]
    assert (file.text, file.partial) in (("x = 1\n", False), ("start\nx = 1\n", True))


def test_a_backslash_quoted_here_document_body_is_no_command() -> None:
    assert shell_reads("python3 - << \\EOF\ncat app.py\nEOF") == ()


def test_a_command_left_out_of_the_last_steps_is_still_named_somewhere() -> None:
    # marot-spotter_tool_heavy of the corpus: command retention 1.0 -> 0.5. Long web results
    # fill the last steps' room; the heading says the earlier steps are "in the sections
    # above", but the `tail -5` read of the server log is in none of them.
    found = "\n".join(
        f"Result line {i}: " + "xterm.js scroll handling notes " * 6 for i in range(12)
    )
    log = "[info] Running SpotterWeb.Endpoint\n[info] Access at http://localhost:4000"
    messages = [
        user("start phoenix in background"),
        *bash("b1", "mix phx.server", "Command running in background with ID: bae407b."),
        *bash("b2", "tail -5 /tmp/tasks/bae407b.output", log),
        says("Phoenix is running on port 4000."),
        user("scrolling in xterm.js still does not work? websearch xterm.js tmux interactions"),
        use("w1", "WebSearch", query="xterm.js scroll not working"),
        result("w1", found),
        use("g1", "Glob", pattern="assets/js/**/*.js"),
        result("g1", "/w/assets/js/app.js"),
        *read("r1", "/w/assets/js/app.js", "\n".join(f"{i}→x" for i in range(1, 88))),
        use("f1", "WebFetch", url="https://github.com/xtermjs/xterm.js/issues/1343", prompt="fix"),
        result("f1", found),
    ]
    assert "tail -5" in extractive_summary(messages)


def test_a_cat_through_exec_command_records_the_file_without_its_header() -> None:
    # The Codex importer reads this header (`output_failed`); `unwrap_output` does not, so the
    # header's lines become the file's text.
    output = "Wall time: 0.0500 seconds\nProcess exited with code 0\nOutput:\nx = 1\n"
    use_block = {
        "type": "tool_use",
        "id": "u1",
        "name": "exec_command",
        "input": {"cmd": "cat app.py"},
    }
    answer = {"type": "tool_result", "tool_use_id": "u1", "content": output}
    entries = [Entry.assistant([use_block]), Entry.user([answer])]
    assert recorded_files(entries)["app.py"].text == "x = 1\n"
