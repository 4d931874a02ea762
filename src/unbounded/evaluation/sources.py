"""Where `unbounded replay` finds a session when it is given none."""

from __future__ import annotations

from pathlib import Path


def claude_projects_dir(home: Path | None = None) -> Path:
    """Claude Code's sessions folder: `~/.claude/projects`."""
    return (home or Path.home()) / ".claude" / "projects"


def latest_claude_session(projects: Path) -> Path | None:
    """The most recently modified Claude Code session under `projects` (sub-agent
    `agent-*.jsonl` files are skipped), or None when there is none."""
    if not projects.is_dir():
        return None
    best: tuple[float, str] | None = None
    found: Path | None = None
    for candidate in projects.glob("*/*.jsonl"):
        if candidate.name.startswith("agent-") or not candidate.is_file():
            continue
        try:
            stamp = candidate.stat().st_mtime
        except OSError:
            continue
        key = (stamp, str(candidate))
        if best is None or key > best:
            best, found = key, candidate
    return found
