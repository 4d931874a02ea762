"""Summaries a scripted model answers with, shaped like real ones.

The compaction guard refuses a summary that is implausibly small for what it replaces or
that lacks the sections a continuation needs, so scripted replies must look like what a
model writes: all nine sections (or the sub-agent continuation's five parts), about 1,700
tokens, inside `<analysis>` / `<summary>` tags.
"""

from __future__ import annotations

NINE = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)
FIVE = ("Task Overview", "Current State", "Important Discoveries", "Next Steps", "Context to Preserve")
FILLER = "The work so far is described here in enough detail to go on from it without rereading. "


def nine_section_summary(subject: str, *, analysis: bool = True, chars: int = 6_800) -> str:
    """A model-like reply: `<analysis>` then `<summary>` with the nine sections about `subject`."""
    return _reply(NINE, subject, analysis=analysis, chars=chars)


def continuation_summary(subject: str, *, chars: int = 6_800) -> str:
    """A model-like sub-agent continuation summary about `subject`."""
    return _reply(FIVE, subject, analysis=False, chars=chars)


def _reply(titles: tuple[str, ...], subject: str, *, analysis: bool, chars: int) -> str:
    per_section = max(0, chars // len(titles) - 40)
    filler = (FILLER * (per_section // len(FILLER) + 1))[:per_section]
    body = "\n\n".join(
        f"{number}. {title}:{' ' + subject if number == 1 else ''}\n   {filler}".rstrip()
        for number, title in enumerate(titles, 1)
    )
    head = "<analysis>Going through the conversation in order.</analysis>\n" if analysis else ""
    return f"{head}<summary>\n{body}\n</summary>"


def last_user_text(messages: list[dict]) -> str:
    """The text of the last message of a request (its prompt)."""
    if not messages:
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def asks_for_summary(messages: list[dict]) -> bool:
    """A compaction summary request: its last message is the summary prompt."""
    return "<summary>" in last_user_text(messages)


def asks_for_notes(messages: list[dict]) -> bool:
    """A session-notes update request: its last message is the notes prompt."""
    return last_user_text(messages).startswith("SESSION NOTES UPDATE")
