"""The summary prompts, written for unbounded to the structure the seeds describe.

- `full_compact_prompt`: the whole conversation since the last boundary. A text-only
  instruction at the start and again at the end (models with adaptive thinking sometimes try
  to call tools while summarizing; saying it twice makes that rarer, seed 004), an
  `<analysis>` scratchpad, then a `<summary>` with nine sections.
- `partial_compact_prompt(direction)`: `from` summarizes only the messages after the retained
  earlier ones; `up_to` summarizes the messages before a pivot that stay verbatim after the
  summary, so section 8 becomes "Work Completed" and a "Context for Continuing Work" section
  is added (seed 004 "Three Prompt Variants").
- `subagent_continuation_prompt`: a sub-agent near its limit writes a five-part continuation
  summary (seed 000).
- `summary_message_text`: the user message that opens the conversation after a compaction.

Custom instructions (from `/compact …` or the caller) are appended under "Additional
instructions"; PreCompact hook instructions are merged after the user's (`merge_instructions`).
"""

from __future__ import annotations

from typing import Literal

PartialDirection = Literal["from", "up_to"]

SUMMARY_SYSTEM_PROMPT = (
    "You summarize software-engineering conversations so that work can continue."
)
"""System prompt of the fallback summary call (the cache-sharing call keeps the parent's)."""

TEXT_ONLY_INSTRUCTION = (
    "IMPORTANT: answer with plain text only. Do not call any tool: not Read, Bash, Grep, Glob, "
    "Edit, Write or any other. A tool call will be refused and this single turn will be wasted. "
    "Your whole answer is one <analysis> block followed by one <summary> block."
)

_SCRATCHPAD = """Before the summary, think in an <analysis> block. Go through the conversation in order and, for each part, note:
- what the user explicitly asked for and what they meant;
- how you approached it, and the decisions, concepts and code patterns involved;
- concrete details: file paths, complete code snippets, function signatures, the edits made;
- errors you hit and how each was fixed;
- feedback from the user, above all any time they asked you to do something differently.
Then check the draft once more for technical accuracy and for anything missing."""

_SECTIONS_COMMON_HEAD = """1. Primary Request and Intent: every explicit request and intention of the user, in detail.
2. Key Technical Concepts: the technologies, frameworks and technical ideas that matter here.
3. Files and Code Sections: each file looked at, changed or created, why it matters, and full code snippets where useful; give the most recent work the most detail.
4. Errors and fixes: each error met and how it was resolved, including user feedback on it.
5. Problem Solving: problems solved so far and any troubleshooting still under way.
6. All user messages: every message the user wrote that is not a tool result, in order. They carry the user's corrections and changes of mind, so keep them close to verbatim.
7. Pending Tasks: tasks you were explicitly asked to do that are not finished."""

_SECTIONS_CURRENT = """8. Current Work: exactly what was being done just before this summary request, from the latest user and assistant messages, with file names and code snippets.
9. Optional Next Step: the next step, only if it follows directly from the user's most recent explicit request and the work in progress. Quote the recent conversation verbatim to show what the task was and where it stopped, so the task cannot drift."""

_SECTIONS_UP_TO = """8. Work Completed: what had been achieved by the end of the summarized part.
9. Context for Continuing Work: what the messages that follow this summary need in order to make sense: open threads, decisions in force, state of the files."""

_EXAMPLE = """Shape of the answer:

<analysis>
[your chronological notes, checked for completeness]
</analysis>

<summary>
1. Primary Request and Intent:
   [detail]

2. Key Technical Concepts:
   - [concept]

3. Files and Code Sections:
   - [path]
     - [why it matters, what changed]
     - [code snippet]

4. Errors and fixes:
   - [error]: [fix; user feedback if any]

5. Problem Solving:
   [detail]

6. All user messages:
   - [message]

7. Pending Tasks:
   - [task]

8. {section_8}:
   [detail]

9. {section_9}:
   [detail]
</summary>"""

_FULL_TASK = """Write a detailed summary of the conversation so far. Pay close attention to what the user explicitly asked for and to what you did in response. It must keep every technical detail, code pattern and design decision needed to continue the work without losing context."""

_FROM_TASK = """Write a detailed summary of the RECENT part of the conversation only: the messages that come after the earlier context kept above. The earlier messages stay as they are and must not be summarized again; cover what was discussed, learned and done in the recent messages."""

_UP_TO_TASK = """Write a detailed summary of the part of the conversation shown here. Newer messages will follow your summary verbatim, so the summary must set up the context they build on rather than continue the work itself."""


def merge_instructions(user: str | None, hook: str | None) -> str | None:
    """The user's custom instructions first, then a PreCompact hook's (seed 004)."""
    parts = [part.strip() for part in (user, hook) if part and part.strip()]
    return "\n\n".join(parts) if parts else None


def _assemble(
    task: str, section_8_and_9: str, section_names: tuple[str, str], instructions: str | None
) -> str:
    example = _EXAMPLE.format(section_8=section_names[0], section_9=section_names[1])
    body = [
        TEXT_ONLY_INSTRUCTION,
        task,
        _SCRATCHPAD,
        "The <summary> has these sections:\n" + _SECTIONS_COMMON_HEAD + "\n" + section_8_and_9,
        example,
    ]
    if instructions and instructions.strip():
        body.append("Additional instructions:\n" + instructions.strip())
    body.append(TEXT_ONLY_INSTRUCTION)
    return "\n\n".join(body)


def full_compact_prompt(instructions: str | None = None) -> str:
    """The prompt that summarizes the whole conversation since the last boundary."""
    return _assemble(
        _FULL_TASK, _SECTIONS_CURRENT, ("Current Work", "Optional Next Step"), instructions
    )


def partial_compact_prompt(direction: PartialDirection, instructions: str | None = None) -> str:
    """The prompt for partial compaction around a pivot (`from` or `up_to`)."""
    if direction == "from":
        return _assemble(
            _FROM_TASK, _SECTIONS_CURRENT, ("Current Work", "Optional Next Step"), instructions
        )
    if direction == "up_to":
        return _assemble(
            _UP_TO_TASK,
            _SECTIONS_UP_TO,
            ("Work Completed", "Context for Continuing Work"),
            instructions,
        )
    raise ValueError(f"direction must be 'from' or 'up_to', not {direction!r}")


SUBAGENT_CONTINUATION_PROMPT = """You have been working on the task above and it is not finished yet. Write a continuation summary so that you, or another instance of you, can pick the work up in a fresh context window where this conversation is replaced by the summary. Make it structured, brief and actionable, with these parts:

1. Task Overview: the user's core request and what counts as done; any clarifications or constraints they gave.
2. Current State: what is finished; files created, changed or examined (with paths); outputs produced.
3. Important Discoveries: constraints found, decisions and why, errors and their resolutions, approaches that failed and why.
4. Next Steps: the actions left, in priority order; blockers and open questions.
5. Context to Preserve: the user's preferences and style, domain details that are easy to miss, promises made to the user.

Be concise but complete: include whatever would prevent repeated work or repeated mistakes, and write it so the work can resume at once. Put the whole summary inside <summary></summary> tags."""
"""Sent as a user message to a sub-agent about to run out of context (seed 000)."""

SUMMARY_PREAMBLE = (
    "This session continues an earlier conversation that ran out of context. "
    "The summary below covers the earlier part of that conversation."
)
PREVIOUS_SUMMARY_PREFIXES: tuple[str, ...] = (
    "This session is being continued from a previous conversation",
    "This session continues an earlier conversation",
)
"""How a compaction summary message begins (Claude Code's wording, then ours)."""
TRANSCRIPT_HINT = (
    "For details from before this summary (exact code, error messages, text you wrote), "
    "read the full transcript at: {path}"
)
PRESERVED_NOTE = "The most recent messages follow this summary unchanged."
CONTINUE_INSTRUCTION = (
    "Continue from where the conversation stopped, without asking the user anything further. "
    "Go straight on with the last task: do not acknowledge this summary, do not recap it and "
    "do not announce that you are continuing."
)


def is_previous_summary(text: str) -> bool:
    """Whether a user text is a compaction summary message (not something the user typed)."""
    return text.lstrip().startswith(PREVIOUS_SUMMARY_PREFIXES)


def summary_message_text(
    formatted_summary: str,
    *,
    transcript_path: str | None = None,
    messages_preserved: bool = False,
    automatic: bool = False,
) -> str:
    """The opening user message after a compaction (seed 000 layout, our wording)."""
    parts = [SUMMARY_PREAMBLE, formatted_summary.strip()]
    if transcript_path:
        parts.append(TRANSCRIPT_HINT.format(path=transcript_path))
    if messages_preserved:
        parts.append(PRESERVED_NOTE)
    if automatic:
        parts.append(CONTINUE_INSTRUCTION)
    return "\n\n".join(parts)
