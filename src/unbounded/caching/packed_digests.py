"""A growable sequence of SHA-256 digests held as one byte buffer.

The cache simulator keeps a digest and a prefix hash for every block of the last request. As
a list of `bytes` each costs an object (65 bytes) and a pointer besides its 32 bytes; packed,
a long session holds 32 bytes per digest and no object per block. Items come back as `bytes`
(usable as dict keys); the tail is cut, or a run dropped from the middle.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

DIGEST_SIZE = 32
"""Bytes of one SHA-256 digest."""


class PackedDigests(Sequence[bytes]):
    """SHA-256 digests in one bytearray: append, read by index, cut the tail."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        """An empty sequence."""
        self._buffer = bytearray()

    def append(self, digest: bytes) -> None:
        """Add one digest at the end (it must be `DIGEST_SIZE` bytes)."""
        if len(digest) != DIGEST_SIZE:
            raise ValueError(f"a digest is {DIGEST_SIZE} bytes, not {len(digest)}")
        self._buffer += digest

    def cut(self, keep: int) -> None:
        """Keep the first `keep` digests, drop the rest."""
        del self._buffer[max(0, keep) * DIGEST_SIZE :]

    def drop(self, start: int, stop: int) -> None:
        """Remove the digests from `start` to `stop` (those after move down)."""
        del self._buffer[max(0, start) * DIGEST_SIZE : max(0, stop) * DIGEST_SIZE]

    def clear(self) -> None:
        """Drop every digest."""
        self._buffer.clear()

    def __len__(self) -> int:
        return len(self._buffer) // DIGEST_SIZE

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        """One digest, or a slice as a list."""
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("PackedDigests index out of range")
        start = index * DIGEST_SIZE
        return bytes(self._buffer[start : start + DIGEST_SIZE])

    def __iter__(self) -> Iterator[bytes]:
        buffer = self._buffer
        for start in range(0, len(buffer), DIGEST_SIZE):
            yield bytes(buffer[start : start + DIGEST_SIZE])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedDigests):
            return self._buffer == other._buffer
        if isinstance(other, list | tuple):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"PackedDigests({len(self)} digests)"
