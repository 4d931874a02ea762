"""The strategies a replay compares ours with, each simulated on the same recorded calls.

Every strategy sees the same recorded messages, the same opaque system prompt + tools prefix,
the same token counter and the same prompt-cache simulator settings as ours (`prefix.py`),
and builds its own request before each recorded call; the recorded response is then appended
to its history. All use the auto-compact threshold of the replayed model and window, except
`clear_every_turn`, which uses LangChain's own trigger.

- `none`: send everything. A call whose prompt is over the context window is an overflow (the
  API would refuse it); it is still priced, as if the window were larger.
- `truncate`: drop the oldest turns until the request fits under the threshold. Cuts fall at
  user messages; tool results whose tool_use was dropped go with it (pairs stay together), and
  a note says the conversation was truncated. The cut only moves forward, by as little as
  needed, so once over the threshold it moves at nearly every call (and misses the cache).
- `summarize_no_cache`: at the threshold, summarize everything in a separate call with no
  system prompt, no tools and no cache markers, and replace the history with one user message
  holding the summary, as the Anthropic SDK tool runner's client-side compaction does. The
  summary call is priced too. Its text comes from the offline extractive summarizer (so a
  replay stays offline whatever summarizer ours uses).
- `clear_every_turn`: LangChain's `ClearToolUsesEdit` (trigger 100,000 tokens, keep 3,
  placeholder `[cleared]`): on a copy of every request over the trigger, every tool result but
  the 3 most recent is cleared. The history itself keeps the results, so the cleared set moves
  by one result per turn, the prefix changes every turn and the simulator shows the cache
  misses that follow.
"""

from __future__ import annotations

import weakref
from array import array
from collections import deque
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, cast, overload

import orjson

from unbounded.caching.blocks import FlatBlock, is_markable, message_block_digest
from unbounded.caching.husks import (
    BlockTokens,
    HuskedBlock,
    HuskedMessage,
    block_fields,
    block_type,
    husk_blocks,
    husk_message,
    is_husked_message,
)
from unbounded.caching.simulator import CacheSimulator, SimulatedCall
from unbounded.caching.system_prompt import get_cache_control
from unbounded.caching.ttl import CacheTtl
from unbounded.catalog import ModelInfo
from unbounded.compaction.prompts import summary_message_text
from unbounded.errors import SettledMessageError
from unbounded.evaluation.prefix import OpaquePrefix
from unbounded.evaluation.recorded import RecordedCall
from unbounded.evaluation.simulated_calls import SimulatedCalls, SpillColumn, SpillFile
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer, normalize_plain_messages
from unbounded.model.prefix import shared_prefix_length
from unbounded.model.request import ProviderRequest
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.tokens.estimate import content_tokens, rough_token_count

BASELINES: tuple[str, ...] = ("none", "truncate", "summarize_no_cache", "clear_every_turn")
"""The baseline strategies, in report order."""

TRUNCATION_NOTE = "[Earlier conversation truncated to fit the context window.]"
NAIVE_SUMMARY_PROMPT = (
    "You have been working on the task described above but have not finished it yet. Write a "
    "summary of the conversation so far that lets you continue the work with only this "
    "summary as context. Wrap it in <summary></summary> tags."
)
"""The summary prompt of the `summarize_no_cache` baseline (in our words)."""
CLEAR_TRIGGER_TOKENS = 100_000
"""LangChain ClearToolUsesEdit's default trigger."""
CLEAR_KEEP = 3
"""LangChain ClearToolUsesEdit's default number of most recent tool results kept."""
CLEAR_PLACEHOLDER = "[cleared]"
"""LangChain ClearToolUsesEdit's default placeholder."""
SUMMARY_MAX_TOKENS = 8_192
"""max_tokens of the baseline's summary request."""
UNSETTLED_TAIL = 4
"""The last messages of a history are never husked: the normalizer may still merge into or
repair the last assistant message and the user message after it."""

Swap = tuple[int, object, object]
"""(index, message, what replaces it): a message of a list settled (`History.husk`), or a
cleared copy of it settled with it, the figures of both the same."""


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """What every strategy of one replay shares."""

    model: ModelInfo
    model_name: str
    prefix: OpaquePrefix
    ttl: CacheTtl
    context_window: int
    threshold: int
    """Auto-compact threshold of the replayed model and window."""
    start_time: float
    max_tokens: int = 32_000
    call_models: Mapping[str, ModelInfo] = field(default_factory=dict)
    """Other models the recorded session called, by the name its calls carry: each call is
    planned with its own model and priced as it."""

    def model_for(self, call: RecordedCall) -> str:
        """The model name a request for this recorded call carries (its own, when known)."""
        if call.model and call.model in self.call_models:
            return call.model
        return self.model_name

    def request(
        self,
        messages: Sequence[MessageParam],
        *,
        model_name: str | None = None,
        marker: LastMarked | None = None,
    ) -> ProviderRequest:
        """A main request with the opaque prefix and the cache markers placed.

        The same markers `place_cache_breakpoints` gives such a request (the system blocks,
        and one on the last markable block of the last message), placed without copying the
        whole conversation: only the marked message is copied (by `marker`, when given, into
        its own list, reusing what it did for the last request).
        """
        control = get_cache_control(None, self.ttl)
        body: ProviderRequest = {
            "model": model_name or self.model_name,
            "max_tokens": self.max_tokens,
            "system": self.prefix.system_blocks(self.ttl),
            "messages": (
                marker.mark(messages, control)
                if marker is not None
                else mark_last_message(messages, control)
            ),
        }
        return body

    def simulator(
        self, tools: Sequence[Mapping[str, Any]] = (), *, fold_settled: bool = False
    ) -> CacheSimulator:
        """A fresh cache simulator for one strategy (warm prefix primed, after the tools the
        strategy's requests declare); `fold_settled` for a strategy whose requests carry
        their only message marker on the last message (`CacheSimulator.fold_settled`)."""
        simulator = self.prefix.simulator(
            self.model,
            self.model_name,
            time=self.start_time,
            ttl=self.ttl,
            other_models=self.call_models,
            tools=tools,
        )
        simulator.fold_settled = fold_settled
        return simulator


@dataclass(slots=True)
class StrategyRun:
    """What one strategy did and cost, call by call."""

    name: str
    main_calls: SimulatedCalls = field(default_factory=SimulatedCalls)
    """Each recorded call's main request (columns: `simulated_calls.py`)."""
    side_calls: SimulatedCalls = field(default_factory=SimulatedCalls)
    """Summary calls (priced, not part of the conversation)."""
    cost_per_call: SpillColumn = field(default_factory=lambda: SpillColumn("d", SpillFile()))
    """Cost of each recorded call's step, side calls included: a column whose full chunks
    move to a file (read whole only for the total), so a strategy holds a chunk of them,
    not one float a call, however long the replay."""
    overflows: int = 0
    compactions: int = 0
    fixed_cost_usd: float = 0.0
    """Recorded calls no strategy replays, priced as recorded and the same for every strategy
    (responses on branches the thread does not follow: a rewound branch was paid for)."""

    def add(self, call: SimulatedCall, side: Sequence[SimulatedCall], window: int) -> None:
        """Account for one recorded call's main request and its side calls."""
        self.main_calls.append(call)
        self.side_calls.extend(side)
        self.cost_per_call.append(call.cost_usd + sum(s.cost_usd for s in side))
        if call.prompt_tokens > window:
            self.overflows += 1

    @property
    def cost_usd(self) -> float:
        """Total price of the strategy's calls, the fixed cost included."""
        # Summed in call order, as the floats were added: the same total to the last bit.
        total: float = sum(self.cost_per_call)
        return total + self.fixed_cost_usd

    @property
    def cache_read_share(self) -> float:
        """read / (input + creation + read) over every call of the strategy."""
        main, side = self.main_calls.totals(), self.side_calls.totals()
        total = main.prompt_tokens + side.prompt_tokens
        read = main.cache_read_input_tokens + side.cache_read_input_tokens
        return read / total if total else 0.0

    def cost_parts(self) -> dict[str, float]:
        """Where the cost goes: the conversation's cache writes, cache reads, and uncached
        input with output; every summary call; the recorded calls not replayed (USD)."""
        # Sums read from the columns (no call object built), in call order as before.
        main = self.main_calls.totals()
        writes, reads = main.cache_write_cost_usd, main.cache_read_cost_usd
        return {
            "cache_writes": writes,
            "cache_reads": reads,
            "input_and_output": main.cost_usd - writes - reads,
            "summary_calls": self.side_calls.totals().cost_usd,
            "not_replayed": self.fixed_cost_usd,
        }

    @property
    def peak_context_tokens(self) -> int:
        """The largest main request, in tokens."""
        return self.main_calls.totals().peak_prompt_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready totals."""
        return {
            "cost": round(self.cost_usd, 6),
            "fixed_cost": round(self.fixed_cost_usd, 6),
            "calls": len(self.main_calls),
            "summary_calls": len(self.side_calls),
            "overflows": self.overflows,
            "compactions": self.compactions,
            "cache_read_share": round(self.cache_read_share, 5),
            "peak_context_tokens": self.peak_context_tokens,
            "cost_parts": {name: round(value, 6) for name, value in self.cost_parts().items()},
        }


class MessageTokens:
    """Scaled token estimates of successive message lists, counting only what changed.

    The lists given are kept, not copied, and must not be edited afterwards (`History`'s
    are not: a new list follows each append; `History.husk` only puts a settled message in
    place of the same message, counted as it was). The counts are one packed column (4 bytes a
    message, no object each)."""

    def __init__(
        self,
        scale: float,
        shared_prefix: Callable[
            [Sequence[MessageParam], Sequence[MessageParam]], int
        ] = shared_prefix_length,
    ) -> None:
        self.scale = scale
        self._shared_prefix = shared_prefix
        """How many first messages two lists share (a history's, told what changed)."""
        self._messages: Sequence[MessageParam] = []
        self._counts: array[int] = array("i")  # a message's tokens are far under 2**31
        self._total = 0

    def counts(self, messages: Sequence[MessageParam]) -> array[int]:
        """Tokens of each message (read only: the list is the counter's). The messages the
        last list began with (the same objects: the normalizer replaces a message it changes)
        keep their counts."""
        if messages is self._messages:
            return self._counts  # the same list again: several strategies read one history
        same = self._shared_prefix(messages, self._messages)
        self._total -= sum(self._counts[same:])
        del self._counts[same:]
        for message in messages[same:]:
            if is_husked_message(message):
                count = message.estimate  # counted before it was settled
            else:
                count = round(content_tokens(message["content"]) * self.scale)
            self._counts.append(count)
            self._total += count
        self._messages = messages
        return self._counts

    def total(self, messages: Sequence[MessageParam]) -> int:
        """Tokens of all the messages."""
        self.counts(messages)
        return self._total


@dataclass(frozen=True, slots=True)
class SidePlan:
    """A side call (a summary) a strategy makes before its main request."""

    request: ProviderRequest
    output_tokens: int
    query_source: str = "compact"


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What a strategy sends before a recorded call."""

    messages: Sequence[MessageParam]
    side: tuple[SidePlan, ...] = ()
    changed: bool = False
    """The strategy sent something other than the plain recorded history this call."""


class History:
    """A strategy's message history and its token counts.

    The strategies that send the recorded history as it is (or cut a copy of it) share one
    (`make_baselines`): it is normalized and counted once per call, not once per strategy,
    and held once. A strategy that replaces its history (with a summary) takes its own.
    """

    __slots__ = (
        "_husked",
        "_lists",
        "_own",
        "_states",
        "_tokens_of",
        "_version",
        "normalizer",
        "tokens",
    )

    def __init__(self, scale: float, entries: Sequence[Entry] = ()) -> None:
        self.normalizer = MessageNormalizer(entries)
        self._lists = _GivenLists()
        # The counter compares through the lists, not the history: no reference cycle, so a
        # history a strategy replaces (a summary) is freed at once with its messages, not
        # left to the cyclic collector (a replay collects seldom: megabytes a history).
        self.tokens = MessageTokens(scale, self._lists.shared_prefix)
        self._version = -1
        self._own: list[MessageParam] = []
        """The messages of the latest state, edited from where the normalizer changed them:
        every state (`_HistoryList`) reads it up to where it keeps its own."""
        self._states: list[weakref.ref[_HistoryList]] = []
        """The states given that may still be held, told before `_own` changes."""
        self._husked = 0
        """The first messages up to here had their tool results and assistant blocks husked."""
        self._tokens_of: BlockTokens | None = None
        """The counter the husks were counted with (`husk`)."""

    @property
    def husk_tokens(self) -> BlockTokens | None:
        """The counter the husks were counted with (None before any): for blocks made of a
        husked one (a cleared copy), counted as the simulators count."""
        return self._tokens_of

    @property
    def husked(self) -> int:
        """How many of the first messages had their tool results and assistant blocks husked."""
        return self._husked

    def husk(self, upto: int, tokens_of: BlockTokens) -> list[Swap]:
        """Let the tool results and assistant blocks of the first `upto` messages give up
        their text (`caching/husks.py`): the caller knows no strategy reads their content
        again. The last `UNSETTLED_TAIL` messages are left as they are. A message whose
        blocks all go becomes one `HuskedMessage` in its place, in the normalizer's list and
        this history's (the swaps returned: every other holder of the message is to be told,
        `Baseline.swap`); one the normalizer keeps whole (awaiting a repair) or with blocks
        that stay has its blocks husked in place (a user message's images and documents
        too: they give up their data)."""
        messages = self.messages()
        self._tokens_of = tokens_of
        stop = min(upto, len(messages) - UNSETTLED_TAIL)
        counts = self.tokens.counts(messages) if stop > self._husked else None
        swaps: list[Swap] = []
        for index in range(self._husked, stop):
            message = messages[index]
            assert counts is not None
            husk = (
                husk_message(message, index, tokens_of, counts[index])
                if type(message) is dict
                else None
            )
            if husk is not None and self.normalizer.replace_settled(message, husk, index):
                swaps.append((index, message, husk))
            elif type(message) is dict:
                husk_blocks(cast(Any, message), index, tokens_of)
        self._husked = max(self._husked, stop)
        # In place: the readers that hold this state (the token counts, the markers and the
        # clearing, given it this call) hold the settled messages too.
        _swap_in(self._own, swaps)
        return swaps

    def messages(self) -> Sequence[MessageParam]:
        """The history as API messages: one sequence per state of the history, shared by
        every strategy that reads it (read only: a new one follows an append; `husk` alone
        edits it, putting settled messages in the places of the same messages). A new state
        costs what changed, not a copy of the history (`_HistoryList`)."""
        normalizer, lists = self.normalizer, self._lists
        if self._version != normalizer.version:
            unchanged = normalizer.first_changed_since(self._version)
            self._update(normalizer.borrowed_messages(), unchanged or 0)
            lists.previous, lists.unchanged = lists.current, unchanged or 0
            if unchanged is None:
                lists.previous = None  # too many versions since: readers compare
            state = _HistoryList(self._own, len(self._own))
            self._states.append(weakref.ref(state))
            lists.current = state
            self._version = normalizer.version
        return lists.current

    def _update(self, messages: Sequence[MessageParam], start: int) -> None:
        """Make `_own` the normalizer's `messages`, whose first `start` are those `_own`
        holds; each state still held first keeps its own messages from `start` on."""
        if start == 0:
            # All may differ (a first user message made anew at each read): a new list, and
            # the states given keep the old one, which nothing edits again (no copy each).
            self._own = list(messages)
            self._states = []
            return
        states: list[weakref.ref[_HistoryList]] = []
        for ref in self._states:
            state = ref()
            if state is not None:
                state.keep_from(start)
                states.append(ref)
        self._states = states
        own = self._own
        del own[start:]
        own.extend(messages[start:])

    def shared_prefix(self, new: Sequence[MessageParam], old: Sequence[MessageParam]) -> int:
        """`shared_prefix_length(new, old)`, comparing only past what the normalizer says is
        unchanged when they are this history's current and previous lists (O(new) then). The
        lists given are not edited in place (a new list follows any change; `husk` only puts
        the same messages, settled, in their places)."""
        return self._lists.shared_prefix(new, old)


class _HistoryList(Sequence[MessageParam]):
    """One state of a `History`'s messages, read from the history's own list (shared by its
    states) up to where it keeps its own copy: before the history edits its list from an
    index on, every state still held keeps its messages from there (`keep_from`), so a state
    reads the same messages as long as it is held, and a new state costs what changed, not a
    copy of every message (a copy touches each message: at 100,000 calls, milliseconds)."""

    __slots__ = ("__weakref__", "_base", "_kept", "_length", "_split")

    def __init__(self, base: list[MessageParam], length: int) -> None:
        self._base = base
        self._length = length
        self._split = length
        """Messages before it are read from `_base`, the others from `_kept`."""
        self._kept: list[MessageParam] = []

    def keep_from(self, start: int) -> None:
        """Keep a copy of the messages from `start` on (the base changes there)."""
        if start < self._split:
            self._kept[:0] = self._base[start : self._split]
            self._split = start

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> MessageParam: ...

    @overload
    def __getitem__(self, index: slice) -> list[MessageParam]: ...

    def __getitem__(self, index: int | slice) -> MessageParam | list[MessageParam]:
        split = self._split
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step != 1:
                return [self[at] for at in range(start, stop, step)]
            if stop <= split:
                return self._base[start:stop]
            if start >= split:
                return self._kept[start - split : stop - split]
            return [*self._base[start:split], *self._kept[: stop - split]]
        at = index + self._length if index < 0 else index
        if not 0 <= at < self._length:
            raise IndexError(f"message {index} out of range ({self._length} messages)")
        return self._base[at] if at < split else self._kept[at - split]

    def __iter__(self) -> Iterator[MessageParam]:
        yield from islice(self._base, min(self._split, self._length))
        yield from self._kept

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_HistoryList, list)):
            return len(other) == self._length and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class _GivenLists:
    """The list a `History` gave last, the one before it and how many first messages the
    two share at least: what its `shared_prefix` reads, held apart from the history."""

    __slots__ = ("current", "previous", "unchanged")

    def __init__(self) -> None:
        self.current: Sequence[MessageParam] = []
        self.previous: Sequence[MessageParam] | None = None
        """The list given before the current one (None: too many versions since)."""
        self.unchanged = 0

    def shared_prefix(self, new: Sequence[MessageParam], old: Sequence[MessageParam]) -> int:
        """`History.shared_prefix`."""
        if new is old:
            return len(new)
        if new is self.current and old is self.previous:
            start = min(self.unchanged, len(new), len(old))
            return start + shared_prefix_length(new[start:], old[start:])
        return shared_prefix_length(new, old)


class Baseline:
    """A strategy fed the recorded messages; plans, prices and records its request per call.

    While a strategy has never sent anything but the plain recorded history, its requests
    are byte-identical to `none`'s, so it shares `none`'s simulated call instead of
    simulating it again (`run_baselines`); at its first change it takes a copy of `none`'s
    cache state and simulates on its own from then on.
    """

    name = "baseline"

    def __init__(self, settings: ReplaySettings, history: History | None = None) -> None:
        self.settings = settings
        self.simulator: CacheSimulator | None = None
        self.run = StrategyRun(self.name)
        self.history = history if history is not None else History(settings.prefix.scale)
        """Shared with other strategies when given (feed them with `feed_strategies`)."""
        self.marker = LastMarked(lambda new, old: self.history.shared_prefix(new, old))
        """Marks the requests this strategy simulates (its own simulator's, one per call)."""

    @property
    def normalizer(self) -> MessageNormalizer:
        """The history as API messages."""
        return self.history.normalizer

    @property
    def tokens(self) -> MessageTokens:
        """Token counts of the history's messages."""
        return self.history.tokens

    def replace_history(self, entries: Sequence[Entry]) -> None:
        """Take a history of its own, holding these entries."""
        self.history = History(self.settings.prefix.scale, entries)

    @property
    def diverged(self) -> bool:
        """Whether the strategy has its own cache state (it sent something else once)."""
        return self.simulator is not None

    def feed(self, entries: Sequence[Entry]) -> None:
        """Append recorded entries to the history (to one strategy alone: strategies that
        share a history are fed with `feed_strategies`)."""
        for entry in entries:
            self.normalizer.append(entry)

    def respond(self, response: Entry) -> None:
        """Append the recorded response to the history (one strategy alone, as `feed`)."""
        self.normalizer.append(response)

    def plan(self, call: RecordedCall) -> CallPlan:
        """The messages to send and the side calls to make first (overridden)."""
        return CallPlan(self.history.messages())

    def step(self, call: RecordedCall, plan: CallPlan) -> SimulatedCall:
        """Price the plan on this strategy's own simulator and account for it."""
        if self.simulator is None:
            self.simulator = self.settings.simulator(fold_settled=True)
        side = [
            self.simulator.step(
                call.request_time,
                item.request,
                query_source=item.query_source,
                output_tokens=item.output_tokens,
            )
            for item in plan.side
        ]
        request = self.settings.request(
            plan.messages, model_name=self.settings.model_for(call), marker=self.marker
        )
        simulated = self.simulator.step(
            call.request_time,
            request,
            output_tokens=call.output_tokens,
            unchanged=(self.marker, self.marker.unchanged),
        )
        self.run.add(simulated, side, self.settings.context_window)
        return simulated

    def share(self, simulated: SimulatedCall) -> SimulatedCall:
        """Account for a call priced on `none`'s simulator (the request was identical)."""
        self.run.add(simulated, [], self.settings.context_window)
        return simulated

    def settled(self, history: History) -> int:
        """How many of `history`'s first messages this strategy never reads the content of
        again (the cache simulator reads husked blocks as well as whole ones). A strategy
        that may read all of it says 0, the default."""
        return 0

    def swap(self, swaps: Sequence[Swap]) -> None:
        """Hold the settled messages in their originals' places in what this strategy kept
        of its last request (its marker's lists, its simulator's), so the originals go.
        Only a strategy whose request is cut from the shared history is told."""
        offset = self._request_offset()
        self.marker.swap(swaps, offset)
        if self.simulator is not None:
            for index, old, new in swaps:
                self.simulator.swap_message(index - offset, old, new)

    def _request_offset(self) -> int:
        """How far the last request's messages sit before the history's (its message i is
        the history's i + offset)."""
        return 0

    def _context_tokens(self, messages: Sequence[MessageParam]) -> int:
        return self.settings.prefix.tokens + self.tokens.total(messages)


def settled_once_own(strategy: Baseline, history: History) -> int:
    """`Baseline.settled` of a strategy that reads all of `history` until it replaces it (a
    summary): all of it once the strategy has a history of its own, else none of it."""
    return len(history.messages()) if strategy.history is not history else 0


def husk_settled(baselines: Sequence[Baseline]) -> None:
    """Husk the tool results and assistant blocks of the shared history's messages that every
    strategy is past (`Baseline.settled`), and tell every strategy which messages it holds
    were settled whole; the first strategy (`none`) must have simulated a call."""
    if not baselines or baselines[0].simulator is None:
        return
    shared = baselines[0].history
    upto = min(strategy.settled(shared) for strategy in baselines)
    if upto > shared.husked:
        swaps = shared.husk(upto, baselines[0].simulator.block_tokens)
        if swaps:
            for strategy in baselines:
                if strategy.history is shared:
                    strategy.swap(swaps)


def _swap_in(held: list[Any], swaps: Sequence[Swap], offset: int = 0) -> int:
    """Put each swap's replacement where its message is in `held` (at its index less
    `offset`, found by identity: elsewhere nothing changes); how many were put."""
    done = 0
    for index, old, new in swaps:
        at = index - offset
        if 0 <= at < len(held) and held[at] is old:
            held[at] = new
            done += 1
    return done


def feed_strategies(strategies: Sequence[Baseline], entries: Sequence[Entry]) -> None:
    """Append recorded entries to every strategy's history, each shared history once."""
    fed: list[History] = []
    for strategy in strategies:
        history = strategy.history
        if any(history is done for done in fed):
            continue
        fed.append(history)
        for entry in entries:
            history.normalizer.append(entry)


def run_baselines(baselines: Sequence[Baseline], call: RecordedCall) -> dict[str, SimulatedCall]:
    """Plan and price every baseline's request for one call (the first must be `none`).

    Strategies that still send the plain history share `none`'s simulated call; one that
    changes it for the first time forks `none`'s cache state as it was before this call.
    """
    if not baselines:
        return {}
    reference, others = baselines[0], baselines[1:]
    plans = {b.name: b.plan(call) for b in baselines}
    for baseline in others:
        if not baseline.diverged and plans[baseline.name].changed:
            if reference.simulator is None:
                reference.simulator = reference.settings.simulator(fold_settled=True)
            baseline.simulator = reference.simulator.fork()
    results = {reference.name: reference.step(call, plans[reference.name])}
    for baseline in others:
        if baseline.diverged:
            results[baseline.name] = baseline.step(call, plans[baseline.name])
        else:
            results[baseline.name] = baseline.share(results[reference.name])
    husk_settled(baselines)
    return results


class NoneBaseline(Baseline):
    """Send everything."""

    name = "none"

    def settled(self, history: History) -> int:
        """All of it: the plain history is sent as it is, read by the simulator alone."""
        return len(history.messages())


class TruncateBaseline(Baseline):
    """Drop the oldest turns, tool pairs together, until the request fits the threshold."""

    name = "truncate"

    def __init__(self, settings: ReplaySettings, history: History | None = None) -> None:
        super().__init__(settings, history)
        self.cut = 0
        self._note_tokens = round(rough_token_count(TRUNCATION_NOTE) * settings.prefix.scale)
        self._head: tuple[MessageParam, MessageParam] | None = None
        """(message cut at, the note message made of it): while the cut stays, the request
        starts with the very same object, so the simulator reuses what follows."""

    def plan(self, call: RecordedCall) -> CallPlan:
        """The newest turns that fit under the threshold."""
        messages = self.history.messages()
        counts = self.tokens.counts(messages)
        prefix = self.settings.prefix.tokens
        limit = self.settings.threshold
        total = sum(counts[self.cut :])
        if self.cut == 0 and prefix + total <= limit:
            return CallPlan(messages)
        position = self.cut
        while prefix + self._note_tokens + total > limit:
            following = next(
                (i for i in range(position + 1, len(messages)) if messages[i]["role"] == "user"),
                None,
            )
            if following is None:
                break
            total -= sum(counts[position:following])
            position = following
        self.cut = position
        if position == 0:
            return CallPlan(messages)
        first = messages[position]
        if self._head is None or self._head[0] is not first:
            self._head = (first, _truncated_head(first))
        return CallPlan([self._head[1], *messages[position + 1 :]], changed=True)

    def settled(self, history: History) -> int:
        """All of it: the note message leaves the cut message's tool results out, and what
        is sent is read by the simulator alone."""
        return len(history.messages())

    def _request_offset(self) -> int:
        """The request leaves out the messages before the cut (the note stands for it)."""
        return self.cut


def mark_last_message(
    messages: Sequence[MessageParam], marker: dict[str, Any]
) -> list[MessageParam]:
    """The messages with `marker` on the last markable block (walking back over messages that
    have none); only the marked message is copied."""
    result = list(messages)
    _mark_last(result, marker)
    return result


def _mark_last(result: list[MessageParam], marker: dict[str, Any]) -> int | None:
    """Put `marker` on the last markable block of `result`, in place (the marked message is
    replaced by a copy); the index of the marked message, None when none is markable."""
    for index in range(len(result) - 1, -1, -1):
        if is_husked_message(result[index]):
            continue  # settled whole: none of its blocks is markable (all husked)
        content = result[index]["content"]
        if isinstance(content, str):
            if content:
                result[index] = cast(
                    MessageParam,
                    {
                        "role": result[index]["role"],
                        "content": [{"type": "text", "text": content, "cache_control": marker}],
                    },
                )
                return index
            continue
        for position in range(len(content) - 1, -1, -1):
            # (a husked block is no dict: settled, it is never the last markable one)
            if isinstance(content[position], Mapping) and is_markable(content[position]):
                blocks = list(content)
                blocks[position] = cast(Any, {**content[position], "cache_control": marker})
                result[index] = cast(
                    MessageParam, {"role": result[index]["role"], "content": blocks}
                )
                return index
    return None


class LastMarked:
    """`mark_last_message` of successive message lists, each call costing what changed.

    The list returned is the marker's own, edited in place from one call to the next (read
    it, or copy it, before the next call): the messages the new list shares with the last
    one given stay (the last marked one is put back as it was), the rest follow, and the
    last markable message is replaced by its marked copy. `shared_prefix(new, old)` says how
    many first messages two given lists share (a `History`'s or a clearing's, told what
    changed: O(new) for them). `unchanged` tells the cache simulator how many first messages
    the returned list shares with the one the last call returned (`RequestBlocks.update`)."""

    __slots__ = ("_marked", "_result", "_source", "shared_prefix", "unchanged")

    def __init__(
        self,
        shared_prefix: Callable[
            [Sequence[MessageParam], Sequence[MessageParam]], int
        ] = shared_prefix_length,
    ) -> None:
        self.shared_prefix = shared_prefix
        self._source: Sequence[MessageParam] = []
        """The list the last call was given."""
        self._result: list[MessageParam] = []
        self._marked: int | None = None
        """Where the last call put the marked copy."""
        self.unchanged = 0
        """How many first messages the last result shares with the one before."""

    def mark(
        self, messages: Sequence[MessageParam], marker: dict[str, Any]
    ) -> list[MessageParam]:
        """The messages with `marker` on the last markable block (the marker's own list)."""
        same = min(self.shared_prefix(messages, self._source), len(messages))
        result = self._result
        unchanged = min(same, len(result))
        marked = self._marked
        if marked is not None and marked < same:
            result[marked] = messages[marked]  # the message itself again, unmarked
            unchanged = min(unchanged, marked)
        del result[same:]
        result.extend(messages[same:])
        self._source = messages
        self._marked = _mark_last(result, marker)
        if self._marked is not None:
            unchanged = min(unchanged, self._marked)
        self.unchanged = unchanged
        return result

    def swap(self, swaps: Sequence[Swap], offset: int = 0) -> None:
        """Hold each settled message in its original's place in the result (found by
        identity: a message marked here is a copy and stays). The list last given is its
        maker's to swap, or made anew for the next call."""
        _swap_in(self._result, swaps, offset)


def _truncated_head(message: MessageParam) -> MessageParam:
    kept: list[Any] = []
    if is_husked_message(message):
        # Settled whole, a user message holds tool results only: the note alone stays.
        if any(block.kind != "tool_result" for block in message.blocks()):
            raise SettledMessageError("a settled message with other blocks cannot be cut at")
        return cast(
            MessageParam, {"role": "user", "content": [{"type": "text", "text": TRUNCATION_NOTE}]}
        )
    content = message["content"]
    if isinstance(content, str):
        kept = [{"type": "text", "text": content}]
    else:
        # Behind the note, past the first place: a husked image has that place's digest.
        kept = [
            b.moved() if type(b) is HuskedBlock else b
            for b in cast(list[Any], content)
            if block_type(b) != "tool_result"
        ]
    return cast(
        MessageParam,
        {"role": "user", "content": [{"type": "text", "text": TRUNCATION_NOTE}, *kept]},
    )


class SummarizeNoCacheBaseline(Baseline):
    """Summarize everything without system prompt, tools or cache at the threshold."""

    name = "summarize_no_cache"

    def __init__(self, settings: ReplaySettings, history: History | None = None) -> None:
        super().__init__(settings, history)
        self.summarizer = ExtractiveSummarizer()
        self.summaries = 0

    def plan(self, call: RecordedCall) -> CallPlan:
        """The history, replaced by one summary message when it reached the threshold."""
        messages = self.history.messages()
        if self._context_tokens(messages) < self.settings.threshold or len(messages) < 2:
            return CallPlan(messages, changed=self.summaries > 0)
        summary_request: ProviderRequest = {
            "model": self.settings.model_name,
            "max_tokens": SUMMARY_MAX_TOKENS,
            "messages": normalize_plain_messages(
                [*messages, {"role": "user", "content": NAIVE_SUMMARY_PROMPT}]
            ),
        }
        reply = self.summarizer.summarize(summary_request).text
        output = round(rough_token_count(reply) * self.settings.prefix.scale)
        self.summaries += 1
        self.run.compactions += 1
        # Written as our compactions write a summary, so a later summary knows it for one.
        summary = summary_message_text(reply, transcript_path=None, messages_preserved=False)
        self.replace_history([Entry.user(summary, is_compact_summary=True)])
        return CallPlan(
            self.history.messages(), (SidePlan(summary_request, output),), changed=True
        )

    def settled(self, history: History) -> int:
        """None of it before the first summary (which reads all), all of it after."""
        return settled_once_own(self, history)


class ClearEveryTurnBaseline(Baseline):
    """LangChain ClearToolUsesEdit on a copy of every request over its trigger."""

    name = "clear_every_turn"

    def __init__(self, settings: ReplaySettings, history: History | None = None) -> None:
        super().__init__(settings, history)
        shared = self.history
        self.clearing = ToolResultClearing(
            CLEAR_KEEP, shared.shared_prefix, lambda: shared.husk_tokens
        )
        self.marker.shared_prefix = self.clearing.shared_prefix

    def plan(self, call: RecordedCall) -> CallPlan:
        """The history with all but the most recent tool results cleared, over the trigger."""
        messages = self.history.messages()
        if self._context_tokens(messages) <= CLEAR_TRIGGER_TOKENS:
            return CallPlan(messages)
        cleared = self.clearing.apply(messages)
        return CallPlan(cleared, changed=self.clearing.cleared_any)

    def settled(self, history: History) -> int:
        """All of it: clearing replaces a tool result's content without reading it, and
        what is sent is read by the simulator alone."""
        return len(history.messages())

    def swap(self, swaps: Sequence[Swap]) -> None:
        """`Baseline.swap`, the clearing's copies of the messages settled settled with them
        (one object each, held by the clearing, the marker and the simulator alike)."""
        super().swap([*swaps, *self.clearing.swap(swaps)])


class ToolResultClearing:
    """`clear_tool_results_copy` of successive histories, each reusing the last one's copies.

    Every tool result but the `keep` most recent is cleared; while the history only grows the
    cleared ones only grow, in order, so a message cleared before keeps its copy (the same
    object: the cache simulator then reuses its work) and a call costs what it added: the
    results not cleared yet wait in order, and those past the `keep` newest are cleared by
    position. A history that is not the last one grown is cleared from scratch. The lists
    given are kept, not copied, and must not be edited afterwards but by settling (`swap`);
    the list returned is the clearing's own, to be read (or copied) before the next call."""

    def __init__(
        self,
        keep: int,
        shared_prefix: Callable[
            [Sequence[MessageParam], Sequence[MessageParam]], int
        ] = shared_prefix_length,
        husk_tokens: Callable[[], BlockTokens | None] = lambda: None,
    ) -> None:
        self.keep = keep
        self._shared_prefix = shared_prefix
        """How many first messages two lists share (a history's, told what changed)."""
        self._husk_tokens = husk_tokens
        """The counter a husked result was counted with: its cleared copy is a husk too."""
        self._source: Sequence[MessageParam] = []
        self._result: list[MessageParam] = []
        self._waiting: deque[tuple[int, int]] = deque()
        """(message, block) of the tool results not cleared yet, in order."""
        self._cleared_any = False
        self._unread = 0
        """How many first messages of the result are unchanged since `shared_prefix` last
        compared it with itself."""

    @property
    def cleared_any(self) -> bool:
        """Whether the last result clears anything."""
        return self._cleared_any

    def apply(self, messages: Sequence[MessageParam]) -> list[MessageParam]:
        """The messages with every tool result but the most recent cleared (the clearing's
        own list: read only, valid until the next call)."""
        same = self._shared_prefix(messages, self._source)
        if same < len(self._source):  # not the same history grown: fewer results may follow
            same = 0
            self._waiting.clear()
            self._cleared_any = False
        result = self._result
        del result[same:]
        waiting = self._waiting
        for index in range(same, len(messages)):
            result.append(messages[index])
            husk = messages[index]
            if is_husked_message(husk):
                waiting.extend(
                    (index, b)
                    for b, block in enumerate(husk.blocks())
                    if block.kind == "tool_result"
                )
                continue
            content = messages[index]["content"]
            if isinstance(content, list):
                waiting.extend(
                    (index, b)
                    for b, block in enumerate(content)
                    if block_type(block) == "tool_result"
                )
        # Message -> its last block cleared now (every earlier result of it is cleared too).
        upto: dict[int, int] = {}
        while len(waiting) > self.keep:
            index, block = waiting.popleft()
            upto[index] = block
        for index in sorted(upto):
            last = upto[index]
            settled = messages[index]
            if is_husked_message(settled):
                result[index] = cast(
                    MessageParam, self._cleared_husk(settled, index, range(last + 1))
                )
                continue
            content = cast(list[Any], messages[index]["content"])
            role = messages[index]["role"]
            result[index] = cast(
                MessageParam,
                {
                    "role": role,
                    "content": [
                        self._cleared(block, index, b, role)
                        if b <= last and block_type(block) == "tool_result"
                        else block
                        for b, block in enumerate(content)
                    ],
                },
            )
        self._cleared_any = self._cleared_any or bool(upto)
        self._source = messages
        self._unread = min(self._unread, same, min(upto, default=same))
        return result

    def shared_prefix(self, new: Sequence[MessageParam], old: Sequence[MessageParam]) -> int:
        """`shared_prefix_length(new, old)`, where the clearing's own list (edited in place)
        compared with itself counts the messages unchanged since the last such comparison
        (O(1)); other lists are compared as the history compares them."""
        if new is old and new is self._result:
            unchanged = min(self._unread, len(new))
            self._unread = len(new)
            return unchanged
        return self._shared_prefix(new, old)

    def swap(self, swaps: Sequence[Swap]) -> list[Swap]:
        """Hold each settled message in its original's place in the result, and a settled
        cleared copy in place of a cleared copy of it (the same blocks cleared), when the
        list last cleared is the one settled (its maker swapped it first); the swaps of the
        copies, for the lists that hold them."""
        result, source = self._result, self._source
        copies: list[Swap] = []
        for index, old, new in swaps:
            if not 0 <= index < min(len(result), len(source)):
                continue
            settled = source[index]
            if settled is not new or not is_husked_message(settled):
                continue  # the result is of another list than the one settled
            held = result[index]
            if held is old:
                result[index] = cast(MessageParam, settled)
            elif type(held) is dict and type(old) is dict:
                original, copied = old["content"], held["content"]
                cleared = {
                    b
                    for b, block in enumerate(copied)
                    if b >= len(original) or block is not original[b]
                }
                husk = self._cleared_husk(settled, index, cleared)
                result[index] = cast(MessageParam, husk)
                copies.append((index, held, husk))
        return copies

    def _cleared_husk(
        self, message: HuskedMessage, index: int, positions: Container[int]
    ) -> HuskedMessage:
        """The cleared copy of a settled message, settled too: the tool results at
        `positions` cleared (digest and tokens of the cleared block, counted as the husks
        were, its marker kept), the others as they are; it keeps no estimate (nothing counts
        a copy)."""
        tokens_of = self._husk_tokens()
        if tokens_of is None:
            raise SettledMessageError(
                "a settled message to clear, but no counter it was husked with"
            )
        role = message.role
        blocks: list[tuple[str, bytes, int, bytes]] = []
        for position, block in enumerate(message.blocks()):
            if position not in positions or block.kind != "tool_result":
                blocks.append(block)
                continue
            fields = block.fields()
            cleared = {"type": "tool_result", **fields, "content": CLEAR_PLACEHOLDER}
            digest = message_block_digest(cleared, role, first=position == 0)
            tokens = tokens_of(FlatBlock("messages", index, position, cleared, role), digest)
            marker = fields.get("cache_control")
            kept = orjson.dumps({"cache_control": marker}) if marker is not None else b""
            blocks.append(("tool_result", digest, tokens, kept))
        return HuskedMessage(role, -1, blocks)

    def _cleared(self, block: Any, index: int, position: int, role: str) -> Any:
        """The cleared copy of a tool result: of a husked one, a husk of the copy (digest and
        tokens of the copy, counted as the husks were), not a dict."""
        if type(block) is not HuskedBlock:
            return {**block, "content": CLEAR_PLACEHOLDER}
        fields = block.fields()
        cleared = {**fields, "content": CLEAR_PLACEHOLDER}
        tokens_of = self._husk_tokens()
        if tokens_of is None:
            return cleared
        first = position == 0
        digest = message_block_digest(cleared, role, first=first)
        tokens = tokens_of(FlatBlock("messages", index, position, cleared, role), digest)
        del fields["type"]
        return HuskedBlock(digest, tokens, role, first, "tool_result", fields)


def clear_tool_results_copy(
    messages: Sequence[MessageParam], *, keep: int = CLEAR_KEEP
) -> list[MessageParam]:
    """A copy of the messages with every tool result but the `keep` most recent cleared."""
    positions = [
        (m, b)
        for m, message in enumerate(messages)
        if isinstance(message["content"], list)
        for b, block in enumerate(message["content"])
        if block_type(block) == "tool_result"
    ]
    cleared = positions[: max(0, len(positions) - keep)]
    by_message: dict[int, set[int]] = {}
    for m, b in cleared:
        by_message.setdefault(m, set()).add(b)
    result = list(messages)
    for m, blocks in by_message.items():
        content = cast(list[Any], messages[m]["content"])
        result[m] = cast(
            MessageParam,
            {
                "role": messages[m]["role"],
                "content": [
                    {**block_fields(block), "content": CLEAR_PLACEHOLDER}
                    if b in blocks
                    else block
                    for b, block in enumerate(content)
                ],
            },
        )
    return result


def make_baselines(settings: ReplaySettings, history: History | None = None) -> list[Baseline]:
    """One instance of each baseline, in report order, sharing one history (`history`, or a
    new one): feed them with `feed_strategies`."""
    shared = history if history is not None else History(settings.prefix.scale)
    return [
        NoneBaseline(settings, shared),
        TruncateBaseline(settings, shared),
        SummarizeNoCacheBaseline(settings, shared),
        ClearEveryTurnBaseline(settings, shared),
    ]
