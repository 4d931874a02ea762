"""Giving the heap's free pages back to the system while a long replay runs.

glibc's allocator keeps what a process frees for its next allocations. A replay of real
sessions frees large blocks (a recorded line holding an image is about 1 MB; after the first
such block is freed glibc serves later large blocks from the heap, not from their own
mappings) between small objects that live for the whole run, so free pages pile up between
used ones and still count as the process's resident memory: on 5,000 calls of real
sessions the live objects stayed flat while the resident size grew 6 KB a call.
`malloc_trim(0)` hands every whole free page back (the memory stays the process's to reuse).
The command calls it every `TRIM_EVERY` calls of the main replay (a variant, replayed after
it, runs in the memory the main replay let go), and first fixes the mmap threshold at
`MMAP_THRESHOLD` so large blocks keep mappings of their own, returned whole when freed.
Elsewhere than glibc it does nothing; the library never touches the allocator."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from unbounded.errors import ConfigError

logger = logging.getLogger(__name__)

TRIM_EVERY = 200
"""Calls between two trims. A trim walks the free heap: about a millisecond on a 150 MB heap,
about 20 on a fragmented 490 MB one, against 5-20 ms a replayed call: at most 2%."""


MMAP_THRESHOLD = 256 * 1024
"""Bytes from which glibc gives a block a mapping of its own, returned whole when it is freed.
glibc's own threshold starts at 128 KiB and rises to the largest such block freed (up to
32 MiB): after the first recorded line of about 1 MB is freed, every later one is carved
from the heap and its pages stay there. Set once, the threshold stays put."""

_M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameter number for the mmap threshold (malloc.h)."""


def glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (macOS, musl, Windows)."""
    trim = _glibc_function("malloc_trim")
    if trim is None:
        logger.debug("no malloc_trim in this C library: freed heap pages stay resident")
        return None
    import ctypes

    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's `mallopt`, or None where the C library has none (macOS, musl, Windows)."""
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
        return None
    import ctypes

    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt  # type: ignore[no-any-return]


def _glibc_function(name: str) -> Any:
    """A function of the C library the interpreter runs on, on Linux; else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # here: an interpreter built without it still runs every command

        return getattr(ctypes.CDLL(None), name)
    except (ImportError, OSError, AttributeError):
        return None


def map_large_blocks(
    threshold: int = MMAP_THRESHOLD, mallopt: Callable[[int, int], int] | None = None
) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes (`MMAP_THRESHOLD`) with `mallopt`
    (glibc's when not given); whether it was set (never where the C library has none)."""
    chosen = mallopt if mallopt is not None else glibc_mallopt()
    if chosen is None:
        return False
    if chosen(_M_MMAP_THRESHOLD, threshold) != 1:
        logger.debug("mallopt refused an mmap threshold of %d bytes", threshold)
        return False
    return True


class HeapTrimmer:
    """A replay's progress hook that gives free heap pages back every `every` calls."""

    def __init__(
        self,
        every: int = TRIM_EVERY,
        trim: Callable[[int], int] | None = None,
        mallopt: Callable[[int, int], int] | None = None,
    ) -> None:
        """Trim with `trim` (glibc's `malloc_trim` when not given; nothing when there is
        none) each time the count of calls done reaches a multiple of `every`; first fix the
        mmap threshold (`map_large_blocks`) with `mallopt` (glibc's when not given)."""
        if every < 1:
            raise ConfigError(f"HeapTrimmer: every must be at least 1 call, not {every}")
        self.every = every
        self._trim = trim if trim is not None else glibc_malloc_trim()
        self.mapped = map_large_blocks(mallopt=mallopt)
        """Whether the mmap threshold was set."""
        self.trims = 0
        """How many trims ran."""

    def __call__(self, done: int, total: int) -> None:
        """Called after each replayed call with the calls done and the calls in all."""
        if self._trim is not None and done % self.every == 0:
            self._trim(0)
            self.trims += 1

    def around(self, progress: Callable[[int, int], None] | None) -> Callable[[int, int], None]:
        """A progress hook that trims, then calls `progress` (when given)."""
        if progress is None:
            return self

        def both(done: int, total: int) -> None:
            self(done, total)
            progress(done, total)

        return both
