"""The hand-over keeps the layout of the folders the agent listed (`ls`, `find`, `tree`, a
Glob or LS tool): the latest listing of each folder, read as a tree of names, shown in
section 3 compressed (names grouped by folder, sibling folders with the same names braced)."""

from __future__ import annotations

from dataclasses import replace

from conversation import bash, result, use, user

from unbounded.compaction.extractive import _LEVELS, _Cuts, _Renderer, folder_tree
from unbounded.compaction.handover import (
    Call,
    Listing,
    listed_folder,
    listing_entry,
    listing_paths,
    read_handover,
)

LS_TOOL_OUTPUT = """- /w/app/src/
  - ../
    - README.md
    - pkg/
      - api.py
      - models.py
  - main.py
"""


def _files(text: str) -> str:
    return text.split("3. Files and Code Sections:")[1].split("\n4. ")[0]


def test_a_long_listing_line_gives_its_name_and_marks_a_folder() -> None:
    assert listing_entry("drwxr-xr-x  5 me staff  160 Jan  1 12:00 components") == "components/"
    assert listing_entry("-rw-r--r--  1 me staff  512 Jan  1 12:00 app.py") == "app.py"
    assert listing_entry("total 48") is None
    assert listing_entry("3 directories, 12 files") is None
    assert listing_entry("│   ├── views.py") == "views.py"


def test_a_nested_listing_is_read_by_its_indentation() -> None:
    # `../` is the parent of the listed folder: README.md and pkg/ sit beside src/.
    paths, names = listing_paths(LS_TOOL_OUTPUT)
    assert paths == ["/w/app/src/", "/w/app/README.md", "/w/app/pkg/", "/w/app/pkg/api.py", "/w/app/pkg/models.py", "/w/app/src/main.py"]
    assert names == 7


def test_the_latest_listing_of_each_folder_is_kept_and_search_output_is_none() -> None:
    messages = [
        user("tidy the app"),
        *bash("b1", "ls src", "old.py\nmain.py"),
        *bash("b2", "ls -la docs", "total 8\n-rw-r--r--  1 me staff  51 Jan  1 12:00 guide.md"),
        *bash("b3", "ls src", "main.py\nviews.py"),
        *bash("b4", 'find . -name "*.py" -exec grep -n "def main" {} \\;', "12:def main() -> None:\n30:    main()"),
        # One name among sentences: the output of what `find` ran, not a listing.
        *bash("b5", "find lib -name notes.txt -exec cat {} +", "lib/x.py\nthe parser is slow\nfix it soon"),
    ]
    listings = read_handover(messages).listings
    assert [(item.folder, item.entries) for item in listings] == [
        ("docs", ("guide.md",)),
        ("src", ("main.py", "views.py")),
    ]


def test_a_glob_lists_the_folder_before_its_first_wildcard() -> None:
    call = Call(1, "g", "Glob", {"name": "Glob", "input": {"pattern": "tests/unit/*.py"}})
    assert listed_folder(call) == "tests/unit"
    anywhere = Call(1, "g", "Glob", {"name": "Glob", "input": {"pattern": "**/*.py", "path": "/w/app"}})
    assert listed_folder(anywhere) == "/w/app"
    shell = Call(1, "b", "Bash", {"name": "Bash", "input": {"command": "find ./lib -type f"}})
    assert listed_folder(shell) == "lib"
    tree = Call(1, "b", "Bash", {"name": "Bash", "input": {"command": "tree -L 2 src/"}})
    assert listed_folder(tree) == "src"
    assert listed_folder(Call(1, "b", "Bash", {"name": "Bash", "input": {"command": "cat a.py"}})) is None


def _listing(*entries: str, folder: str = ".") -> Listing:
    return Listing(Call(1, "b", "Bash", {}), folder, entries)


def test_a_folder_tree_groups_names_braces_siblings_and_drops_caches() -> None:
    listing = _listing(
        "/w/apps/a/mix.exs",
        "/w/apps/b/mix.exs",
        "/w/lib/app.ex",
        "/w/lib/web/",
        "/w/lib/__pycache__/app.cpython-312.pyc",
    )
    assert folder_tree(listing, "/w", 1_000) == ["apps/{a, b}/: mix.exs", "lib/: app.ex, web/"]
    # Names inside the folder listed are placed in it.
    assert folder_tree(_listing("main.py", "views.py", folder="src"), "", 1_000) == ["src/: main.py, views.py"]


def test_a_folder_tree_too_long_is_cut_after_a_name_and_counted() -> None:
    listing = _listing(*(f"src/module_{n}.py" for n in range(40)))
    lines = folder_tree(listing, "", 120)
    assert lines[0].startswith("src/: module_0.py, ") and lines[0].endswith(", …")
    assert len(lines[0]) <= 120
    assert lines[1] == "(40 names in all, not all shown)"


def test_sibling_folders_too_many_for_the_room_are_braced_a_few_and_counted() -> None:
    listing = _listing(*(f"pkg/sub_{n}/__init__.py" for n in range(50)), "README.md")
    assert folder_tree(listing, "", 120) == [
        "pkg/{sub_0, sub_1, sub_2, … 47 more}/: __init__.py",
        "./: README.md",
        "(51 names in all, not all shown)",
    ]


def test_the_layout_is_shown_in_section_3_at_every_level() -> None:
    messages = [
        user("add a view"),
        use("l1", "LS", path="/w/app/src"),
        result("l1", LS_TOOL_OUTPUT),
    ]
    renderer = _Renderer(read_handover(messages), up_to=False)
    for level in (_LEVELS[0], _LEVELS[-1]):
        files = _files(renderer.render(level, _Cuts()))
        assert "Folders as the agent last listed them" in files
        assert "pkg/: api.py, models.py" in files


def test_tool_folders_and_single_finds_show_no_layout() -> None:
    # A search for one file name across installed packages: the project's own file is one
    # name, no layout; the packages' copies are left out.
    found = _listing("/w/deps/a/mix.exs", "/w/deps/b/mix.exs", "/w/mix.exs")
    assert folder_tree(found, "/w", 1_000) == []
    assert folder_tree(_listing("/w/mix.exs", "/w/README.md"), "/w", 1_000) == ["./: mix.exs, README.md"]


def test_a_listing_without_a_layout_leaves_its_place_to_an_older_one() -> None:
    messages = [
        user("add a view"),
        *bash("b1", "ls src", "main.py\nviews.py"),
        *bash("b2", "find . -name mix.exs", "./deps/a/mix.exs\n./mix.exs"),
    ]
    level = replace(_LEVELS[-1], listings=1)
    files = _files(_Renderer(read_handover(messages), up_to=False).render(level, _Cuts()))
    assert "src/: main.py, views.py" in files
