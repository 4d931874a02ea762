"""`unbounded inspect`'s "Top tools" table: most tokens first, ties in name order on every run."""

from __future__ import annotations

from unbounded.cli.inspect_command import ranked_tools


def test_tools_rank_by_tokens_then_by_name() -> None:
    results = {"Glob": 40, "Bash": 30, "Read": 500, "Grep": 10}
    requests = {"Bash": 10, "Edit": 40, "Grep": 30}
    # Bash 40, Glob 40, Edit 40, Grep 40 tie: name order, whatever order the sets gave.
    assert ranked_tools(results, requests) == ["Read", "Bash", "Edit", "Glob", "Grep"]


def test_a_tool_seen_only_in_requests_is_ranked() -> None:
    assert ranked_tools({"Read": 5}, {"Write": 6}) == ["Write", "Read"]
