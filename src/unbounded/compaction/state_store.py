"""Microcompaction state that survives a restart, saved in a folder the caller gives.

DESIGN.md: "State that must survive a restart is persisted in the session's folder: which tool
results were cleared, pinned cache edits…". A restarted agent that forgot which results it
cleared would send them in full again (breaking the cache and re-growing the context); one
that forgot its pinned cache edits would stop re-sending them while the server still expects
them.

`save_microcompact_state(state, folder)` writes `microcompact_state.json` there: the cleared
ids with their tokens, the cached tier's tool order, deleted refs, pinned and pending edits and
usage baselines, the compactable-tools registry and the counters. The write is atomic: a
temporary file in the same folder (created with mode 0600), flushed and fsynced, then
`os.replace`d over the old file, so a crash leaves either the old state or the new one, never
a torn file. The folder is created (mode 0700) when missing.

`load_microcompact_state(folder)` returns a fresh state when there is no file yet, and raises
`ConfigError` naming the file and the field when the file cannot be used. The tool ledger is
not saved: it is rebuilt from the messages on the next turn.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from unbounded.compaction.micro import MicrocompactState
from unbounded.compaction.tools_registry import CompactableTools
from unbounded.errors import ConfigError
from unbounded.fileio import atomic_write_json

STATE_FILE_NAME = "microcompact_state.json"
"""The file name used inside the caller's folder."""


def state_path(folder: str | Path) -> Path:
    """Where the state of this folder lives."""
    return Path(folder) / STATE_FILE_NAME


def save_microcompact_state(state: MicrocompactState, folder: str | Path) -> Path:
    """Save the state in `folder` (atomically, mode 0600); returns the file written."""
    return atomic_write_json(state_path(folder), state.to_dict())


def load_microcompact_state(
    folder: str | Path, *, tools: CompactableTools | None = None
) -> MicrocompactState:
    """The state saved in `folder`, or a fresh one when nothing was saved yet.

    `tools` overrides the saved compactable-tools registry. A file that cannot be used raises
    ConfigError naming it.
    """
    path = state_path(folder)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return MicrocompactState(tools)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    try:
        return MicrocompactState.from_dict(data, tools)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


class MicrocompactStateStore:
    """A folder holding one session's microcompaction state."""

    __slots__ = ("folder", "tools")

    def __init__(self, folder: str | Path, *, tools: CompactableTools | None = None) -> None:
        self.folder = Path(folder)
        self.tools = tools

    @property
    def path(self) -> Path:
        """The state file."""
        return state_path(self.folder)

    def load(self) -> MicrocompactState:
        """The saved state, or a fresh one."""
        return load_microcompact_state(self.folder, tools=self.tools)

    def save(self, state: MicrocompactState) -> Path:
        """Save atomically."""
        return save_microcompact_state(state, self.folder)
