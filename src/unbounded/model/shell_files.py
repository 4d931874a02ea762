"""The files a shell-driven agent reads and writes, read from its commands and patches.

Codex CLI edits files with `apply_patch`: as its own tool (the freeform input is the patch) or
inside a shell command (`apply_patch << 'PATCH'` or `apply_patch '<patch>'`). A patch is
`*** Begin Patch`, then per file `*** Add File: p` (its lines, each after a `+`),
`*** Delete File: p`, or `*** Update File: p` (optionally `*** Move to: q`, then hunks after
`@@` whose lines start with ` `, `-` or `+`), then `*** End Patch`. `parse_patch` reads that
text and never raises: what it cannot read it leaves out.

Shell agents (Codex, mini-swe-agent, OpenHands, Claude Code's Bash) read files with `cat`,
`sed -n 'a,bp'`, `nl -ba`, `head`, `tail`, `less`, and write them with a here-document
(`cat > f << 'EOF'`, `tee f << EOF`) or edit them with `sed -i`. `shell_reads`,
`heredoc_writes` and `in_place_edits` recognise those
conservatively: a read is a whole command of one of those programs on plain paths (no glob,
no variable, no redirection, no `sed -i`), piped only into programs that show text, and not
after a `cd` (its paths would be relative to another directory); it is the file's whole text
only for a lone `cat f`. A write is `cat`/`tee` fed by a here-document into one path (its
text unknown when the shell expands the body), and, like a `sed -i` or an `apply_patch`, not
after a `cd`. A hunk's old lines are whole lines, found after its `@@ context` line (compared
stripped, as the header is).

Codex wraps a command's output: older versions in JSON (`{"output": "...", "metadata":
{"exit_code": N, ...}}`), newer ones in a text header (`Exit code: N`, `Wall time: …`,
`Output:` then the output; exec_command's `Process exited with code N`); mini-swe-agent in
tags (`<returncode>N</returncode>`, then `<output>` … `</output>`). `unwrap_output` gives the
output and its exit code.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

import orjson

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
PATCH_TOOLS = frozenset({"apply_patch", "applypatch"})
"""Programs (and tool names) that apply a patch text."""
_FILE_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_MOVE_TO = re.compile(r"^\*\*\* Move to: (.+?)\s*$")
_PATCH_COMMAND = re.compile(r"(?:^|[\s;&|(])(?:apply_patch|applypatch)\b")
CACHED_COMMANDS = 1024
"""How many commands' (and patch texts') files are kept once read: a hand-over asks for the
files of the same calls many times, and reading a long command again costs a millisecond."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One change of an updated file: the lines it replaces, the lines it puts instead, and
    the line it comes after (its `@@ context` header; empty when it has none)."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    context: str = ""


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A file a patch or a shell command writes.

    `action` is "add" (created with `text`), "update" (changed by `hunks`; renamed to
    `moved_to` when that is set), "delete", "write" (replaced by `text`), "append" (text
    added at its end) or "edit" (changed in place by `sed -i`): the text after the last two
    is not known."""

    path: str
    action: str
    text: str | None = None
    hunks: tuple[Hunk, ...] = ()
    moved_to: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths it changes: its own, and where it moved to."""
        return (self.path, self.moved_to) if self.moved_to else (self.path,)

    def applied_to(self, before: str | None) -> str | None:
        """The file's text after this change, from its text before (None when not known)."""
        if self.action in ("add", "write"):
            return self.text
        if self.action != "update" or before is None:
            return None
        # Whole lines, as apply_patch matches them: an old line is never a line's tail.
        lines = before.split("\n")
        start = 0
        for hunk in self.hunks:
            if hunk.context:
                after = _context_index(lines, hunk.context, start)
                if after is None:
                    return None
                start = after + 1
            if not hunk.old:
                return None  # no lines to place it by
            at = _line_index(lines, hunk.old, start)
            if at is None:
                return None
            lines[at : at + len(hunk.old)] = hunk.new
            start = at + len(hunk.new)
        return "\n".join(lines)


def _line_index(lines: list[str], wanted: tuple[str, ...], start: int) -> int | None:
    """Where `wanted` first stands as whole lines of `lines` from `start` on (None: nowhere)."""
    first, count = wanted[0], len(wanted)
    for index in range(start, len(lines) - count + 1):
        if lines[index] == first and tuple(lines[index : index + count]) == wanted:
            return index
    return None


def _context_index(lines: list[str], context: str, start: int) -> int | None:
    """Where a hunk's `@@ context` line stands from `start` on: the header's text is stripped,
    so a line is compared stripped too (as apply_patch does; `@@     def m(self):`)."""
    for index in range(start, len(lines)):
        if lines[index].strip() == context:
            return index
    return None


def _add_text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def parse_patch(text: str) -> tuple[WrittenFile, ...]:
    """The files an apply_patch text adds, updates, moves or deletes, in order."""
    found: list[WrittenFile] = []
    action = path = ""
    moved: str | None = None
    body: list[str] = []
    hunks: list[Hunk] = []
    old: list[str] = []
    new: list[str] = []
    context = ""

    def close_hunk() -> None:
        if old or new:
            hunks.append(Hunk(tuple(old), tuple(new), context))
        old.clear()
        new.clear()

    def close_file() -> None:
        close_hunk()
        if action == "Add":
            found.append(WrittenFile(path, "add", _add_text(body)))
        elif action == "Delete":
            found.append(WrittenFile(path, "delete"))
        elif action == "Update":
            found.append(WrittenFile(path, "update", hunks=tuple(hunks), moved_to=moved))
        body.clear()
        hunks.clear()

    for raw in text.split("\n"):
        line = raw.removesuffix("\r")
        header = _FILE_HEADER.match(line)
        if header:
            close_file()
            action, path, moved, context = header.group(1), header.group(2), None, ""
            continue
        if line.startswith("*** "):
            move = _MOVE_TO.match(line)
            if move and action == "Update":
                moved = move.group(1)
            elif not line.startswith("*** End of File"):
                close_file()  # End Patch, Begin Patch, or a header we do not know
                action = ""
            continue
        if action == "Add":
            if line.startswith("+"):
                body.append(line[1:])
        elif action == "Update":
            if line.startswith("@@"):
                close_hunk()
                context = line[2:].strip()
            elif line.startswith("-"):
                old.append(line[1:])
            elif line.startswith("+"):
                new.append(line[1:])
            elif line.startswith(" ") or line == "":
                old.append(line[1:])
                new.append(line[1:])
    close_file()
    return tuple(found)


_QUOTED_QUOTE = re.compile(r"'\"'\"'|'\\''")


def _unquoted(text: str, quote: str) -> str:
    """A shell-quoted patch's text as the program gets it (the quoting a shell join adds)."""
    if quote == "'":
        # One pass: a quote's own replacement (`'\''` in a `'"'"'`-quoted text) is data.
        return _QUOTED_QUOTE.sub("'", text)
    if quote == '"':
        return re.sub(r'\\([\\"$`])', r"\1", text)
    return text


def _patch_stop(text: str, begin: int) -> int:
    """Where the patch beginning at `begin` ends: after its end marker, which opens a line (an
    added line holding the marker is `+*** End Patch`), else at the end of the text."""
    end = text.find("\n" + END_PATCH, begin)
    return len(text) if end < 0 else end + 1 + len(END_PATCH)


def patches_in_command(command: str) -> list[str]:
    """The patch texts a shell command gives `apply_patch` (a here-document or a quoted
    argument), in order; empty when it runs none."""
    return [text for _, text in _patches(command)]


def _patches(command: str) -> list[tuple[int, str]]:
    """(where it begins, its text) of each patch a shell command gives `apply_patch`."""
    found: list[tuple[int, str]] = []
    start = 0
    while True:
        begin = command.find(BEGIN_PATCH, start)
        if begin < 0:
            return found
        stop = _patch_stop(command, begin)
        if _PATCH_COMMAND.search(command, 0, begin) or _PATCH_COMMAND.search(command, stop):
            quote = command[begin - 1] if begin and command[begin - 1] in "'\"" else ""
            found.append((begin, _unquoted(command[begin:stop], quote)))
        start = stop


@lru_cache(maxsize=CACHED_COMMANDS)
def command_patch_writes(command: str) -> tuple[WrittenFile, ...]:
    """The files the patches a shell command applies change (`patches_in_command`), but
    those of a patch applied after a `cd` (its paths name another directory's files)."""
    return tuple(
        found
        for begin, text in _patches(command)
        if not _after_cd(command[:begin])
        for found in parse_patch(text)
    )


@lru_cache(maxsize=CACHED_COMMANDS)
def patch_writes(text: str) -> tuple[WrittenFile, ...]:
    """`parse_patch` of a text that holds patches (its `*** Begin Patch` blocks), or of the
    whole text when it holds no begin marker (a freeform tool input without one)."""
    if BEGIN_PATCH not in text:
        return parse_patch(text)
    found: list[WrittenFile] = []
    start = 0
    while (begin := text.find(BEGIN_PATCH, start)) >= 0:
        stop = _patch_stop(text, begin)
        found.extend(parse_patch(text[begin:stop]))
        start = stop
    return tuple(found)


def command_segments(command: str) -> list[str]:
    """The commands of a command line, split at `&&`, `||`, `;` and line ends outside quotes
    (a quoted multi-line argument stays whole), lines continued with a backslash joined,
    comment lines left out, each stripped."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    text = command.replace("\\\n", " ")
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                current.append(char)
                index += 1
                char = text[index] if index < len(text) else ""
        elif char in "'\"":
            quote = char
        elif char in ";\n" or text.startswith(("&&", "||"), index):
            parts.append("".join(current))
            current = []
            index += 1 if char in ";\n" else 2
            continue
        current.append(char)
        index += 1
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip() and not p.strip().startswith("#")]


# -- here-documents -------------------------------------------------------------------------

# The delimiter bare, quoted, or after a backslash (`<< \EOF`: quoted too, the body is kept as is).
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:(['\"])([A-Za-z_][\w.-]*)\2|(\\?)([A-Za-z_][\w.-]*))")
# What an unquoted here-document's body expands: a parameter, a command, an arithmetic
# expansion, or a backslash escape.
_EXPANSION = re.compile(r"\$[A-Za-z_{(\d@*#?!$-]|`|\\[$`\\\n]")


@dataclass(frozen=True, slots=True)
class _Heredoc:
    head: str
    """The line that opens it, up to the here-document marker and after it."""
    body: str
    start: int
    """Where its body begins in the command."""
    end: int
    """Where the line after its closing delimiter begins."""
    marker: int
    """Where its `<<` marker is in the command."""
    strip_tabs: bool
    """`<<-`: the shell takes leading tabs off its lines."""
    quoted: bool
    """Its delimiter is quoted: the body is not expanded."""

    @property
    def text(self) -> str | None:
        """The text the program reads from it; None when the shell expands it."""
        body = self.body
        if self.strip_tabs:
            body = "".join(line.lstrip("\t") for line in body.splitlines(keepends=True))
        if not self.quoted and _EXPANSION.search(body):
            return None
        return body


def _heredocs(command: str) -> list[_Heredoc]:
    found: list[_Heredoc] = []
    position = 0
    while (match := _HEREDOC.search(command, position)) is not None:
        line_start = command.rfind("\n", 0, match.start()) + 1
        line_end = command.find("\n", match.end())
        if line_end < 0:
            return found
        head = command[line_start : match.start()] + " " + command[match.end() : line_end]
        delimiter = match.group(3) or match.group(5)
        strip_tabs = match.group(1) == "-"
        quoted = bool(match.group(2) or match.group(4))
        body_start = cursor = line_end + 1
        while True:
            next_end = command.find("\n", cursor)
            line = command[cursor : len(command) if next_end < 0 else next_end]
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                body = command[body_start:cursor]
                end = cursor + len(line)
                found.append(
                    _Heredoc(head, body, body_start, end, match.start(), strip_tabs, quoted)
                )
                position = cursor + len(line)
                break
            if next_end < 0:  # never closed: the rest is its body
                body = command[body_start:]
                found.append(
                    _Heredoc(
                        head, body, body_start, len(command), match.start(), strip_tabs, quoted
                    )
                )
                return found
            cursor = next_end + 1
    return found


def without_heredocs(command: str) -> str:
    """The command with its here-documents' bodies left out (their lines are data, not
    commands)."""
    if "<<" not in command:
        return command
    parts: list[str] = []
    kept = 0
    for heredoc in _heredocs(command):
        parts.append(command[kept : heredoc.start])
        kept = heredoc.end
    parts.append(command[kept:])
    return "".join(parts)


_DIRECTORY_CHANGES = frozenset({"cd", "pushd", "popd"})


def _first_word(segment: str) -> str:
    parts = segment.split(None, 1)
    return parts[0] if parts else ""


def _after_cd(prefix: str) -> bool:
    """Whether a command that begins after `prefix` runs after a `cd` (`pushd`, `popd`): its
    relative paths then name files of another directory."""
    if not any(word in prefix for word in _DIRECTORY_CHANGES):
        return False
    segments = command_segments(without_heredocs(prefix))
    return any(_first_word(segment) in _DIRECTORY_CHANGES for segment in segments)


def _words(segment: str) -> list[str] | None:
    """Shell words of one command, operators (`|`, `>`, `<`…) as words of their own; None
    when it cannot be split (an open quote)."""
    lexer = shlex.shlex(segment, posix=True, punctuation_chars="|&;<>()")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


@lru_cache(maxsize=CACHED_COMMANDS)
def heredoc_writes(command: str) -> tuple[WrittenFile, ...]:
    """The files a command writes from a here-document: `cat > f << EOF` (or `cat << EOF > f`)
    replaces f by the body, `>>` or `tee -a` appends to it, `tee f << EOF` replaces it."""
    if "<<" not in command:
        return ()
    found: list[WrittenFile] = []
    for heredoc in _heredocs(command):
        head = re.split(r"&&|\|\||;", heredoc.head)[-1]
        words = _words(head)
        if not words:
            continue
        write = _heredoc_target(words)
        if write is not None:
            path, append = write
            if _after_cd(command[: heredoc.marker]):
                continue  # the path is relative to another directory
            if append:
                found.append(WrittenFile(path, "append"))
            else:
                found.append(WrittenFile(path, "write", heredoc.text))
    return tuple(found)


def _heredoc_target(words: list[str]) -> tuple[str, bool] | None:
    """(path, appends) of `cat > path` / `tee [-a] path` words; None for anything else."""
    program = os.path.basename(words[0])
    rest = words[1:]
    if program == "cat" and len(rest) == 2 and rest[0] in (">", ">>"):
        path = rest[1]
        return (path, rest[0] == ">>") if _plain_path(path) else None
    if program == "tee" and rest and all(word not in "|&;<>()" for word in rest):
        append = rest[0] in ("-a", "--append")
        paths = rest[1:] if append else rest
        if len(paths) == 1 and _plain_path(paths[0]):
            return paths[0], append
    return None


@lru_cache(maxsize=CACHED_COMMANDS)
def in_place_edits(command: str) -> tuple[WrittenFile, ...]:
    """The files a command edits in place with `sed -i` (their text after it is not known)."""
    if "sed" not in command or "-i" not in command:
        return ()
    found: list[WrittenFile] = []
    for segment in command_segments(without_heredocs(command)):
        first = _first_word(segment)
        if first in _DIRECTORY_CHANGES:
            break  # later paths are relative to another directory
        if os.path.basename(first) != "sed":
            continue  # told before it is split: shlex is slow on a long quoted argument
        words = _words(segment)
        if not words:
            continue
        stage = words[1 : words.index("|")] if "|" in words else words[1:]
        if not any(word.startswith(("-i", "--in-place")) for word in stage):
            continue
        files = _sed_edit_files(stage)
        found.extend(WrittenFile(path, "edit") for path in files)
    return tuple(found)


def _sed_edit_files(args: list[str]) -> list[str]:
    """The plain file paths of a `sed -i` run's arguments: its operands but the script (the
    first one, when no `-e` or `-f` gives it)."""
    script_given = False
    operands: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word in ("-e", "--expression", "-f", "--file"):
            script_given = True
            index += 1
        elif not word.startswith("-"):
            operands.append(word)
    files = operands if script_given else operands[1:]
    return [path for path in files if _plain_path(path)]


# -- reads ----------------------------------------------------------------------------------

READ_PROGRAMS = frozenset({"cat", "nl", "head", "tail", "less", "more", "sed"})
"""Programs whose run on a file path shows (part of) that file."""
_PIPE_VIEWERS = frozenset(
    {"head", "tail", "nl", "cat", "grep", "rg", "wc", "cut", "sort", "uniq", "less", "more"}
)
"""Programs a read may be piped into (they show text, write no file)."""
_VALUE_OPTIONS = {
    "nl": frozenset("bdfhilnsvw"),
    "head": frozenset("nc"),
    "tail": frozenset("ncs"),
}
_SED_RANGE = re.compile(r"^\s*(?:\d+|\$)(?:\s*,\s*(?:\d+|\$))?\s*p\s*$")
_NOT_PLAIN = re.compile(r"[*?\[\]{}$`~]|^-|^/dev/|/$")
_READ_WORD = re.compile(r"\b(?:cat|nl|head|tail|less|more|sed)\b")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
# Errors sent away: what is shown is still the file (its output sent away shows nothing).
_QUIET_REDIRECT = re.compile(r"\s2>\s*/dev/null|\s2>&1")


@dataclass(frozen=True, slots=True)
class ShellRead:
    """A file a shell command shows: its path, and whether the output is the file's whole
    text as it is (`cat f` alone: not a line range, not numbered, not filtered)."""

    path: str
    whole: bool


def _plain_path(word: str) -> bool:
    return bool(word) and not _NOT_PLAIN.search(word) and "\n" not in word


def _files_after_options(program: str, args: list[str]) -> list[str] | None:
    """The file arguments of `cat`/`nl`/`head`/`tail`/`less`/`more`; None when an argument
    is not a plain path."""
    takes_value = _VALUE_OPTIONS.get(program, frozenset())
    files: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            files.extend(args[index:])
            break
        if word.startswith("-") and len(word) > 1:
            if len(word) == 2 and word[1] in takes_value:
                index += 1  # its value is the next word
            continue
        if word.startswith("+") and program in ("less", "more", "tail"):
            continue
        files.append(word)
    return files if all(_plain_path(path) for path in files) else None


def _sed_files(args: list[str]) -> list[str] | None:
    """The files `sed -n 'a,bp' f…` prints lines of; None for any other sed (an edit, a
    substitution, no `-n`)."""
    quiet = False
    script: str | None = None
    files: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word in ("-n", "--quiet", "--silent"):
            quiet = True
        elif word in ("-e", "--expression") and index < len(args) and script is None:
            script = args[index]
            index += 1
        elif word in ("-E", "-r", "--regexp-extended", "-u", "-s"):
            continue
        elif word.startswith("-"):
            return None  # -i, -f, -z… : not a plain print
        elif script is None:
            script = word
        else:
            files.append(word)
    if not quiet or script is None or not files:
        return None
    if not all(_SED_RANGE.match(part) for part in script.split(";") if part.strip()):
        return None
    return files if all(_plain_path(path) for path in files) else None


def _stage_viewer(stage: list[str]) -> bool:
    """Whether a later stage of a pipeline only shows text."""
    if not stage:
        return False
    program = os.path.basename(stage[0])
    if program == "sed":
        return _sed_files([*stage[1:], "-"]) is not None or _sed_script_only(stage[1:])
    return program in _PIPE_VIEWERS


def _sed_script_only(args: list[str]) -> bool:
    """`sed -n 'a,bp'` reading its input (no file): a viewer stage."""
    options = [word for word in args if word.startswith("-")]
    scripts = [word for word in args if not word.startswith("-")]
    return (
        "-n" in options
        and set(options) <= {"-n", "-e"}
        and len(scripts) == 1
        and all(_SED_RANGE.match(part) for part in scripts[0].split(";") if part.strip())
    )


def _segment_reads(segment: str) -> list[ShellRead]:
    leading = segment.split(None, 1)[0]
    if os.path.basename(leading) not in READ_PROGRAMS and not _ASSIGNMENT.match(leading):
        return []  # told before the segment is split into words
    words = _words(_QUIET_REDIRECT.sub(" ", segment))
    if not words:
        return []
    stages: list[list[str]] = [[]]
    for word in words:
        if word == "|":
            stages.append([])
        elif word and all(char in "|&;<>()" for char in word):
            return []  # a redirection, a subshell, a background job: not a plain read
        else:
            stages[-1].append(word)
    first = stages[0]
    while first and _ASSIGNMENT.match(first[0]):
        first = first[1:]
    if not first or not all(_stage_viewer(stage) for stage in stages[1:]):
        return []
    program = os.path.basename(first[0])
    if program not in READ_PROGRAMS:
        return []
    files = _sed_files(first[1:]) if program == "sed" else _files_after_options(program, first[1:])
    if not files:
        return []
    whole = program == "cat" and len(first) == 2 and len(stages) == 1
    return [ShellRead(path, whole) for path in files]


@lru_cache(maxsize=CACHED_COMMANDS)
def shell_reads(command: str) -> tuple[ShellRead, ...]:
    """The files a command shows, segment by segment (its here-documents' bodies left out);
    none after a `cd`, `pushd` or `popd` (the paths would name other files)."""
    if _READ_WORD.search(command) is None:
        return ()  # told before the command is split (most commands read no file)
    if BEGIN_PATCH in command and patches_in_command(command):
        return ()  # a patch's lines are no commands
    found: list[ShellRead] = []
    segments = command_segments(without_heredocs(command))
    for segment in segments:
        if _first_word(segment) in _DIRECTORY_CHANGES:
            break
        found.extend(_segment_reads(segment))
    if len(segments) > 1:  # other commands' output may stand next to the file's
        return tuple(ShellRead(read.path, False) for read in found)
    return tuple(found)


# -- output envelopes -----------------------------------------------------------------------

_EXIT_HEADER = re.compile(
    r"\AExit code: (-?\d+)\n(?:Wall time: [^\n]*\n)?(?:Total output lines: \d+\n)?Output:\n"
)


# Codex's exec_command: `Chunk ID: …`, `Wall time: …`, `Process exited with code N`, then
# optionally `Original token count: N`, then `Output:` and the output.
_PROCESS_HEADER = re.compile(
    r"\A(?:Chunk ID: [^\n]*\n)?(?:Wall time: [^\n]*\n)?Process exited with code (-?\d+)\n"
    r"(?:Original token count: \d+\n)?Output:\n"
)
_RETURNCODE_OUTPUT = re.compile(
    r"\A<returncode>(-?\d+)</returncode>\n<output>\n(.*?)</output>\s*\Z", re.DOTALL
)


def unwrap_output(text: str) -> tuple[str, int | None]:
    """(the output, its exit code) of an output envelope: Codex's JSON object with `output`
    and `metadata.exit_code`, Codex's `Exit code: N … Output:` header (exec_command's `Process
    exited with code N … Output:`), or mini-swe-agent's
    `<returncode>N</returncode>` and `<output>…</output>`; (text, None) for any other text."""
    if text.startswith('{"output"'):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text, None
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            metadata = value.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            return value["output"], exit_code
        return text, None
    if text.startswith("Exit code: "):
        header = _EXIT_HEADER.match(text)
        if header:
            return text[header.end() :], int(header.group(1))
    if text.startswith(("Chunk ID: ", "Wall time: ", "Process exited")):
        process = _PROCESS_HEADER.match(text)
        if process:
            return text[process.end() :], int(process.group(1))
    if text.startswith("<returncode>"):
        tagged = _RETURNCODE_OUTPUT.match(text)
        if tagged:
            return tagged.group(2), int(tagged.group(1))
    return text, None


_OMITTED = re.compile(r"^\[\.\.\. omitted [1-9]\d* of \d+ lines \.\.\.\]$", re.M)


def output_cut(output: str) -> bool:
    """Whether Codex cut lines out of an output (its `[... omitted N of M lines ...]` line,
    N above 0): the output is then not all the command printed."""
    return "[... omitted " in output and _OMITTED.search(output) is not None
