"""Crash-safe, private file writes: whole files replaced atomically, folders and files owner-only.

A crash during `atomic_write_bytes` leaves either the old file or the complete new one: the
bytes go to a temporary file in the same folder (mode 0600), are flushed and fsynced, then
`os.replace`d over the target, and the folder is fsynced so the rename survives power loss.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

logger = logging.getLogger(__name__)

FILE_MODE = 0o600
"""Owner read/write only: transcripts, state and memory are session data."""
FOLDER_MODE = 0o700
"""Owner-only session folders."""


def private_folder(path: str | Path) -> Path:
    """Create a folder (and its parents) owner-only when missing; return it."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    return folder


def fsync_directory(folder: Path) -> None:
    """Make a rename in `folder` durable where the platform allows opening a directory."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def atomic_write_chunks(
    path: str | Path, chunks: Iterable[bytes], *, mode: int | None = FILE_MODE
) -> Path:
    """Write chunks to `path` atomically (see the module docstring).

    `mode=None` keeps the mode of the file being replaced (0600 for a new one).
    """
    target = Path(path)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = FILE_MODE
    private_folder(target.parent)
    descriptor, temp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    fsync_directory(target.parent)
    return target


_OWN_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def own_descriptor(path: str | Path) -> int | None:
    """The open descriptor of this process that `path` names (/dev/stdout, /dev/fd/N,
    /proc/self/fd/N, ... once normalized), or None."""
    named = os.path.abspath(path)
    number = _OWN_STREAMS.get(named)
    if number is None:
        folder, _, tail = named.rpartition("/")
        own_folders = (
            "/dev/fd",
            "/proc/self/fd",
            "/proc/thread-self/fd",
            f"/proc/{os.getpid()}/fd",
        )
        if folder not in own_folders or not (tail.isascii() and tail.isdigit()):
            return None
        number = int(tail)
    try:
        os.fstat(number)
    except (OSError, OverflowError):
        return None  # not open here: the path is opened as any other
    return number


def write_output_chunks(
    path: str | Path, chunks: Iterable[bytes], *, mode: int | None = None
) -> Path:
    """Write a file the user named (a report, an -o file) as a shell's `>` would, but whole.

    A link is followed and its target written atomically (the link stays); a path that is not
    a regular file (a named pipe, a terminal) or that names a process's open file (below /dev
    or /proc) is opened and written directly, since replacing it would break it; one naming
    this process's own descriptor (/dev/stdout, /dev/fd/N) is written through that descriptor.
    `mode` is as `atomic_write_chunks`'s (None keeps a replaced file's permissions).
    """
    target = Path(path)
    descriptor = own_descriptor(target)
    if descriptor is not None:
        # Re-opening it would truncate a redirected stdout and write from offset 0, over what
        # this process writes there next: written through the descriptor, at its offset.
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(descriptor, view) :]
        return target
    try:
        regular = stat.S_ISREG(target.stat().st_mode)
    except FileNotFoundError:
        regular = True  # a new file (or a link to one): made whole, as the target
    # Normalized: Path.absolute() keeps "..", so ../../proc/self/fd/N passed for a file.
    if not regular or os.path.abspath(target).startswith(("/dev/", "/proc/")):
        with target.open("wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
        return target
    return atomic_write_chunks(os.path.realpath(target), chunks, mode=mode)


def atomic_write_json(path: str | Path, data: Any) -> Path:
    """Write JSON (indented, keys sorted) to `path` atomically, mode 0600."""
    payload = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    return atomic_write_chunks(path, [payload])


_NO_FOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def read_private_file(root: Path, *names: str) -> bytes | None:
    """The bytes of the regular file `root/names...`, reached without following any link.

    Each folder below `root` and the file itself are opened with O_NOFOLLOW, one level at a
    time, so a link placed anywhere below `root` is refused, not followed; the file is opened
    non-blocking and read only when it is a regular file (never a FIFO, device or folder).
    None when it is missing or refused (a refusal is logged).
    """
    if any(not name or name in (".", "..") or "/" in name or "\0" in name for name in names):
        raise ValueError(f"not a plain name below {root}: {'/'.join(names)!r}")
    opened: list[int] = []
    try:
        descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        opened.append(descriptor)
        for folder in names[:-1]:
            descriptor = os.open(
                folder, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW, dir_fd=descriptor
            )
            opened.append(descriptor)
        descriptor = os.open(names[-1], os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW, dir_fd=descriptor)
        opened.append(descriptor)
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            logger.warning("%s is not a regular file: not read", root.joinpath(*names))
            return None
        os.set_blocking(descriptor, True)
        chunks: list[bytes] = []
        while chunk := os.read(descriptor, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except FileNotFoundError:
        return None
    except OSError as error:
        # ELOOP: a link where a file or folder should be; ENOTDIR: a file where a folder is.
        logger.warning("%s refused: %s", root.joinpath(*names), error.strerror)
        return None
    finally:
        for descriptor in reversed(opened):
            os.close(descriptor)


def append_private(path: str | Path, payload: bytes, *, fsync: bool = True) -> None:
    """Append bytes in one write to a file created 0600, flushed and (by default) fsynced."""
    target = Path(path)
    descriptor = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    with os.fdopen(descriptor, "ab") as handle:
        handle.write(payload)
        handle.flush()
        if fsync:
            os.fsync(handle.fileno())
