"""An immutable sequence that shares its unchanged part with the one it was made from.

The break detector keeps, per request, the digests of every message. Each turn's request is
the last one with a few messages changed at the end, so a flat tuple per turn would copy the
whole history (and touch every element) to change its tail. `DigestRun` keeps its items in
chunks of `CHUNK` at fixed positions: `extended` reuses every full chunk before the first
change and builds only the rest, so a turn costs the chunks it changed plus a tuple of chunk
references (`len / CHUNK` of them). The chunking depends only on the items, so equal runs
have equal chunk tuples, compared at C speed (shared chunks by identity).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, TypeVar, overload

T = TypeVar("T")

CHUNK = 256
"""Items per chunk: large enough that the tuple of chunks stays short at 100,000 items."""


class DigestRun(Sequence[T]):
    """A tuple-like sequence whose copies with a changed tail share the unchanged chunks."""

    __slots__ = ("_chunks", "_length")

    def __init__(self, items: Iterable[T] = ()) -> None:
        """A run of these items."""
        flat = tuple(items)
        self._chunks: tuple[tuple[T, ...], ...] = _chunked(flat)
        self._length = len(flat)

    @classmethod
    def _of_chunks(cls, chunks: tuple[tuple[T, ...], ...], length: int) -> DigestRun[T]:
        run: DigestRun[T] = cls.__new__(cls)
        run._chunks = chunks
        run._length = length
        return run

    def extended(self, keep: int, items: Iterable[T]) -> DigestRun[T]:
        """The first `keep` items of this run followed by `items` (this run is unchanged)."""
        keep = max(0, min(keep, self._length))
        full = keep // CHUNK
        head = self._chunks[:full]
        start = self._chunks[full][: keep - full * CHUNK] if keep % CHUNK else ()
        rest = start + tuple(items)
        return DigestRun._of_chunks(head + _chunked(rest), full * CHUNK + len(rest))

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        """An item, or a slice as a tuple."""
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("DigestRun index out of range")
        return self._chunks[index // CHUNK][index % CHUNK]

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DigestRun):
            return self._length == other._length and self._chunks == other._chunks
        if isinstance(other, tuple):
            return self._length == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))  # equal to an equal tuple's hash, as == with tuples says

    def __repr__(self) -> str:
        return f"DigestRun({tuple(self)!r})"


def _chunked(items: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
    """`items` cut into chunks of `CHUNK` (the last one shorter)."""
    if len(items) <= CHUNK:
        return (items,) if items else ()
    return tuple(items[at : at + CHUNK] for at in range(0, len(items), CHUNK))
