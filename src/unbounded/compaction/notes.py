"""The session-memory notes file: its sections, parsing, size caps, and what a
compaction that uses the notes needs from them (`SessionMemory` in `session_memory` keeps
the notes up to date; `memory_compact` turns them into a summary).

The notes are markdown: one `# Title` header per section of `SECTIONS`, each followed by an
italic line describing what belongs there, then the section's lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from unbounded.errors import ConfigError
from unbounded.model.entries import Entry
from unbounded.tokens.estimate import rough_token_count

QUERY_SOURCE = "session_memory"
"""Query source of the forked update call (auto-compaction never triggers from it)."""

SECTIONS: tuple[tuple[str, str], ...] = (
    ("Session Title", "A short, specific name for this session, 5 to 10 words."),
    (
        "Current State",
        "What is being worked on right now, what is still open, and the very next step.",
    ),
    (
        "Task Specification",
        "What the user asked for, in their terms, with the constraints and design decisions "
        "agreed so far.",
    ),
    (
        "Files and Functions",
        "The files and functions that matter for the task, and why each one matters.",
    ),
    (
        "Workflow",
        "Commands that build, run and test the work, in the order they are used, and how to "
        "read their output.",
    ),
    (
        "Errors & Corrections",
        "Errors met and how each was fixed; corrections the user made and approaches that failed.",
    ),
    (
        "Codebase and System Documentation",
        "The components involved and how they fit together.",
    ),
    ("Learnings", "What worked, what did not, and what to avoid next time."),
    ("Key Results", "Results the user asked for, exactly as they were produced."),
    ("Worklog", "One short line per step taken, oldest first."),
)
"""The ten sections of the notes (title, one-line description), in file order."""
SECTION_TITLES: tuple[str, ...] = tuple(title for title, _ in SECTIONS)

_HEADER = re.compile(r"^# (.+?)\s*$")
CONDENSED_LINE = re.compile(r"^- \((\d+) earlier lines? condensed away\)$")


def session_memory_template() -> str:
    """The notes file of a session that has noted nothing yet."""
    return "\n\n".join(f"# {title}\n_{description}_" for title, description in SECTIONS) + "\n"


# -- parsing and rendering ------------------------------------------------------------------


@dataclass(slots=True)
class NotesSection:
    """One `# Title` section of the notes: its italic description line and its body lines."""

    title: str
    description: str | None
    body: list[str] = field(default_factory=list)

    @property
    def body_text(self) -> str:
        """The body as text (no surrounding blank lines)."""
        return "\n".join(self.body).strip("\n")

    def render(self) -> str:
        """`# Title`, the description, a blank line and the body."""
        lines = [f"# {self.title}"]
        if self.description is not None:
            lines.append(self.description)
        text = self.body_text
        if text.strip():
            lines.extend(["", text])
        return "\n".join(lines)


@dataclass(slots=True)
class ParsedNotes:
    """The notes split into sections; text before the first header is the preamble."""

    preamble: str
    sections: list[NotesSection]

    def get(self, title: str) -> NotesSection | None:
        """The section with this title (first match), or None."""
        return next((s for s in self.sections if s.title == title), None)

    def render(self) -> str:
        """The notes as markdown again (a template renders byte-identically)."""
        parts = [self.preamble.strip("\n")] if self.preamble.strip() else []
        parts.extend(section.render() for section in self.sections)
        return "\n\n".join(parts) + "\n"


def _is_description(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= 2 and stripped.startswith("_") and stripped.endswith("_")


def parse_notes(text: str) -> ParsedNotes:
    """Split notes at `# ` headers; the italic line right under a header is its description."""
    preamble: list[str] = []
    sections: list[NotesSection] = []
    current: NotesSection | None = None
    expect_description = False
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            current = NotesSection(match.group(1), None)
            sections.append(current)
            expect_description = True
            continue
        if current is None:
            preamble.append(line)
            continue
        if expect_description and line.strip():
            expect_description = False
            if _is_description(line):
                current.description = line.strip()
                continue
        current.body.append(line)
    for section in sections:
        while section.body and not section.body[0].strip():
            section.body.pop(0)
        while section.body and not section.body[-1].strip():
            section.body.pop()
    return ParsedNotes("\n".join(preamble), sections)


def notes_are_empty(text: str | None) -> bool:
    """No notes, or nothing written under any header (the bare template)."""
    if text is None or not text.strip():
        return True
    parsed = parse_notes(text)
    if parsed.preamble.strip():
        return False
    return all(not section.body_text.strip() for section in parsed.sections)


def missing_sections(text: str) -> list[str]:
    """Template section titles the notes no longer have."""
    present = {section.title for section in parse_notes(text).sections}
    return [title for title in SECTION_TITLES if title not in present]


def section_tokens(text: str) -> dict[str, int]:
    """Rough tokens of each section (header and description included), by title."""
    return {s.title: rough_token_count(s.render()) for s in parse_notes(text).sections}


def size_reminders(text: str, *, section_cap: int, total_cap: int) -> list[str]:
    """The condense reminders the update prompt carries for sections and a file over cap."""
    sizes = section_tokens(text)
    reminders = [
        f'- The section "{title}" is about {tokens:,} tokens, over its {section_cap:,}-token '
        "limit: condense it now (merge related lines, drop what no longer matters, keep the "
        "recent specifics)."
        for title, tokens in sizes.items()
        if tokens > section_cap
    ]
    total = rough_token_count(text)
    if total > total_cap:
        longest = sorted(sizes, key=lambda title: -sizes[title])[:3]
        reminders.append(
            f"- CRITICAL: the notes are about {total:,} tokens, above the {total_cap:,}-token "
            "limit for the whole file. Shorten them hard in this update, starting with the "
            "longest sections (" + ", ".join(longest) + ")."
        )
    return reminders


def truncate_notes_for_compact(
    text: str, *, max_section_chars: int, notes_path: str | None = None
) -> tuple[str, bool]:
    """The notes with each section body cut to `max_section_chars`, for a compaction summary.

    Headers and description lines are kept; a cut body ends with a marker, and a last line
    says where the complete notes are. Returns the text and whether anything was cut.
    """
    if max_section_chars <= 0:
        raise ConfigError("max_section_chars must be > 0")
    parsed = parse_notes(text)
    truncated = False
    preamble = parsed.preamble
    if len(preamble) > max_section_chars:
        preamble = _cut_at_line(preamble, max_section_chars) + "\n[… cut here]"
        truncated = True
    sections: list[NotesSection] = []
    for section in parsed.sections:
        body = section.body_text
        if len(body) > max_section_chars:
            body = _cut_at_line(body, max_section_chars) + "\n[… the rest is cut here]"
            truncated = True
        sections.append(NotesSection(section.title, section.description, body.split("\n")))
    rendered = ParsedNotes(preamble, sections).render().rstrip("\n")
    if truncated:
        where = notes_path or "the session's notes file"
        rendered += (
            "\n\nSome sections above were shortened for this summary. "
            f"The complete notes are in {where}; read it when you need the missing detail."
        )
    return rendered, truncated


def _cut_at_line(text: str, limit: int) -> str:
    head = text[:limit]
    newline = head.rfind("\n")
    return head[:newline] if newline > limit // 2 else head


def condense_lines(lines: list[str], cap: int) -> list[str]:
    """A section's lines cut to `cap` tokens: the oldest after the first go, replaced by one
    `CONDENSED_LINE` counting them (earlier counts included)."""
    dropped = 0
    kept: list[str] = []
    for line in lines:
        match = CONDENSED_LINE.match(line.strip())
        if match:
            dropped += int(match.group(1))
        else:
            kept.append(line)

    def render() -> list[str]:
        if not dropped or not kept:
            return list(kept)
        plural = "s" if dropped != 1 else ""
        return [kept[0], f"- ({dropped} earlier line{plural} condensed away)", *kept[1:]]

    while len(kept) > 1 and rough_token_count("\n".join(render())) > cap:
        step = max(1, (len(kept) - 1) // 8)
        del kept[1 : 1 + step]
        dropped += step
    return render()


def first_message_index(view: Sequence[Entry]) -> int:
    """The first index after the compact boundary that opens a view (0 when none)."""
    return 1 if view and view[0].is_compact_boundary else 0
