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
    code_names,
    definition_body,
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


def test_code_names_are_those_written_as_code() -> None:
    names = code_names("The project loads `rows` with load_rows, then fetch(url) and parseRows.")
    assert {"rows", "load_rows", "fetch", "parseRows"} <= names
    assert "project" not in names
    assert "loads" not in names


CLASS_READ = "\n".join(
    f"{n:>6}→{line}"
    for n, line in enumerate(
        [
            "class Store:",
            "    def load(self, path):",
            "        return open(path).read()",
            "",
            "    def save(self, path, text):",
            "        with open(path, 'w') as out:",
            "            out.write(text)",
            "",
            "def main():",
            "    Store().save('a', 'b')",
        ],
        1,
    )
)


def test_the_definition_the_agent_named_last_is_shown_whole_up_to_the_next() -> None:
    said = ["First `load` the rows.", "Now I will change `save` to return the size."]
    name, body = definition_body(CLASS_READ, said, 15, 900)
    assert name == "save"
    # Up to `main`, the next definition as little indented; the blank line before it dropped.
    assert body == [
        "    5:     def save(self, path, text):",
        "    6:         with open(path, 'w') as out:",
        "    7:             out.write(text)",
    ]
    assert definition_body(CLASS_READ, ["Nothing named here."], 15, 900) == ("", [])
    # The class's own body runs to `main`, past its methods.
    assert len(definition_body(CLASS_READ, ["the `Store` class"], 15, 900)[1]) == 7


def test_section_3_shows_the_body_of_what_the_agent_named_after_reading_it() -> None:
    messages = [
        user("make save return the size"),
        *read("r1", "/w/app/store.py", CLASS_READ),
        says("I will change `save` to return the size."),
    ]
    files = _files(_Renderer(read_handover(messages), up_to=False).render(_LEVELS[0], _Cuts()))
    assert "`save` as read (the agent's words since name it):" in files
    assert "    7:             out.write(text)" in files
    # Named only before the read: not what the agent goes on with after it.
    before = [user("make save return the size"), says("I will change `save`."), *read("r1", "/w/app/store.py", CLASS_READ)]
    assert "as read (the agent" not in _files(_Renderer(read_handover(before), up_to=False).render(_LEVELS[0], _Cuts()))
