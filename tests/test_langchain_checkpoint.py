"""What a checkpointer stores of the LangChain middleware's state per invoke."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")


def _turn_speed() -> Any:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "turn_speed.py"
    spec = importlib.util.spec_from_file_location("turn_speed", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_invokes_that_clear_nothing_store_only_the_turn_key_of_the_middleware() -> None:
    """`turn_speed.py --checkpoint-writes`: the archive's key is not stored again by calls
    that leave it as it was; the answer time (small) is stored by every call."""
    stored = _turn_speed().checkpoint_writes(60, invokes=2)
    assert stored["checkpoint_unbounded_bytes_per_invoke"] == 0
    # 6 model calls an invoke, each answer time stored twice (the step's write, the checkpoint).
    assert 0 < stored["checkpoint_unbounded_turn_bytes_per_invoke"] <= 12 * 64
    assert stored["checkpoint_messages_bytes_per_invoke"] > 0
