"""One conversation with more of everything than the richest level of the offline summary
shows: every list longer than its longest count, every text longer than its longest cut, so
any change to a level's figures changes the summary."""

from __future__ import annotations

from typing import Any

from conversation import bash, edit, read, result, says, use, user, write
from handover_scenario import PREVIOUS

ROOT = "/home/dev/mill"
SECTIONS = {4: "Errors and fixes", 2: "Key Technical Concepts", 3: "Files and Code Sections", 7: "Pending Tasks", 5: "Problem Solving"}


def _words(seed: str, count: int) -> str:
    return " ".join(f"{seed}{n}" for n in range(count))


def _previous() -> str:
    """A previous summary whose carried sections are each longer than the richest share."""
    lines = PREVIOUS.splitlines()[:2]
    lines += ["1. Primary Request and Intent:", "   " + _words("intent", 400)]
    for number in sorted(SECTIONS):
        lines.append(f"{number}. {SECTIONS[number]}:")
        lines.extend(f"   - item {n} of section {number}: {_words('carried', 20)}" for n in range(40))
    return "\n".join(lines)


def _report(n: int) -> str:
    head = f"Report {n}: the loader step {n} is finished and its tests pass."
    body = [f"Line {k} of report {n} says the batch {k} was moved to the new store. " * 2 for k in range(30)]
    return "\n".join([head, *body])


def saturated(wide: bool) -> list[Any]:
    """The conversation (plain API messages); the file written last has one line wider than
    any excerpt when `wide`, else more short lines than any excerpt shows."""
    spec = "\n".join(
        ["○ mill-9 · Move the loader to the new store   [● P1 · OPEN]", "Steps:"]
        + [f"- step {n}: move the batch writer part {n} and check it against the old store" for n in range(60)]
    )
    todos = [{"content": f"todo {n}: port loader part {n}", "status": "pending"} for n in range(20)]
    messages: list[Any] = [
        user(_previous()),
        user("Move the loader to the new store. " + _words("first", 700)),
        *bash("t0", "bd show mill-9", spec),
        *bash("t1", "bd update mill-9 --status in_progress", "✓ Updated issue: mill-9"),
        use("td", "TodoWrite", todos=todos),
        result("td", "ok"),
    ]
    for n in range(20):
        code = "\n".join(f"def part_{n}_{k}(rows):\n    return [row for row in rows if row.batch == {k}]" for k in range(30))
        messages += read(f"r{n}", f"{ROOT}/mill/reader_{n:02}.py", "\n".join(f"{k}→line {k} of reader {n}" for k in range(40)))
        messages += write(f"w{n}", f"{ROOT}/mill/loader_{n:02}.py", code)
        messages += edit(f"e{n}", f"{ROOT}/mill/store_{n:02}.py", f"STORE_{n} = 'new'\n" * 3)
        failure = "\n".join(f"FAILED tests/test_loader_{n}.py::test_batch_{k} - KeyError: 'batch_{k}'" for k in range(20))
        messages += bash(f"f{n}", f"pytest tests/test_loader_{n}.py", failure, error=True)
        messages.append(says(f"The batch_{n} key is missing because the reader {n} drops it. I decided to keep the reader and add the key in the loader, since the old store needs it too. " + _words("reason", 80)))
        messages += bash(f"p{n}", f"pytest tests/test_loader_{n}.py -v", "\n".join(f"tests/test_loader_{n}.py::test_{k} PASSED" for k in range(30)))
        messages.append(says(_report(n)))
        messages.append(user(f"Request {n}: now the part {n} of the loader. " + _words(f"req{n}x", 400)))
    last = "DATA = [" + ", ".join(f"'batch {k}'" for k in range(300)) + "]\n" if wide else "\n".join(f"k{k} = {k}" for k in range(40))
    messages += write("wl", f"{ROOT}/mill/table.py", last)
    plan = "Next:\n\n" + "\n".join(f"{n}. **Part {n}** - move the writer of part {n} to the new store" for n in range(1, 16))
    messages.append(says(plan))
    messages += bash("g3", "git status --short", "\n".join(f" M mill/loader_{n:02}.py" for n in range(20)))
    messages.append(user("Finish the loader. " + _words("last", 900)))
    for n in range(6):  # the agent's latest words: each one line longer than any cut of it
        messages.append(says(f"Latest word {n}: " + _words(f"w{n}x", 300)))
        messages += bash(f"l{n}", f"ls mill/part_{n}", "\n".join(f"loader_{n}_{k}.py" for k in range(20)))
    return messages
