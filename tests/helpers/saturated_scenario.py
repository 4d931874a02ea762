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


def _many_kinds() -> list[Any]:
    """More tracker items, notifications, `.env` keys, searches, commands that make something,
    status files and unresolved errors than the summary shows, and a command one character
    longer than is shown whole."""
    messages: list[Any] = [
        *bash("bl", "bd list", "\n".join(f"○ mill-{k} · Loader part {k}   [● P2 · OPEN]" for k in range(20))),
        *read("env", f"{ROOT}/.env", "\n".join(f"{k}→KEY_{k}=value" for k in range(20))),
    ]
    for k in range(6):
        note = f"<task-notification>\n<task-id>bg{k}</task-id>\n<status>completed</status>\n<summary>Nightly build {k} passed</summary>\n</task-notification>"
        messages.append(user(note))
        messages += bash(f"s{k}", f"rg -n batch_{k} mill", f"mill/loader_{k:02}.py:3:batch_{k}")
        messages += bash(f"m{k}", f"python gen_{k}.py > out_{k}.csv", "")
    for k in range(15):
        messages += bash(f"bc{k}", f"bd close mill-{k}", "ok")
    for name in ("TODO.md", "PLAN.md", "STATUS.md"):
        messages += read(f"st{name}", f"{ROOT}/{name}", "\n".join(f"{k}→- [ ] {name} item {k}" for k in range(1, 6)))
    for k in range(4):
        # two with a line longer than any cut, two with more short lines than any level shows
        output = f"check {k} broke: " + _words("why", 90) if k < 2 else "\n".join(f"  at check_{k}.py:{j}" for j in range(20))
        messages += bash(f"u{k}", f"make check_{k}", output, error=True)
    messages += bash("long", "echo " + "y" * 296, "ok")  # 301 characters
    return messages


def saturated(wide: bool) -> list[Any]:
    """The conversation (plain API messages); the file written last has one line wider than
    any excerpt when `wide`, else more short lines than any excerpt shows."""
    spec = "\n".join(
        ["○ mill-9 · Move the loader to the new store   [● P1 · OPEN]", "Steps:"]
        + [f"- step {n}: move the batch writer part {n} and check it against the old store" for n in range(60)]
    )
    todos = [{"content": f"todo {n}: port loader part {n} " + _words("step", 60), "status": "pending"} for n in range(20)]
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
        # Flagged, with no line that says why: the failure is its first lines, more than any
        # level shows of it.
        failure = "\n".join(f"  at mill/loader_{n:02}.py:{k} in part_{n}_{k}" for k in range(20))
        messages += bash(f"f{n}", f"pytest tests/test_loader_{n}.py", failure, error=True)
        messages.append(says(f"The batch_{n} key is missing because the reader {n} drops it. I decided to keep the reader and add the key in the loader, since the old store needs it too. " + _words("reason", 80)))
        messages += bash(f"p{n}", f"pytest tests/test_loader_{n}.py -v", "\n".join(f"tests/test_loader_{n}.py::test_{k} PASSED" for k in range(30)))
        messages.append(says(_report(n)))
        messages.append(user(f"Request {n}: now the part {n} of the loader. " + _words(f"req{n}x", 400)))
    messages += _many_kinds()
    last = "DATA = [" + ", ".join(f"'batch {k}'" for k in range(300)) + "]\n" if wide else "\n".join(f"k{k} = {k}" for k in range(40))
    messages += write("wl", f"{ROOT}/mill/table.py", last)
    plan = "Next:\n\n" + "\n".join(f"{n}. `mill/writer_{n:02}.py` - move the writer of part {n} to the new store" for n in range(1, 16))
    messages += bash("g3", "git status --short", "\n".join(f" M mill/loader_{n:02}.py" for n in range(20)))
    messages.append(says("The last check before the request: " + "x" * 365))  # 400 characters
    messages.append(user("Finish the loader. " + _words("last", 900)))
    messages.append(says(plan))
    for n in range(6):  # the agent's latest words: each one line longer than any cut of it
        messages.append(says(f"Latest word {n}: " + _words(f"w{n}x", 300)))
        messages += bash(f"l{n}", f"ls mill/part_{n}", "\n".join(f"loader_{n}_{k}.py" for k in range(20)))
    return messages
