"""`_inside` (a resolved path under an allowed root) against its definition by
`os.path.commonpath`, on paths with empty, ".", ".." and odd components, relative paths
and the root itself: plain paths take a prefix check instead of the call."""

from __future__ import annotations

import os
import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.compaction.rehydrate import _inside

pytestmark = pytest.mark.skipif(os.path is not posixpath, reason="the prefix rule is POSIX's")

COMPONENTS = st.sampled_from(["a", "b", "ab", "a.b", ".", "..", "", " ", "a-"])
PATHS = st.builds(
    lambda lead, parts, tail: lead + "/".join(parts) + tail,
    st.sampled_from(["/", "", "//", "./"]),
    st.lists(COMPONENTS, max_size=4),
    st.sampled_from(["", "/", "/."]),
)


def _by_definition(path: str, roots: list[str]) -> bool:
    for root in roots:
        try:
            common = os.path.commonpath([path, root])
        except ValueError:
            continue
        if common == root:
            return True
    return False


@settings(max_examples=3000, deadline=None)
@given(PATHS, st.lists(PATHS, max_size=3))
def test_inside_is_the_commonpath_rule(path: str, roots: list[str]) -> None:
    assert _inside(path, roots) == _by_definition(path, roots)


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/repo/a.py", "/repo", True),
        ("/repo", "/repo", True),
        ("/repository/a.py", "/repo", False),
        ("/a.py", "/", True),
        ("/repo/sub/a.py", "/repo/sub", True),
        ("/rep", "/repo", False),
    ],
)
def test_plain_paths(path: str, root: str, inside: bool) -> None:
    assert _inside(path, [root]) is inside
