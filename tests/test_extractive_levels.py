"""Each level of the offline summary shows exactly as much as its figures say: a conversation
with more of everything than any level shows (tests/helpers/saturated_scenario.py), rendered
at every level, has the size of each section recorded in tests/fixtures/handover/.

Any figure of a level one more or one less changes a section by a line or a character. After
a deliberate change to the levels, check the new sizes, then write them with
`UNBOUNDED_UPDATE_GOLDEN=1 pytest tests/test_extractive_levels.py` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from saturated_scenario import saturated

from unbounded.compaction.extractive import _LEVELS, _Cuts, _Renderer
from unbounded.compaction.handover import read_handover

SHAPES = Path(__file__).resolve().parent / "fixtures" / "handover" / "saturated_shapes.json"
_SECTION = re.compile(r"^\d+\. ", re.M)


def _shape(text: str) -> dict[str, list[int]]:
    """Each numbered section's heading with its lines and characters."""
    starts = [m.start() for m in _SECTION.finditer(text)]
    assert len(starts) >= 9, "a summary has its nine sections"
    shape: dict[str, list[int]] = {}
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        section = text[begin:end]
        shape[section.split("\n", 1)[0]] = [section.count("\n"), len(section)]
    return shape


def _shapes() -> dict[str, dict[str, list[int]]]:
    shapes = {}
    for wide in (True, False):
        renderer = _Renderer(read_handover(saturated(wide)), up_to=False)
        for number, level in enumerate(_LEVELS):
            shapes[f"{'wide' if wide else 'narrow'} level {number}"] = _shape(renderer.render(level, _Cuts()))
    return shapes


def test_every_level_shows_what_its_figures_say() -> None:
    shapes = _shapes()
    if os.environ.get("UNBOUNDED_UPDATE_GOLDEN"):
        SHAPES.write_text(json.dumps(shapes, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert shapes == json.loads(SHAPES.read_text(encoding="utf-8"))


def test_the_scenario_overflows_every_level() -> None:
    # The richest level cuts every list and quote the scenario holds: its sections grow
    # when a figure grows, which is what makes the sizes above hold the figures.
    renderer = _Renderer(read_handover(saturated(True)), up_to=False)
    wide = renderer.render(_LEVELS[0], _Cuts())
    assert "earlier errors not shown" in wide and "more lines)" in wide
    assert re.search(r"The last \d+ steps as they happened \(newest last; the \d+ earlier", wide)
    # The agent's latest words older than the last steps: without those, all of them.
    older = renderer.render(replace(_LEVELS[0], recent_chars=0), _Cuts())
    latest = older.split("The agent's latest words (newest last):\n", 1)[1]
    words = re.findall(r"^   - \((?:\d+ tool call\(s\) ago|its last message)\) ", latest, re.M)
    assert len(words) == _LEVELS[0].reports


@pytest.mark.parametrize("wide", [True, False])
def test_a_leaner_level_is_shorter(wide: bool) -> None:
    renderer = _Renderer(read_handover(saturated(wide)), up_to=False)
    sizes = [len(renderer.render(level, _Cuts())) for level in _LEVELS]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
