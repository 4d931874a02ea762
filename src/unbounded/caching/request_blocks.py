"""The blocks of successive requests, each request reusing what the previous one computed.

The cache simulator needs, for every block of a request in API order (`blocks.flatten_request`,
less `blocks.without_earlier_thinking` for the models that drop earlier thinking): its digest,
its tokens, the running total, the prefix hash ending at it (`blocks.prefix_hashes`, as raw
bytes) and where the cache_control markers are. A conversation's next request repeats the
previous one's messages and adds a few, so `RequestBlocks.update` keeps those figures per
message and recomputes them only from the first message that is not the very object the
previous request had at that position (or whose earlier thinking is dropped now and was not
then); the prefix hashes continue from the last reused message. A request costs what it adds,
not its length. A message re-added at another position (the history shifted under a moving
cut, or the marked copy of a message replaced by the message itself) takes the digests and
tokens its blocks had in the messages just cut, by block identity, instead of serialising
and hashing them again.

Per block only numbers are held: the digest and the prefix hash (32 bytes each, packed in one
buffer) and the tokens and running total (8 bytes each); the cache_control markers are kept
with their positions. Per message, besides the pointer to it, only its first flat position
and one flag byte (its earlier thinking left out) are held: the prefix hash after it, and
whether a message block came before, follow from the flat figures. The content stays with
the messages of the last request (held so the identity check is sound) and is released when
they leave it.

The tools, system prompt and keying parameters are compared by value; when they change,
everything is recomputed. The figures equal their from-scratch definitions (tested on
generated request sequences).

A caller that knows no later request reaches back past some block (`fold`) lets the figures
of the messages before it go: the columns then hold the tools and system blocks and the
blocks from there on, read by their flat positions as before (`columns`), and a request that
changes a folded message, or needs a folded figure, is computed in full again (`reset`).

Message dicts must not be edited in place once sent, as everywhere in the pipeline (a changed
message is a new dict).
"""

from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from unbounded.caching.blocks import (
    FlatBlock,
    block_digest,
    content_blocks_of,
    message_block_digest,
    message_key_params,
    root_hash,
    system_blocks,
)
from unbounded.caching.husks import HuskedBlock, HuskedMessage, block_type
from unbounded.caching.packed_digests import PackedDigests
from unbounded.model.prefix import shared_prefix_length, shared_prefix_length_own

BlockCount = Callable[[FlatBlock, bytes], int]
"""A block and its digest -> its tokens."""
CutHook = Callable[[int], None]
"""Told the flat position from which the last request's blocks are about to be dropped
(they are still readable when it is called)."""
_THINKING = frozenset({"thinking", "redacted_thinking"})
FOLD_BATCH = 512
"""Blocks are folded this many at a time at least: a fold moves the unfolded tail down."""
T = TypeVar("T")


class FoldedColumn(Sequence[T]):
    """A column read by flat position while the positions `[head, head + folded)` are folded
    away: reading one of those is an IndexError, never another block's figure."""

    __slots__ = ("_folded", "_head", "_items")

    def __init__(self, items: Sequence[T], head: int, folded: int) -> None:
        """The column `items` (the head positions, then those past the folded ones)."""
        self._items = items
        self._head = head
        self._folded = folded

    def __len__(self) -> int:
        return len(self._items) + self._folded

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        """The figure at a flat position (slices are not read by flat position)."""
        if isinstance(index, slice):
            raise TypeError("a folded column is read by position")
        if index < 0:
            index += len(self)
        if index >= self._head:
            index -= self._folded
            if index < self._head:
                raise IndexError(f"flat position {index + self._folded} is folded")
        return self._items[index]


def _int_array() -> array[int]:
    return array("q")


@dataclass(slots=True)
class RequestBlocks:
    """Digests, tokens, totals, prefix hashes and markers of the last request's blocks."""

    count: BlockCount
    on_cut: CutHook | None = None
    """Called before blocks are dropped (see `CutHook`)."""
    digests: PackedDigests = field(default_factory=PackedDigests)
    tokens: array[int] = field(default_factory=_int_array)
    cumulative: array[int] = field(default_factory=_int_array)
    """Tokens up to and including each block."""
    hashes: PackedDigests = field(default_factory=PackedDigests)
    """The prefix hash ending at each block."""
    markers: list[int] = field(default_factory=list)
    """Flat positions of the blocks that carry a cache_control marker, in order."""
    kept: int = 0
    """How many blocks the last update kept from the request before (its unchanged prefix)."""
    marker_controls: list[Mapping[str, Any]] = field(default_factory=list)
    """The cache_control of each of `markers`."""
    _head: tuple[Any, ...] | None = None
    _messages: list[Any] = field(default_factory=list)
    """The last request's messages (held, so an identity check against them is sound;
    compared with the next request's at C speed)."""
    _starts: array[int] = field(default_factory=lambda: array("i"))
    """Flat position of each message's first block (4 bytes each: a request's blocks are
    far fewer than 2**31)."""
    _dropped: bytearray = field(default_factory=bytearray)
    """1 for a message whose earlier thinking was left out."""
    _turns: array[int] = field(default_factory=_int_array)
    """Indices of the turn-starting messages (user messages that are not only tool
    results), in order."""
    _head_blocks: int = 0
    """How many tools and system blocks come before the messages."""
    _params: bytes = b""
    _root: bytes = b""
    _cut_blocks: dict[int, tuple[Any, bool, str, bytes, int]] = field(default_factory=dict)
    """id(block) -> (block, first, role, digest, tokens) of the blocks of the messages the
    current update cut, for the messages it adds again; empty between updates."""
    _source: object = None
    """Who made the last request (`update`'s `unchanged`), None when not told."""
    folded: int = 0
    """How many blocks after the head have their figures folded away (`fold`): the columns
    hold the head's, then those of flat positions `head + folded` on."""
    _resumed: bool = False
    """`resume` was called since the last update."""
    agreed: int = 0
    """How many first messages of the last update's request equal those of the request before
    it here (as found before any turn or fold made it recompute more; 0 after a head change):
    what a shelved head that agreed with the one before may still share with it."""

    @property
    def size(self) -> int:
        """How many blocks the last request has (folded ones included)."""
        return len(self.tokens) + self.folded

    @property
    def head_blocks(self) -> int:
        """How many tools and system blocks come before the messages."""
        return self._head_blocks

    def columns(self) -> tuple[Sequence[int], Sequence[int], Sequence[bytes]]:
        """(tokens, cumulative, prefix hashes) read by flat position, folded or not."""
        if not self.folded:
            return self.tokens, self.cumulative, self.hashes
        head, folded = self._head_blocks, self.folded
        return (
            FoldedColumn(self.tokens, head, folded),
            FoldedColumn(self.cumulative, head, folded),
            FoldedColumn(self.hashes, head, folded),
        )

    def readable(self, start: int, stop: int) -> bool:
        """Whether the figures of flat positions `[start, stop]` are all held."""
        return not self.folded or stop < self._head_blocks or start >= self._head_blocks + (
            self.folded
        )

    @property
    def head(self) -> tuple[Any, ...] | None:
        """The last request's `request_head` (None before any, or after `reset`)."""
        return self._head

    def resume(self) -> None:
        """Take these figures up again after requests of another head were made elsewhere
        (`CacheSimulator` keeps one `RequestBlocks` per head): the next update compares every
        message (a source's promise was about its last request, not this one's) and keeps
        nothing from the request before it (`kept` 0, as for a changed head)."""
        self._source = None
        self._resumed = True

    def agreement(self, messages: Sequence[Any]) -> int:
        """How many first messages of `messages` equal the last request's."""
        return shared_prefix_length_own(messages, self._messages)

    def trim(self, keep: int) -> bool:
        """Let go of the last request's messages from `keep` on, and of their figures, when
        no later request shares them (a shelved head whose source moved on): the next update
        computes from there, as it would have. The turn starts stay (the next update reads
        where the last request's last turn was: the earlier thinking held before it is
        dropped). False, with nothing let go, when that update would compute everything
        again anyway (a folded message or the block after it would change): these figures
        are then of no more use."""
        starts = self._starts
        if keep >= len(starts):
            return True
        if self.folded and starts[keep] <= self._head_blocks + self.folded:
            return False
        self._cut(keep, trim=True)
        return True

    def reset(self) -> None:
        """Forget the last request: the next update is computed in full (folded figures
        come back)."""
        self._head = None

    def fold(self, before: int, keep_messages: int) -> None:
        """Let go of the figures of the messages whose blocks all come before flat position
        `before`, but the last `keep_messages` messages and the last block (the chain goes
        on from it), and, when earlier thinking is dropped, the last turn (the next turn changes
        it); in runs of `FOLD_BATCH` blocks at least. The caller promises no later request
        reads them: one that does is computed in full again."""
        starts = self._starts
        upto = min(bisect_left(starts, before + 1) - 1, len(starts) - keep_messages)
        if self._head is not None and self._head[-1] and self._turns:
            # A new turn changes the messages from there on: they, and the block the chain
            # goes on from, stay.
            upto = min(upto, self._turns[-1] - 1)
        if upto <= 0:
            return
        stop = min(starts[upto], self.size - 1)
        start = self._head_blocks + self.folded
        if stop - start < FOLD_BATCH:
            return
        low, high = self._head_blocks, stop - self.folded
        self.digests.drop(low, high)
        self.hashes.drop(low, high)
        del self.tokens[low:high], self.cumulative[low:high]
        self.folded += high - low

    def _raw(self, position: int) -> int:
        """Where a flat position's figures are in the columns (it must not be folded)."""
        return position - self.folded if position >= self._head_blocks else position

    def __deepcopy__(self, memo: dict[int, Any]) -> RequestBlocks:
        # A copy starts empty: its first request is computed in full (no message is shared).
        return RequestBlocks(self.count)

    def update(
        self,
        request: Mapping[str, Any],
        *,
        drop_earlier_thinking: bool,
        unchanged: tuple[object, int] | None = None,
    ) -> None:
        """Make the figures those of `request` (see the module docstring).

        `unchanged` (source, n): the caller's promise that `source` made this request and
        the last one it made, and that the first n messages of the two are the same objects.
        When the last update was given the same source, the messages are compared from n on
        only (O(new), not O(messages))."""
        messages = request.get("messages") or []
        source = unchanged[0] if unchanged is not None else None
        told, self._source = self._source if source is not None else None, source
        head = request_head(request, drop_earlier_thinking)
        fresh = head != self._head
        resumed, self._resumed = self._resumed, False
        if fresh:
            self._head = head
            self._set_head(request)
            self._messages.clear()
            del self._starts[:], self._dropped[:], self._turns[:]
        if unchanged is not None and told is source and type(messages) is list:
            start = min(unchanged[1], len(messages), len(self._messages))
            reused = start + shared_prefix_length(messages[start:], self._messages[start:])
        else:
            reused = shared_prefix_length_own(messages, self._messages)
        self.agreed = reused
        if resumed:
            # Equal messages were reused: hold the request's own objects (settled copies made
            # while these figures were shelved), not equal ones no one else holds.
            self._messages[:reused] = messages[:reused]
        turns = self._turns
        turns_before = turns[-1] if turns else -1
        kept = bisect_left(turns, reused)
        turn_start = turns[kept - 1] if kept else -1
        if drop_earlier_thinking:
            # A new turn drops the earlier thinking of the turns it closes: those messages
            # change from where the previous last turn started.
            for index in range(reused, len(messages)):
                message = messages[index]
                if isinstance(message, Mapping) and _is_turn(message):
                    turn_start = index
            if turn_start != turns_before:
                # Assistant messages between the two turn starts change: from the earlier one.
                reused = min(reused, max(0, min(turn_start, turns_before)))
        if (
            self.folded
            and reused < len(self._starts)
            and self._starts[reused] <= self._head_blocks + self.folded
        ):
            # A folded message changed (or its thinking is dropped now), or the chain would
            # go on from a folded block: in full.
            self._head = None
            agreed = self.agreed
            self.update(request, drop_earlier_thinking=drop_earlier_thinking, unchanged=unchanged)
            self.agreed = agreed
            return
        if reused < len(messages):
            self._remember_cut(reused)
        self._cut(reused)
        self.kept = 0 if fresh or resumed else self.size
        try:
            for index in range(reused, len(messages)):
                self._add_message(
                    index, messages[index], turn_start if drop_earlier_thinking else -1
                )
        finally:
            self._cut_blocks.clear()

    def _set_head(self, request: Mapping[str, Any]) -> None:
        """The tools and system blocks, and the hashes they start the chain with."""
        if self.on_cut is not None and self.size:
            self.on_cut(0)
        self.folded = 0
        self.digests.clear()
        del self.tokens[:], self.cumulative[:]
        self.hashes.clear()
        self.markers.clear()
        self.marker_controls.clear()
        current = root_hash(request)
        self._params = message_key_params(request)
        head: list[FlatBlock] = [
            FlatBlock("tools", index, 0, tool)
            for index, tool in enumerate(request.get("tools") or [])
            if isinstance(tool, Mapping)
        ]
        head += [
            FlatBlock("system", index, 0, block)
            for index, block in enumerate(system_blocks(request.get("system")))
        ]
        for block in head:
            digest = block_digest(block)
            current = hashlib.sha256(current + digest).digest()
            control = block.block.get("cache_control")
            self._append(control, digest, self.count(block, digest), current)
        self._root = current
        self._head_blocks = len(self.tokens)

    def _remember_cut(self, keep: int) -> None:
        """Note the digests and tokens of the blocks of the messages from `keep` on."""
        memo = self._cut_blocks
        for at in range(keep, len(self._messages)):
            message = self._messages[at]
            if not isinstance(message, Mapping):
                continue  # (a husked message carries its figures: no need to note them)
            role = str(message.get("role", ""))
            position = self._raw(self._starts[at])
            dropped = self._dropped[at]
            for index, block in enumerate(_blocks_of(message.get("content"))):
                if dropped and block_type(block) in _THINKING:
                    continue
                memo[id(block)] = (
                    block,
                    index == 0,
                    role,
                    self.digests[position],
                    self.tokens[position],
                )
                position += 1

    def _cut(self, keep: int, *, trim: bool = False) -> None:
        """Keep the first `keep` messages' figures, drop the rest (a `trim` keeps the turn
        starts and tells no hook: the figures are not the last request's of the simulator)."""
        position = self._starts[keep] if keep < len(self._starts) else self.size
        if not trim and self.on_cut is not None and position < self.size:
            self.on_cut(position)
        del self._messages[keep:], self._starts[keep:], self._dropped[keep:]
        if not trim:
            del self._turns[bisect_left(self._turns, keep) :]
        raw = self._raw(position)
        self.digests.cut(raw)
        self.hashes.cut(raw)
        del self.tokens[raw:], self.cumulative[raw:]
        while self.markers and self.markers[-1] >= position:
            self.markers.pop()
            self.marker_controls.pop()

    def _add_message(self, index: int, message: Any, turn_start: int) -> None:
        start = self.size
        # The chain so far ends at the last block (the root when there is none); the keying
        # parameters were mixed in once a message block came.
        chain = self.hashes[-1] if start else self._root
        started = start > self._head_blocks
        self._messages.append(message)
        self._starts.append(start)
        if type(message) is HuskedMessage:
            self._add_husked(message, index, turn_start, chain, started)
            return
        if not isinstance(message, Mapping):
            self._dropped.append(0)
            return
        role = str(message.get("role", ""))
        dropped = role == "assistant" and index < turn_start
        self._dropped.append(dropped)
        for position, block in enumerate(_blocks_of(message.get("content"))):
            if dropped and block_type(block) in _THINKING:
                continue
            first = position == 0
            known = self._cut_blocks.get(id(block))
            if type(block) is HuskedBlock:
                if block.first != first or block.role != role:
                    raise ValueError(
                        f"a husked block moved (message {index}, block {position}): its "
                        "digest is that of another place; husk only messages that stay"
                    )
                digest, tokens, control = block.digest, block.tokens, block.marker
            elif known is not None and known[0] is block and known[1] == first and known[2] == role:
                digest, tokens, control = known[3], known[4], block.get("cache_control")
            else:
                digest = message_block_digest(block, role, first=first)
                flat = FlatBlock("messages", index, position, block, role)
                tokens, control = self.count(flat, digest), block.get("cache_control")
            keyed = digest
            if not started:
                keyed = hashlib.sha256(self._params + digest).digest()
                started = True
            chain = hashlib.sha256(chain + keyed).digest()
            self._append(control, digest, tokens, chain)
        if _is_turn(message):
            self._turns.append(index)

    def _add_husked(
        self, message: HuskedMessage, index: int, turn_start: int, chain: bytes, started: bool
    ) -> None:
        """`_add_message` of a message packed whole: its blocks' figures are in it (it is
        never a turn: husked user messages hold tool results only)."""
        dropped = message.role == "assistant" and index < turn_start
        self._dropped.append(dropped)
        for block in message.blocks():
            if dropped and block.kind in _THINKING:
                continue
            keyed = block.digest
            if not started:
                keyed = hashlib.sha256(self._params + keyed).digest()
                started = True
            chain = hashlib.sha256(chain + keyed).digest()
            self._append(block.marker, block.digest, block.tokens, chain)

    def swap(self, index: int, old: object, new: object) -> bool:
        """Hold `new` in place of `old` as the last request's message `index`, when `old` is
        there: the caller's promise that `new` is `old` settled (`caching/husks.py`), whose
        figures are those held. Whether it was there."""
        messages = self._messages
        if 0 <= index < len(messages) and messages[index] is old:
            messages[index] = new
            return True
        return False

    def _append(self, control: Any, digest: bytes, tokens: int, chain: bytes) -> None:
        cumulative = self.cumulative
        cumulative.append((cumulative[-1] if cumulative else 0) + tokens)
        self.digests.append(digest)
        self.tokens.append(tokens)
        self.hashes.append(chain)
        if isinstance(control, Mapping):
            self.markers.append(self.size - 1)
            self.marker_controls.append(control)


def request_head(request: Mapping[str, Any], drop_earlier_thinking: bool) -> tuple[Any, ...]:
    """What a request's figures all depend on (model, betas, thinking, tool_choice, tools,
    system, whether earlier thinking is dropped): a change of it recomputes everything."""
    return (
        request.get("model"),
        tuple(sorted(str(b) for b in request.get("betas") or [])),
        request.get("thinking"),
        request.get("tool_choice"),
        request.get("tools"),
        request.get("system"),
        drop_earlier_thinking,
    )


def _blocks_of(content: Any) -> list[Any]:
    """`content_blocks_of`, husked blocks included (in their places)."""
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping) or type(b) is HuskedBlock]
    return content_blocks_of(content)


def _is_turn(message: Mapping[str, Any]) -> bool:
    """A user message with blocks that are not all tool results."""
    if message.get("role") != "user":
        return False
    blocks = _blocks_of(message.get("content"))
    return bool(blocks) and any(block_type(block) != "tool_result" for block in blocks)
