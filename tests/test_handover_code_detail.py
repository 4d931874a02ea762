"""The hand-over keeps the code an agent goes on from: the latest code of the files changed
last gets its share of the room before the last steps take the rest, and the files read last
show their definitions (signatures with line numbers), those the conversation names first."""

from __future__ import annotations

from dataclasses import replace

from conversation import edit, read, says, user

from unbounded.compaction.extractive import (
    _LEVELS,
    CODE_MIN_CHARS,
    RECENT_MIN_CHARS,
    _Cuts,
    _Renderer,
    read_definitions,
)
from unbounded.compaction.handover import read_handover

LEANEST = _LEVELS[-1]
NUMBERED = "\n".join(
    f"{n:>6}→{line}"
    for n, line in enumerate(
        ["import os", "", "def load(path):", "    return open(path).read()", "", "def save(path, text):", "    pass", "class Store:", "    pass"],
        1,
    )
)


def _files(text: str) -> str:
    return text.split("3. Files and Code Sections:")[1].split("\n4. ")[0]


def test_a_read_s_definitions_keep_their_line_numbers() -> None:
    assert read_definitions(NUMBERED, frozenset(), 8) == [
        "    3: def load(path):",
        "    6: def save(path, text):",
        "    8: class Store:",
    ]


def test_the_definitions_the_conversation_names_come_first() -> None:
    # Room for one: `save` is named, so it is shown though `load` comes first in the file.
    assert read_definitions(NUMBERED, frozenset({"save"}), 1) == ["    6: def save(path, text):", "… (2 more definitions)"]
    assert read_definitions(NUMBERED, frozenset(), 1) == ["    3: def load(path):", "… (2 more definitions)"]


def test_section_3_shows_the_definitions_of_the_files_read_last_that_define_something() -> None:
    messages = [
        user("make save write the file"),
        *read("r1", "/w/app/store.py", NUMBERED),
        *read("r2", "/w/app/notes.txt", "     1→nothing to define here"),
        says("I will change save next."),
    ]
    level = replace(_LEVELS[0], read_outlines=1)
    files = _files(_Renderer(read_handover(messages), up_to=False).render(level, _Cuts()))
    # notes.txt was read last but defines nothing: store.py is the one shown.
    assert "store.py as last read, its definitions:" in files
    assert "6: def save(path, text):" in files


NEW_CODE = "\n".join(
    ["def save(path, text):", '    """Write the text."""', "    with open(path, 'w') as out:", "        out.write(text)", "    return len(text)"]
)


def _edited(*, reading: bool = True) -> _Renderer:
    messages = [
        user("make save write the file"),
        *(read("r1", "/w/app/api.py", NUMBERED) if reading else []),
        *edit("e1", "/w/app/store.py", NEW_CODE, old="def save(path, text):\n    pass"),
    ]
    return _Renderer(read_handover(messages), up_to=False)


def test_the_lean_level_shows_the_latest_code_when_the_room_allows() -> None:
    renderer = _edited()
    bare = _files(renderer.render(LEANEST, _Cuts()))
    assert "out.write(text)" not in bare
    assert "api.py as last read" not in bare
    roomy = _files(renderer.render(LEANEST, _Cuts(), room=100_000))
    assert "out.write(text)" in roomy
    assert "api.py as last read, its definitions:" in roomy


def test_the_code_gets_no_share_of_a_room_too_small() -> None:
    renderer = _edited(reading=False)
    renderer.recent_chars = 0
    rest = len(renderer._render(LEANEST, _Cuts()))
    # Half of what the last steps' least leaves is just under the code's least: no code.
    small = rest + RECENT_MIN_CHARS + 2 * CODE_MIN_CHARS - 2
    assert "out.write(text)" not in _files(renderer.render(LEANEST, _Cuts(), room=small))
    assert "out.write(text)" in _files(renderer.render(LEANEST, _Cuts(), room=small + 2))
