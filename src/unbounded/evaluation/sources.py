"""Where `unbounded replay` finds a session when it is given none: the newest one on this
machine, from Claude Code (`~/.claude/projects`) or Codex CLI (`$CODEX_HOME/sessions`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path


def claude_projects_dir(home: Path | None = None) -> Path:
    """Claude Code's sessions folder: `~/.claude/projects`."""
    return (home or Path.home()) / ".claude" / "projects"


def codex_sessions_dir(home: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """Codex CLI's sessions folder: `$CODEX_HOME/sessions`, `~/.codex/sessions` by default."""
    env = os.environ if environ is None else environ
    codex_home = env.get("CODEX_HOME")
    base = Path(codex_home).expanduser() if codex_home else (home or Path.home()) / ".codex"
    return base / "sessions"


def _newest(candidates: Iterable[Path]) -> Path | None:
    """The most recently modified file among candidates (ties: the greater path)."""
    best: tuple[float, str] | None = None
    found: Path | None = None
    for candidate in candidates:
        try:
            if not candidate.is_file():
                continue
            stamp = candidate.stat().st_mtime
        except OSError:
            continue
        key = (stamp, str(candidate))
        if best is None or key > best:
            best, found = key, candidate
    return found


def latest_claude_session(projects: Path) -> Path | None:
    """The most recently modified Claude Code session under `projects` (sub-agent
    `agent-*.jsonl` files are skipped), or None when there is none."""
    if not projects.is_dir():
        return None
    return _newest(p for p in projects.glob("*/*.jsonl") if not p.name.startswith("agent-"))


def latest_codex_session(sessions: Path) -> Path | None:
    """The most recently modified Codex rollout (`YYYY/MM/DD/rollout-*.jsonl`) under
    `sessions`, or None when there is none."""
    if not sessions.is_dir():
        return None
    return _newest(sessions.rglob("rollout-*.jsonl"))


def latest_session(
    home: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The newest session on this machine, Claude Code's or Codex CLI's, or None."""
    found = [
        latest_claude_session(claude_projects_dir(home)),
        latest_codex_session(codex_sessions_dir(home, environ)),
    ]
    return _newest(p for p in found if p is not None)


def sessions_newest_first(
    home: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """Every session on this machine, Claude Code's and Codex CLI's, the newest first (the
    files `latest_session` chooses among)."""
    projects = claude_projects_dir(home)
    sessions = codex_sessions_dir(home, environ)
    candidates: list[Path] = []
    if projects.is_dir():
        candidates += [p for p in projects.glob("*/*.jsonl") if not p.name.startswith("agent-")]
    if sessions.is_dir():
        candidates += list(sessions.rglob("rollout-*.jsonl"))
    stamped: list[tuple[float, str, Path]] = []
    for candidate in candidates:
        try:
            if candidate.is_file():
                stamped.append((candidate.stat().st_mtime, str(candidate), candidate))
        except OSError:
            continue
    return [path for _, _, path in sorted(stamped, reverse=True)]
