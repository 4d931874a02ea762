"""`ToolCall` compares equal field by field (every field but `source`), as the dataclass did."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.model.entries import Entry
from unbounded.recall import ToolCall
from unbounded.recall.index import _FIELDS

BASE: dict[str, Any] = {
    "id": "toolu_1",
    "name": "Read",
    "use_position": 4,
    "read_path": "src/a.py",
    "write_path": None,
    "command": None,
    "use_block": 1,
    "number": 2,
    "result_position": 5,
    "result_block": 0,
    "result_tokens": 120,
    "is_error": False,
    "transcript_id": "",
}

OTHER: dict[str, Any] = {
    "id": "toolu_2",
    "name": "Bash",
    "use_position": 7,
    "read_path": "src/b.py",
    "write_path": "src/a.py",
    "command": "make test",
    "use_block": 0,
    "number": 3,
    "result_position": None,
    "result_block": 2,
    "result_tokens": 121,
    "is_error": True,
    "transcript_id": "toolu_1",
}
"""For each field, a value other than BASE's."""


def test_every_field_has_another_value_here() -> None:
    # A field added to ToolCall needs a row here, or its equality goes untested.
    assert list(BASE) == list(_FIELDS) == list(OTHER)


@pytest.mark.parametrize("field", _FIELDS)
def test_calls_that_differ_in_one_field_compare_unequal(field: str) -> None:
    base = ToolCall(**BASE)
    changed = ToolCall(**{**BASE, field: OTHER[field]})
    assert getattr(changed, field) == OTHER[field] != getattr(base, field)
    assert base != changed and changed != base
    assert not base == changed  # noqa: SIM201  # __eq__ itself, not only __ne__


def test_calls_with_the_same_fields_compare_equal_whatever_their_source() -> None:
    source = [Entry.user("read a.py")]
    one, two = ToolCall(**BASE), ToolCall(**BASE, source=source)
    assert one == two and two == one
    assert one != object() and one != BASE


def test_a_call_is_not_hashable() -> None:
    # Equal by value while its result may still arrive: a hash could change under a set.
    with pytest.raises(TypeError):
        hash(ToolCall(**BASE))
