"""What every summary carries forward word for word, and how the next compaction reads it.

A compaction replaces the conversation with a summary; the next one summarizes that summary
with what came after it. Three things have to come through any number of compactions in a
row unchanged, whoever writes the summary (a model may leave them out; the facts ledger
appended to a model's summary and the offline hand-over both write them):

- the user's **standing instructions**: sentences of the user's requests that set a rule for
  the rest of the work ("Never push to main.", "Use pnpm, not npm.", "Stelle sicher, dass
  der alte Server bleibt."), recognised by their wording (`_RULE`): never, always, don't,
  must, make sure, avoid, only use, instead of, a sentence that opens with "use", and their
  German counterparts. At most `MAX_STANDING` are kept, the newest;
- the user's **latest request**, whole up to `LATEST_REQUEST_CHARS`; a longer one (a pasted
  document) keeps its beginning and its end, cut at line or sentence ends, with a marker
  saying how many characters were left out between them;
- the user's **messages**, as the summary listed them;
- the rest of its **sections** (`previous_sections`): the key facts, the files and code, the
  errors and their fixes, the decisions, the pending tasks an earlier summary (a model's or
  ours) wrote under the nine numbered headings, read back section by section so the next
  summary can keep them beside what came after.

Each is written as a block under a fixed heading (`render_standing`, `render_latest`) and read
back from a previous summary's text (`carried_standing`, `carried_latest`,
`carried_user_messages`), so a block passes from summary to summary as it is. Text quoted
from the conversation has its `<summary>` / `<analysis>` tags made inert (`escape_tags`), so
a quote can never end a summary early.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

STANDING_HEADING = "Standing instructions from the user (verbatim):"
LATEST_HEADING = "The user's latest request (verbatim):"
MAX_STANDING = 12
"""Standing instructions kept, the newest."""
RULE_MAX_CHARS = 300
"""A longer sentence is prose, not a rule."""
RULE_SOURCE_MAX_CHARS = 3_000
"""Rules are read from requests up to this long; a longer one is a pasted document."""
LATEST_REQUEST_CHARS = 3_000
"""The latest request is quoted whole up to this many characters."""
_HEAD_SHARE = 0.7
"""Of a request cut to `LATEST_REQUEST_CHARS`, the share kept from its beginning."""

_TAGS = re.compile(r"<(/?)(summary|analysis)>", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[*ÄÖÜ])|\n+")
_RULE = re.compile(
    r"\b(?:never|always|don[’']t|do not|must|mustn[’']t|make sure|ensure|avoid|only use|"
    r"instead of|rather than|from now on|no longer|"
    r"immer|niemals|nie|stelle sicher|achte darauf|auf keinen fall|nicht mehr|statt|anstatt|"
    r"sollst|solltest|musst|darfst)\b|^(?:please\s+|bitte\s+)?use\b",
    re.I,
)
_LIST_ITEM = re.compile(r"^\s*[-*]\s+(.*\S)\s*$")
_USER_MESSAGES = re.compile(r"user messages", re.I)
_LEFT_OUT = re.compile(r"\((\d+) more\)")
_SECTION_START = re.compile(r"^\s*\d+\.\s+\S")
_SUMMARY_START = re.compile(r"^\s*Summary:\s*$", re.M)
_NUMBERED_HEADING = re.compile(r"^\s{0,3}(\d)\.\s+[A-Z][^\n]{2,60}?:\s*$")
_CUT_MARKER = "[… {count:,} characters of this message left out here …]"


def escape_tags(text: str) -> str:
    """`text` with `<summary>`, `</summary>`, `<analysis>`, `</analysis>` made inert."""
    return _TAGS.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}&gt;", text)


def sentences(text: str) -> list[str]:
    """The sentences (and lines) of a text, stripped, without empty ones."""
    return [s.strip(" -*\t") for s in _SENTENCE_END.split(text) if s.strip(" -*\t")]


def _key(text: str) -> str:
    return " ".join(text.split()).lower()


def standing_instructions(requests: Iterable[str], carried: Sequence[str] = ()) -> list[str]:
    """The rules the user set: `carried` ones first, then those of `requests` (oldest
    first), one per wording, the newest `MAX_STANDING` of them."""
    found: dict[str, str] = {}
    for rule in carried:
        found.setdefault(_key(rule), rule)
    for request in requests:
        if len(request) > RULE_SOURCE_MAX_CHARS:
            continue
        for sentence in sentences(request):
            short = len(sentence) <= RULE_MAX_CHARS and len(sentence.split()) >= 3
            if short and _RULE.search(sentence):
                key = _key(sentence)
                found.pop(key, None)  # a repeated rule counts as new
                found[key] = sentence
    return list(found.values())[-MAX_STANDING:]


def render_standing(rules: Sequence[str], indent: str = "") -> list[str]:
    """The standing-instructions block (no lines when there are none)."""
    if not rules:
        return []
    return [indent + STANDING_HEADING, *(f'{indent}- "{escape_tags(rule)}"' for rule in rules)]


def _cut_back(text: str) -> str:
    """`text` up to its last line or sentence end (all of it when there is none)."""
    ends = [text.rfind("\n"), *(text.rfind(mark + " ") + 1 for mark in ".!?")]
    end = max(ends)
    return text[:end].rstrip() if end > len(text) // 2 else text.rstrip()


def _cut_forward(text: str) -> str:
    """`text` from its first line or sentence start (all of it when there is none)."""
    starts = [i for i in (text.find("\n"), *(text.find(m + " ") for m in ".!?")) if i >= 0]
    start = min(starts) + 1 if starts else 0
    return text[start:].lstrip() if start < len(text) // 2 else text.lstrip()


def quoted_request(text: str, max_chars: int = LATEST_REQUEST_CHARS) -> str:
    """A request whole, or (over `max_chars`) its beginning and end with a marker between."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    head = _cut_back(text[: int(max_chars * _HEAD_SHARE)])
    tail = _cut_forward(text[len(text) - (max_chars - len(head)) :])
    left_out = len(text) - len(head) - len(tail)
    return f"{head}\n{_CUT_MARKER.format(count=left_out)}\n{tail}"


def render_latest(
    request: str | None, indent: str = "", max_chars: int = LATEST_REQUEST_CHARS
) -> list[str]:
    """The latest-request block: each line of the request after `> ` (none without one)."""
    if not request or not request.strip():
        return []
    quoted = escape_tags(quoted_request(request, max_chars))
    return [indent + LATEST_HEADING, *(f"{indent}> {line}".rstrip() for line in quoted.split("\n"))]


def _block_after(heading: str, summary: str) -> list[str] | None:
    """The lines right after the last line holding `heading` (None when there is none)."""
    lines = summary.splitlines()
    found = [i for i, line in enumerate(lines) if line.strip() == heading]
    return lines[found[-1] + 1 :] if found else None


def carried_standing(summary: str) -> list[str]:
    """The standing instructions a previous summary carries."""
    block = _block_after(STANDING_HEADING, summary) or []
    rules: list[str] = []
    for line in block:
        stripped = line.strip()
        if not (stripped.startswith('- "') and stripped.endswith('"') and len(stripped) > 4):
            break
        rules.append(stripped[3:-1])
    return rules


def carried_latest(summary: str) -> str | None:
    """The latest request a previous summary carries, as it was written, or None."""
    block = _block_after(LATEST_HEADING, summary)
    if block is None:
        return None
    lines: list[str] = []
    for line in block:
        stripped = line.strip()
        if not stripped.startswith(">"):
            break
        lines.append(stripped[2:] if stripped.startswith("> ") else stripped[1:])
    return "\n".join(lines) or None


def _user_message_items(summary: str) -> list[str]:
    """The list items of a summary's user-messages section (or ledger list), unquoted."""
    found: list[str] = []
    inside = False
    for line in summary.splitlines():
        item = _LIST_ITEM.match(line)
        if not item:
            if _USER_MESSAGES.search(line) and line.rstrip().endswith(":"):
                inside = True
            elif _SECTION_START.match(line) or (line.strip() and not line[0].isspace()):
                inside = False
            continue
        if inside:
            text = item.group(1).strip().removeprefix('"')
            text = text[:-1] if text.endswith('"') else text
            if text:
                found.append(text)
    return found


def carried_user_messages(summary: str) -> list[str]:
    """The user messages a previous summary lists (its "All user messages" section, or a
    ledger's "User messages" list), each without its quotes."""
    return [text for text in _user_message_items(summary) if not _LEFT_OUT.fullmatch(text)]


def left_out_user_messages(summary: str) -> int:
    """How many user messages a previous summary says it left out (its "(N more)" lines)."""
    return sum(
        int(match.group(1))
        for match in map(_LEFT_OUT.fullmatch, _user_message_items(summary))
        if match
    )


def previous_sections(summary: str) -> dict[int, list[str]]:
    """The sections of an earlier summary by number (1 to 9), each its lines under its
    heading, empty ones left out; the text after a `Summary:` line when it has one (a model's
    analysis before it is not the summary). Headings count only in rising order, so a
    numbered list inside a section is no heading; a summary may skip a section."""
    start = _SUMMARY_START.search(summary)
    text = summary[start.end() :] if start else summary
    sections: dict[int, list[str]] = {}
    current = 0
    for line in text.splitlines():
        heading = _NUMBERED_HEADING.match(line)
        if heading and int(heading.group(1)) > current:
            current = int(heading.group(1))
            sections[current] = []
        elif current and line.strip():
            sections[current].append(line.rstrip())
    return sections


__all__ = [
    "LATEST_HEADING",
    "LATEST_REQUEST_CHARS",
    "MAX_STANDING",
    "STANDING_HEADING",
    "carried_latest",
    "carried_standing",
    "carried_user_messages",
    "escape_tags",
    "left_out_user_messages",
    "previous_sections",
    "quoted_request",
    "render_latest",
    "render_standing",
    "sentences",
    "standing_instructions",
]
