"""What the LangChain middleware keeps between model calls: the agent's messages as unbounded
entries, their normalized form, the running token count and the microcompaction state, each
brought up to date with what a call added, so a call costs what is new, not the history.

A call is matched with the previous one by message ids (LangGraph gives every message one):
when the first message and the last one the previous call saw still carry the ids they had,
the messages up to that watermark are the ones already converted, even when they come back as
copies (a checkpointed agent reloads its state on every invoke) or as this middleware's own
cleared copies (which keep their ids). Messages without ids are compared by identity or
equality instead, at C speed. When neither holds (a compaction replaced the history, another
conversation came through), what still matches is kept and the rest is converted again.

The view keeps each message's id (the message itself only when it has none), not the
messages: a checkpointed agent hands every invoke new copies of the whole history, and holding
the previous invoke's copies kept two histories alive and made the first call of the next
invoke pay for freeing the old one (about 20 ms at 10,000 messages).

A message someone else replaced under its own id is not read again: give a changed message a
new id. Cleared results keep their original entries in the normalized view (the
microcompaction state knows them as cleared, as a `Session` does); `entries` holds what a
fresh conversion of the agent's messages would give (the placeholders), for the cut and the
summary. The next call checks that the agent applied the clears (each cleared message reads
the placeholder); when it did not (the update was dropped, or the same state planned twice),
the view is built again from the messages, which then say what is cleared.

A conversation the view does not hold yet (a new middleware on a long checkpointed thread, or
a compaction this middleware did not make) is read from where it is no longer settled
(`_langchain_settled`): the messages before that point, whose results are all placeholders
already and which the count's anchor follows, are not held (the view keeps the first one's
id, and the id of the message after them: both still carrying those ids tells a later call
the prefix stands) and are converted only when a compaction needs them, so the first call
costs the tail, not a pass over the history; the scan starts at a split known before
(`sync(settled_from=)`, the middleware's mark) when there is one, and
`settled_after_clears` says where the split is once this call's clears apply. Entries are
converted with one timestamp per call and take their uuid from the message id.

A compaction's summary request normalizes the messages it summarizes: `normalized_head`
gives them from the view's normalizer instead, when they are exactly what normalizing them
anew builds (see there), so a compaction does not pay a second pass over the history. The
results cleared since are swapped in message by message as each call clears them (`_Swap`),
not at the compaction. The messages a compaction of this middleware leaves are built whole
at the next call that finds them (`rebase`): nothing is left out as settled, so the next
compaction takes the view's messages too.

`tail_count` gives the view's count without the view: the last reported usage plus the
estimate of what follows it, for a call on a conversation the view does not hold that needs
nothing else.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import attrgetter, is_not
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from unbounded.caching.breakpoints import CacheBreakpointPlanner, unmarked_message
from unbounded.compaction.facts import PrefixFacts
from unbounded.compaction.ledger import is_cleared_content
from unbounded.compaction.micro import MicrocompactState
from unbounded.compaction.tools_registry import CompactableTools
from unbounded.compaction.view_folds import PrefixFolds
from unbounded.integrations._langchain_settled import scan_calls, settled_split
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, now_iso
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.prefix import shared_prefix_length
from unbounded.tokens.estimate import ContextCounter

Convert = Callable[[BaseMessage, bool, str], "Entry | None"]
"""A message, whether its usage may anchor the count and the timestamp to give -> its entry
(None: never sent)."""
Clearable = Callable[[Mapping[str, None]], Sequence[str]]
"""The tools called (in order of first call) -> those whose results may be cleared."""


class ConversationView:
    """The converted conversation of one agent thread (see the module docstring)."""

    def __init__(self, convert: Convert, clearable: Clearable | None = None) -> None:
        self._convert = convert
        self._clearable = clearable
        """Which tools' results may be cleared (None: the settled prefix is never left out)."""
        self.keys: list[object] = []
        """What stands for each message from `base` on (after the leading system messages)
        the last call saw: its id, or the message itself when it has none (module
        docstring)."""
        self.base = 0
        """How many leading messages are settled: not held at all but for the key of the
        first (`_first`), not converted."""
        self._first: object = None
        """The key of the first message when a settled prefix is left out (`base` > 0)."""
        self.entries: list[Entry | None] = []
        """The entries of the messages from `base` on, index for index (entry i is message
        `base + i`); results this middleware cleared as placeholders."""
        self.stale: frozenset[str] = frozenset()
        """Ids of messages whose usage does not anchor the count (kept across a compaction)."""
        self.normalizer = MessageNormalizer()
        self._sizes = array("q")
        """How many messages the normalizer held after each entry, index for index (an
        array: 8 bytes a message, no int object each)."""
        self._fed: dict[int, dict[str, Any] | None] = {}
        """Index -> the result block the normalizer holds (it was given the entry as it was),
        for the entries cleared since; None when that entry was not one result. The block
        only: the normalizer holds it already, the entry would be kept alive."""
        self._swaps: dict[int, _Swap] = {}
        """Position in the normalizer -> that message with the placeholders of the results
        cleared in it swapped in, made when they were cleared (`normalized_head`)."""
        self.counter = ContextCounter()
        self.micro = MicrocompactState(CompactableTools(()))
        self.tool_positions: dict[str, int] = {}
        """Tool call id -> index of its ToolMessage in `messages`."""
        self.names: dict[str, None] = {}
        """Tools the AI messages called, in order of first call."""
        self._anchor = -1
        """Index of the last entry with a usage (the counter's anchor), -1 for none."""
        self._response = -1
        """Index of the last AI message (the response whose results follow it)."""
        self._pending: dict[int, str] = {}
        """Index -> tool call id of the results the last call cleared (not yet seen cleared)."""
        self._stamp = ""
        """The timestamp of the entries this call converts (one clock reading per call)."""
        self._compacted: list[object] | None = None
        """The keys of the messages a compaction of the last call left (`rebase`)."""
        self.facts = PrefixFacts()
        """The facts ledger's fold over `entries` (kept while no settled prefix is left out),
        so a compaction's ledger reads only the records after its nearest copy."""
        self.folds = PrefixFolds()
        """The folds a summary reads of its view (tools called, messages, media), over
        `entries` as `facts` is: a compaction does not walk the records it summarizes."""
        self.marks = CacheBreakpointPlanner()
        """The normalizer's messages without cache markers, followed call by call (while no
        settled prefix is left out): a compaction's summary request, which repeats them,
        takes them from here (`fork_planner`) instead of reading every message for markers."""

    def reused(self, messages: Sequence[BaseMessage], stale: frozenset[str]) -> int:
        """How many leading messages `sync` would keep from the last call (0: none, the view
        would be built again from the messages); for the messages a compaction of the last
        call left (`rebase`), how many it left (built whole from them)."""
        left = self._left_by_compaction(messages)
        if left:
            return left
        same = self._reusable(messages, stale)
        return same if same and self._clears_applied(messages) else 0

    def sync(
        self, messages: Sequence[BaseMessage], stale: frozenset[str], settled_from: int = 0
    ) -> None:
        """Bring the view up to these messages; only what follows the reused ones is read.
        `settled_from`: a split the settled prefix is known to reach (`mark_start`), where a
        view built again scans from (0: none)."""
        compacted = self._left_by_compaction(messages)
        self._compacted = None
        same = 0 if compacted else self.reused(messages, stale)
        self._pending = {}
        self._stamp = now_iso()
        if compacted:
            same = self._restart(messages, 0, stale, 0, split=False)
        elif same < self.held or not self.held:
            same = self._restart(messages, same, stale, settled_from)
        for message in messages[same:]:
            self._add(message)
        if not self.base:
            self.facts.advance(self.entries, _FACTS_PER_CALL)
            self.folds.advance(self.entries, _FACTS_PER_CALL)
            self.marks.follow(self.normalizer.borrowed_messages())

    def rebase(self, messages: Sequence[BaseMessage]) -> None:
        """A compaction of this call leaves these messages (its summary and the kept tail,
        this call's clears applied): when the next call's messages start with them, the view
        is built from them whole, none left out as settled (a view built again from messages
        it does not know leaves the settled prefix out, and the next compaction would then
        normalize its summarized messages again), and kept up to date from there. Only their
        ids are kept until then."""
        self._compacted = _keys(messages)

    def _left_by_compaction(self, messages: Sequence[BaseMessage]) -> int:
        """How many messages the compaction of the last call left, when these messages start
        with them (else 0)."""
        keys = self._compacted
        if keys is None or len(messages) < len(keys) or _keys(messages[: len(keys)]) != keys:
            return 0
        return len(keys)

    @property
    def held(self) -> int:
        """How many leading messages the view stands for (the settled ones included)."""
        return self.base + len(self.keys)

    def _reusable(self, messages: Sequence[BaseMessage], stale: frozenset[str]) -> int:
        """How many leading messages are those the last call converted (module docstring).

        A settled prefix is known by its first message and the one after it only (the keys
        of its messages are not kept: reading them is a pass over the history): it still
        stands when both carry the ids they had, as the settled mark is checked."""
        seen, base = self.keys, self.base
        if stale != self.stale or not seen:
            return 0
        first = self._first if base else seen[0]
        last = self.held - 1
        if (
            len(messages) > last
            and _has_id(messages[0], first)
            and _has_id(messages[last], seen[-1])
        ):
            return self.held
        if base and not (
            len(messages) > base
            and _matches(messages[0], first)
            and _matches(messages[base], seen[0])
        ):
            return 0
        tail = messages[base:] if base else messages
        return base + shared_prefix_length([_key(message) for message in tail], seen)

    def _clears_applied(self, messages: Sequence[BaseMessage]) -> bool:
        """The messages hold the placeholders of the results the last call cleared."""
        for index, tool_id in self._pending.items():
            message = messages[index] if index < len(messages) else None
            if not (
                isinstance(message, ToolMessage)
                and message.tool_call_id == tool_id
                and is_cleared_content(message.content)
            ):
                return False
        return True

    def _restart(
        self,
        messages: Sequence[BaseMessage],
        keep: int,
        stale: frozenset[str],
        settled_from: int,
        *,
        split: bool = True,
    ) -> int:
        """Start again from the first `keep` of `messages`, those the last call saw (their
        entries are kept as they are), leaving out the settled prefix (scanned for from
        `settled_from` on; `split=False`: none left out); returns how many messages the view
        now holds (the rest are added)."""
        self.stale = stale
        if self._clearable is None or not split:
            scan, base = scan_calls(messages, stale), 0
        else:
            scan, base = settled_split(messages, stale, self._is_clearable, start=settled_from)
        held = max(keep, base)
        old_base, old_entries = self.base, self.entries
        entries: list[Entry | None] = []
        for index in range(base, held):
            if old_base <= index < keep:  # converted by an earlier call
                entries.append(old_entries[index - old_base])
            else:
                message = messages[index]
                entries.append(self._convert(message, (message.id or "") not in stale, self._stamp))
        self.base = base
        self._first = _key(messages[0]) if base else None
        self.keys = _keys(messages[base:held])
        self.entries = entries
        present = [entry for entry in entries if entry is not None]
        normalizer = self.normalizer = MessageNormalizer()
        if base:
            # The settled messages end with a user turn: the tail starts as it does in the
            # whole conversation (after a user message, not as its first message).
            normalizer.append_message({"role": "user", "content": _SETTLED_STAND_IN})
        sizes = self._sizes = array("q")
        for entry in entries:
            if entry is not None:
                normalizer.append(entry)
            sizes.append(len(normalizer))
        self._fed = {}
        self._swaps = {}
        self.facts.reset()
        self.folds.reset()
        self.marks = CacheBreakpointPlanner()  # (its messages are the old normalizer's)
        self.counter = ContextCounter(present)
        self.micro = MicrocompactState(self.micro.tools)
        self.tool_positions = {}
        self.names = scan.names
        self._anchor = self._response = -1
        for offset, entry in enumerate(entries):
            self._index(base + offset, messages[base + offset], entry)
        return held

    def _is_clearable(self, name: str) -> bool:
        """Whether this tool's results may be cleared."""
        return self._clearable is not None and name in self._clearable({name: None})

    def settled_after_clears(self, messages: Sequence[BaseMessage], settled_from: int) -> int:
        """How many leading messages are settled once the agent applies this call's clears,
        scanning from `settled_from` (a split known before) or the view's own split, whichever
        is later (0: none may be left out, or the view has no clearing rule)."""
        if self._clearable is None:
            return 0
        cleared = frozenset(self._pending.values())
        start = max(settled_from, self.base)
        return settled_split(
            messages, self.stale, self._is_clearable, start=start, cleared=cleared
        )[1]

    def _add(self, message: BaseMessage) -> None:
        index = self.held
        entry = self._convert(message, (message.id or "") not in self.stale, self._stamp)
        self.keys.append(_key(message))
        self.entries.append(entry)
        if entry is not None:
            self.normalizer.append(entry)
            self.counter.append(entry)
        self._sizes.append(len(self.normalizer))
        self._index(index, message, entry)

    def _index(self, index: int, message: BaseMessage, entry: Entry | None) -> None:
        if isinstance(message, ToolMessage):
            self.tool_positions[message.tool_call_id] = index
        elif isinstance(message, AIMessage):
            self._response = index
            for call in message.tool_calls:
                self.names[call["name"]] = None
        if entry is not None and entry.usage is not None:
            self._anchor = index

    def use_tools(self, names: Sequence[str]) -> None:
        """Clear the results of these tools (the ledger reads the calls again when they
        change: whether a call may be cleared is fixed when it is read)."""
        if self.micro.tools.canonical_tools != tuple(names):
            self.micro.ledger.tools = CompactableTools(names)
            self.micro.ledger.reset()

    @property
    def stamp(self) -> str:
        """The timestamp of the entries the last sync converted."""
        return self._stamp

    def clear_results(self, replacements: Mapping[int, tuple[str, Entry | None]]) -> None:
        """The results at these indices (of the messages, at or after `base`) are cleared
        (index -> tool call id, the placeholder's entry): their entries follow, and the count
        with them where no usage covered the old ones. The next call checks that the agent
        applied it."""
        changed: set[int] = set()
        for index, (tool_id, entry) in replacements.items():
            self._pending[index] = tool_id
            old = self.entries[index - self.base]
            if index - self.base not in self._fed:
                self._fed[index - self.base] = _single_result(old)
            self.entries[index - self.base] = entry
            self.facts.replaced(index - self.base, old, entry)
            self.folds.replaced(index - self.base, old, entry)
            changed.add(index - self.base)
            if old is not None and entry is not None and index > self._anchor:
                self.counter.replace_estimated(old, entry, in_response=index > self._response)
        self._swap_in(changed)

    def _swap_in(self, cleared: set[int]) -> None:
        """Make again the swapped message of each normalizer message holding one of these
        entries (its results cleared now), with every placeholder of it cleared so far: a
        compaction then takes them as they are (`normalized_head`), not a swap per result
        of the history."""
        if self.base or not cleared:
            return  # (normalized_head gives nothing while a settled prefix is left out)
        sizes, swaps = self._sizes, self._swaps
        by_message: dict[int, set[int]] = {}
        for index in cleared:
            by_message.setdefault(sizes[index] - 1, set()).add(index)
        messages = self.normalizer.borrowed_messages()
        for at, indices in by_message.items():
            known = swaps.get(at)
            if known is not None:
                indices.update(known.indices)
            ordered = tuple(sorted(indices))
            source = messages[at] if 0 <= at < len(messages) else None
            message = None if source is None else self._swapped(source, ordered)
            swaps[at] = _Swap(source, ordered, message)

    def _swapped(self, source: MessageParam, indices: Sequence[int]) -> MessageParam | None:
        """`source` with the result of each of these entries replaced by its placeholder's,
        in index order (None: one is not a result of the same call, not swapped)."""
        content: Any = source["content"]
        for index in indices:
            content = _swapped_result(content, self._fed[index], self.entries[index])
            if content is None:
                return None
        return {"role": "user", "content": content}

    def normalized_head(self, head: Sequence[Entry | None]) -> list[MessageParam] | None:
        """The API messages of `head` (the first entries of the messages after the leading
        system ones, as the plan holds them: results cleared by earlier calls as placeholders,
        this call's as they were), taken from the normalizer: what `normalize_messages` of
        them builds, or None where that is not certain (then normalize them).

        They are the normalizer's first messages when: no settled prefix is left out (the
        normalizer starts with a stand-in then); every entry is the one the normalizer was
        given, or a placeholder of a result it holds as it was (that block is swapped for the
        placeholder's); nothing needs a repair; the head ends with a user message (the last
        message is trimmed as the last); and the entry after the head began a message of its
        own. After a user message that is an AI message (user content joins the user message
        before it), and nothing later changes a message before it: user content joins the last
        message, a later line of a response the last AI message."""
        count = len(head)
        entries, sizes = self.entries, self._sizes
        if self.base or count >= len(entries) or self.normalizer.repairs:
            return None  # (an empty head fails the next check: no entry makes two messages)
        size = sizes[count - 1]
        if sizes[count] != size + 1:
            return None
        messages = self.normalizer.borrowed_messages()
        if messages[size - 1]["role"] != "user":
            return None
        fed = self._fed
        # The entries the head holds as they were (this call clears them): found at C speed.
        differing = list(compress(range(count), map(is_not, head, entries)))
        for index in differing:
            block = fed.get(index)
            if block is None or _single_result(head[index]) is not block:
                return None  # neither what the normalizer holds nor its placeholder
        out = messages[:size]
        # Every other cleared entry of the head reads its placeholder: its message is the swap
        # made when it was cleared, while that message and its clears are still the same.
        as_were = frozenset(differing)
        holding = {sizes[index] - 1 for index in differing}
        for at, swap in self._swaps.items():
            if at >= size:
                continue
            message = swap.message
            if out[at] is not swap.source or at in holding:
                indices = [index for index in swap.indices if index not in as_were]
                message = self._swapped(out[at], indices) if indices else out[at]
            if message is None:
                return None
            out[at] = message
        return out

    def fork_planner(self, messages: Sequence[MessageParam]) -> CacheBreakpointPlanner:
        """A planner for a summary request repeating `messages` (what `normalized_head` gave):
        the normalizer's messages and the swaps made when results were cleared are taken
        without markers as the view keeps them (`CacheBreakpointPlanner.forked`)."""
        return self.marks.forked(messages, self._swaps)


class _Swap:
    """A normalizer message with the placeholders of the results cleared in it swapped in."""

    __slots__ = ("count", "indices", "message", "source", "unmarked")

    def __init__(
        self, source: MessageParam | None, indices: tuple[int, ...], message: MessageParam | None
    ) -> None:
        self.source = source
        """The normalizer's message it was made from (None: there was none at that index)."""
        self.indices = indices
        """The entries whose results are swapped, in index order."""
        self.message = message
        """The swapped message (None: some entry is not one result of its call)."""
        self.unmarked: dict[str, Any] = {}
        """`message` without cache markers (itself when it carries none), made with it."""
        self.count = 0
        """How many blocks `message` has."""
        if message is not None:
            self.unmarked, self.count = unmarked_message(message)


def _swapped_result(
    content: Any, old: dict[str, Any] | None, placeholder: Entry | None
) -> list[Any] | None:
    """`content` with the result block `old` (found by identity) replaced by that of
    `placeholder`, when both are a single result of the same call (None otherwise)."""
    new = _single_result(placeholder)
    if old is None or new is None or old.get("tool_use_id") != new.get("tool_use_id"):
        return None
    for position, block in enumerate(content):
        if block is old:
            return [*content[:position], new, *content[position + 1 :]]
    return None


def _single_result(entry: Entry | None) -> dict[str, Any] | None:
    """The tool result block of a user entry that is that one block (None otherwise)."""
    if entry is None:
        return None
    content = entry.content
    if entry.type != "user" or len(content) != 1:  # (a str of one character: not a dict)
        return None
    block: Any = content[0]
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return None
    return block


def tail_count(
    messages: Sequence[BaseMessage], stale: frozenset[str], convert: Convert
) -> int | None:
    """The count a view of `messages` would hold (`ConversationView.counter.total`), reading
    only the last message whose usage anchors it and what follows; None when no usage does
    (the whole conversation is then estimated: build the view).

    The anchor is the last AI message reporting usage whose id is not in `stale`: each
    AIMessage is a response of its own (LangGraph gives every message its own id), so the
    count is its reported total plus the padded estimate of every message after it, as the
    view's `ContextCounter` sums them."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not (
            isinstance(message, AIMessage)
            and message.usage_metadata
            and (message.id or "") not in stale
        ):
            continue
        stamp = now_iso()
        anchor = convert(message, True, stamp)
        if anchor is None or anchor.usage is None:
            continue  # a reply that never anchors a count (a synthetic one)
        if _continues_a_response(messages, index):
            return None
        tail = [
            convert(later, (later.id or "") not in stale, stamp) for later in messages[index + 1 :]
        ]
        return ContextCounter([anchor, *(entry for entry in tail if entry is not None)]).total
    return None


def _continues_a_response(messages: Sequence[BaseMessage], index: int) -> bool:
    """The AI message at `index` shares its id with the AI message before it (a later line of
    one response): the count then also covers what came between, so build the view."""
    own = messages[index].id
    for earlier_index in range(index - 1, -1, -1):
        earlier = messages[earlier_index]
        if isinstance(earlier, AIMessage):
            return own is not None and earlier.id == own
    return False


_FACTS_PER_CALL = 256
"""At most this many records a call are folded into the facts (a view built again over a long
conversation catches up over a few calls, not in one)."""

_SETTLED_STAND_IN = "[earlier messages: settled]"
"""The user message the normalized tail starts with when a settled prefix is left out (only
the microcompaction ledger reads the normalized tail: it is never sent)."""


def _keys(messages: Sequence[BaseMessage]) -> list[object]:
    """`_key` of each message (ids read at C speed; the per-message rule when one has none)."""
    ids: list[object] = list(map(_ID, messages))
    return [_key(message) for message in messages] if None in ids else ids


_ID = attrgetter("id")


def _key(message: BaseMessage) -> object:
    """What the view keeps for a message: its id, or the message when it has none."""
    return message if message.id is None else message.id


def _matches(message: BaseMessage, key: object) -> bool:
    """The message is the one kept as `key`: by id, or by equality when it has none."""
    return bool(key == _key(message))


def _has_id(message: BaseMessage, key: object) -> bool:
    """The message carries the id kept for an earlier one (the same message, or a copy)."""
    return message.id is not None and message.id == key
