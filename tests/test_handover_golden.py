"""The offline hand-over of one conversation that uses every part of it, word for word, at the
richest and the leanest level, as a partial (`up_to`) summary, and as offline notes.

The expected texts are in tests/fixtures/handover/. After a deliberate change to the
hand-over, read the new texts, then write them with `UNBOUNDED_UPDATE_GOLDEN=1 pytest
tests/test_handover_golden.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from handover_scenario import scenario

from unbounded.compaction.extractive import _LEVELS, _Cuts, _Renderer
from unbounded.compaction.handover import read_handover
from unbounded.compaction.offline_notes import offline_notes
from unbounded.policy import Policy

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "handover"
RICH, MID, _, LEANEST = _LEVELS


def _render(level_name: str) -> str:
    if level_name == "notes":
        return offline_notes(None, scenario(), policy=Policy())
    level = {"rich": RICH, "leanest": LEANEST, "up_to": MID}[level_name]
    renderer = _Renderer(read_handover(scenario()), up_to=level_name == "up_to")
    return renderer.render(level, _Cuts())


@pytest.mark.parametrize("name", ["rich", "leanest", "up_to", "notes"])
def test_the_hand_over_of_the_scenario_word_for_word(name: str) -> None:
    path = GOLDEN / f"scenario_{name}.txt"
    text = _render(name)
    if os.environ.get("UNBOUNDED_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
