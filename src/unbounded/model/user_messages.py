"""What a user message is: a prompt the user typed, or one of the many things an agent
writes in the user role.

Claude Code writes much more than prompts as `user` records: tool results, a slash command
(`<command-name>/x</command-name>` + `<command-args>…</command-args>`) followed by the
command's expanded template or a skill's body (`isMeta`), the output of a local command
(`<local-command-stdout>`), a caveat before local commands, notifications of background
tasks (`<task-notification>` with its own `<summary>`), hook output, `<system-reminder>`
text, interrupt markers and the summary after a compaction. Summaries, session notes and
evaluations need to know which is which: the user's request is the command and its
arguments, never the 600-character template it expanded to, and a notification is an event,
not a request.

`classify_user_content` sorts one user message; `UserMessage.request` is the text that
stands for what the user asked (None for anything that is not a request).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from unbounded.model.entries import Entry
from unbounded.model.normalize import MISSING_START_TEXT

UserMessageKind = Literal[
    "prompt",
    "command",
    "command_output",
    "caveat",
    "skill",
    "meta",
    "notification",
    "hook",
    "system_reminder",
    "interrupt",
    "tool_results",
    "compact_summary",
    "empty",
]

REQUEST_KINDS: frozenset[str] = frozenset({"prompt", "command"})
"""Kinds that carry something the user asked for."""

_TAG = r"<{name}>(.*?)</{name}>"
_COMMAND_NAME = re.compile(_TAG.format(name="command-name"), re.DOTALL)
_COMMAND_ARGS = re.compile(_TAG.format(name="command-args"), re.DOTALL)
_COMMAND_MESSAGE = re.compile(_TAG.format(name="command-message"), re.DOTALL)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_TASK_ID = re.compile(_TAG.format(name="task-id"), re.DOTALL)
_TASK_STATUS = re.compile(_TAG.format(name="status"), re.DOTALL)
_TASK_SUMMARY = re.compile(_TAG.format(name="summary"), re.DOTALL)
_HOOK_PREFIXES = ("<user-prompt-submit-hook>", "<hook-output>", "<session-start-hook>")
_LOCAL_OUTPUT_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>",
                          "<bash-stderr>", "<bash-input>")
_CAVEAT_PREFIXES = ("<local-command-caveat>", "Caveat: The messages below were generated")
_INTERRUPT_PREFIX = "[Request interrupted"
_SKILL_PREFIX = "Base directory for this skill:"
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
)
"""Context an agent writes in the user role (Codex CLI's environment and instructions); the
placeholder normalization puts before a conversation that starts with a reply is meta too."""


@dataclass(frozen=True, slots=True)
class UserMessage:
    """One user message, sorted."""

    kind: UserMessageKind
    text: str
    """The message's text (system reminders removed from a prompt)."""
    command: str | None = None
    """For a command: its name as typed (`/orchestrator`)."""
    arguments: str | None = None
    """For a command: what followed the name."""
    task_id: str | None = None
    """For a notification: the background task it reports on."""
    status: str | None = None
    """For a notification: the task's status (completed, failed, …)."""

    @property
    def is_request(self) -> bool:
        """True for a prompt or a command: something the user asked for."""
        return self.kind in REQUEST_KINDS

    @property
    def request(self) -> str | None:
        """What the user asked: the prompt, or the command with its arguments."""
        if self.kind == "prompt":
            return self.text
        if self.kind == "command":
            return " ".join(part for part in (self.command, self.arguments) if part)
        return None


def _texts(content: Any) -> tuple[list[str], bool, bool]:
    """Text parts of content, whether it holds tool results, and whether it holds only them."""
    if isinstance(content, str):
        return [content], False, False
    texts: list[str] = []
    results = False
    others = False
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                results = True
            elif kind == "text":
                texts.append(str(block.get("text", "")))
                others = True
            else:
                others = True
    return texts, results, results and not others


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    return found.group(1).strip() if found else None


def classify_user_content(
    content: Any, *, is_meta: bool = False, is_compact_summary: bool = False
) -> UserMessage:
    """Sort one user message's content (see the module docstring)."""
    texts, _, only_results = _texts(content)
    if is_compact_summary:
        return UserMessage("compact_summary", "\n".join(texts))
    if only_results:
        return UserMessage("tool_results", "")
    text = "\n".join(t for t in texts if t.strip())
    stripped = text.strip()
    if not stripped:
        return UserMessage("empty", "")
    if "<command-name>" in stripped and (
        stripped.startswith(("<command-", "<command-message>")) or is_meta
    ):
        return UserMessage(
            "command",
            stripped,
            command=_first(_COMMAND_NAME, stripped),
            arguments=_first(_COMMAND_ARGS, stripped) or None,
        )
    if stripped.startswith(_LOCAL_OUTPUT_PREFIXES):
        return UserMessage("command_output", stripped)
    if stripped.startswith(_CAVEAT_PREFIXES):
        return UserMessage("caveat", stripped)
    if stripped.startswith("<task-notification>"):
        return UserMessage(
            "notification",
            stripped,
            task_id=_first(_TASK_ID, stripped),
            status=_first(_TASK_STATUS, stripped),
        )
    if stripped.startswith(_INTERRUPT_PREFIX):
        return UserMessage("interrupt", stripped)
    if stripped.startswith(_HOOK_PREFIXES):
        return UserMessage("hook", stripped)
    if stripped.startswith(_CONTEXT_PREFIXES) or stripped == MISSING_START_TEXT:
        return UserMessage("meta", stripped)
    without_reminders = _REMINDER.sub("", stripped).strip()
    if not without_reminders:
        return UserMessage("system_reminder", stripped)
    if is_meta:
        kind: UserMessageKind = "skill" if stripped.startswith(_SKILL_PREFIX) else "meta"
        return UserMessage(kind, stripped)
    return UserMessage("prompt", without_reminders)


def classify_user_entry(entry: Entry) -> UserMessage:
    """Sort a transcript's user record (other records sort as `empty`).

    A command written for a tool call of the model (`sourceToolUseID`: the model invoked a
    skill) is the skill's header, not a request of the user.
    """
    if entry.type != "user":
        return UserMessage("empty", "")
    message = classify_user_content(
        entry.content, is_meta=entry.is_meta, is_compact_summary=entry.is_compact_summary
    )
    if message.kind == "command" and entry.data.get("sourceToolUseID"):
        return UserMessage("skill", message.text, command=message.command)
    return message


def classify_message_texts(content: Any) -> list[UserMessage]:
    """Sort each text block of a plain user message (flags such as `isMeta` are gone).

    Normalization joins consecutive user records, so one message can hold a command, then
    the template it expanded to (or a local command's output), then the next prompt. The text
    block right after a command block is taken as its expansion (`skill`) unless it is the
    command's output, and a command in a message that answers tool calls was invoked by the
    model, not typed: neither is a request.
    """
    if isinstance(content, str):
        return [classify_user_content(content)]
    if not isinstance(content, list):
        return []
    blocks = [b for b in content if isinstance(b, dict)]
    answers_tools = any(b.get("type") == "tool_result" for b in blocks)
    sorted_texts: list[UserMessage] = []
    after_command = False
    for block in blocks:
        if block.get("type") != "text":
            continue
        message = classify_user_content(str(block.get("text", "")))
        if message.kind == "command":
            after_command = True
            if answers_tools:
                message = UserMessage("skill", message.text, command=message.command)
        else:
            if after_command and message.kind in ("prompt", "meta"):
                message = UserMessage("skill", message.text)
            after_command = False  # only the block right after the command expands it
        sorted_texts.append(message)
    return sorted_texts


def notification_summary(message: UserMessage) -> str | None:
    """A notification's one-line summary (its `<summary>` text), if it has one."""
    if message.kind != "notification":
        return None
    return _first(_TASK_SUMMARY, message.text)


def user_requests(entries: Iterable[Entry]) -> list[UserMessage]:
    """Every request (prompt or command) in these records, in order."""
    found = []
    for entry in entries:
        if entry.type == "user":
            message = classify_user_entry(entry)
            if message.is_request:
                found.append(message)
    return found


def latest_user_request(entries: Sequence[Entry]) -> UserMessage | None:
    """The last prompt or command in these records, or None."""
    for entry in reversed(entries):
        if entry.type == "user":
            message = classify_user_entry(entry)
            if message.is_request:
                return message
    return None
