"""An offline model of provider prompt caching and its price, request by request.

Anthropic (explicit breakpoints), as modelled here:

- A request is the flat block sequence tools -> system -> messages (blocks.py). Every block
  boundary has a prefix hash (canonical JSON chained block by block; cache_control itself is
  not hashed, the model and beta headers are, thinking and tool_choice key the message part).
- A cache entry exists only where an earlier request put a cache_control marker. It is keyed
  by its prefix hash, its TTL and its scope (seed 001: flipping a marker's TTL or scope
  changes the cache key, which is why the TTL is latched), and lives 5 minutes or 1 hour from
  its last write or read, counted from each request's start (given by the caller). An entry
  is alive while `now - last_use <= ttl`.
- Reads: from each marker the simulator walks back at most 20 blocks (the marker's own
  position included, so an entry 20 blocks back is found and one 21 back is not) and takes
  the longest alive entry with the marker's TTL and scope. The request reads the longest
  prefix any marker found (`cache_read_input_tokens`) and refreshes every entry it found.
- Writes: each marker whose prefix is at least the model's `min_cacheable_tokens` long
  writes an entry. Tokens after the read up to the last such marker are
  `cache_creation_input_tokens`, split 5m/1h by the TTL of the marker that closes each span;
  tokens after it are `input_tokens`. A prefix below the minimum is never cached.
- More than 4 markers, or a 1-hour marker after a 5-minute one, is a request the API
  rejects: InvalidRequestError.
- Models that drop earlier turns' thinking (`keeps_previous_thinking = false` in the model
  table: Claude before Opus 4.5) neither count nor cache the thinking blocks of assistant
  messages before the last user turn (`blocks.without_earlier_thinking`).
- `cache_edits` (cached microcompact, seed 004) delete tool results from the cached prefix:
  their tokens inside the read prefix are no longer read and are reported as
  `cache_deleted_input_tokens` (an approximation: the API's exact accounting is not public).

OpenAI (automatic caching): every request caches its whole prompt; a later request reads the
longest prefix (by blocks) it shares with a live earlier request, if at least 1,024 tokens
(`min_cacheable_tokens`), rounded down to 1,024 + a multiple of 128. Entries live
`openai_retention_seconds` from their last use (OpenAI documents 5 to 10 minutes of
inactivity; the default takes the lower bound, 300 s). There is no write surcharge and no
cache_creation figure. cache_control markers are ignored.

Prices come from the model table: input at `input_per_mtok`, cache writes at the 5m / 1h
multipliers, reads at the read multiplier, output at `output_per_mtok`.

Token counts per block come from a pluggable counter: by default the rough estimate of
`unbounded.tokens.estimate` (length / 4, images 2,000; unpadded), or any `TokenCounter`
(e.g. `TiktokenCounter`) through `TextBlockCounter`, or your own `BlockTokenCounter`.
A request reuses the blocks, digests, counts and prefix hashes of the messages it repeats
from the one before (`request_blocks.py`), so a long session costs O(new blocks) per request;
counts are also memoised by block digest. The figures are kept per head (model, system,
tools...; `SHELVED_HEADS` others besides the last one), so a session that switches models
back and forth takes each model's figures up where its last request left them instead of
computing its whole history again at every switch; a shelved head keeps only the messages the
latest request still shares with it (`_trim_shelf`), so what a strategy replaced is not kept
alive by another model's figures. Expired cache entries are forgotten as the
session goes on.

Scope is a cache-key dimension only: one simulator is one organisation, so global entries
are not pre-populated by other users unless you `prime` them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

import orjson

from unbounded.caching.blocks import (
    CACHE_LOOKBACK_BLOCKS,
    MAX_CACHE_BREAKPOINTS,
    FlatBlock,
    canonical_json,
    flatten_request,
    without_cache_control,
    without_earlier_thinking,
)
from unbounded.caching.request_blocks import RequestBlocks, request_head
from unbounded.caching.ttl import (
    DEFAULT_QUERY_SOURCE,
    CacheTtl,
    TimeLike,
    as_seconds,
    ttl_of_cache_control,
    ttl_seconds,
)
from unbounded.catalog import ModelInfo, ModelTable
from unbounded.errors import ConfigError, InvalidRequestError
from unbounded.model.content import Usage
from unbounded.model.request import ProviderRequest
from unbounded.tokens.estimate import TOKENS_PER_IMAGE, block_tokens, rough_token_count
from unbounded.tokens.exact import TokenCounter

CacheMode = Literal["anthropic", "openai", "none"]
OPENAI_CACHE_STEP_TOKENS = 128
"""OpenAI caches prefixes in steps of this many tokens past the minimum."""
OPENAI_RETENTION_SECONDS = 300.0
"""OpenAI keeps a cached prefix 5 to 10 minutes after its last use; the lower bound."""
TOKEN_MEMO_SIZE = 8_192
"""Block token counts remembered by digest (then forgotten all at once: memory stays small).
A message a request repeats, or re-adds after a cut, keeps its counts without the memo: it
serves new objects with known content (a marked copy of a message, then the message)."""
PRUNE_EVERY = 1_000
"""Expired cache entries are forgotten every this many requests."""
SHELVED_HEADS = 2
"""Figures of this many heads besides the last request's are kept (the least recently sent
goes first): a session alternating between a few models recomputes only what each model's
request added since its last one."""
FOLD_KEEP_MESSAGES = 64
"""A folding simulator (`CacheSimulator.fold_settled`) keeps the figures of at least this many
last messages: the ones a next request may still change."""


@runtime_checkable
class BlockTokenCounter(Protocol):
    """Counts the tokens of one block of a request."""

    name: str

    def count_block(self, block: FlatBlock) -> int:
        """Tokens of this block."""
        ...


class EstimateBlockCounter:
    """The rough estimate (length / 4, images 2,000), unpadded: the simulator's default."""

    name = "estimate"

    def count_block(self, block: FlatBlock) -> int:
        """Tokens of this block, estimated."""
        if block.section == "messages":
            return block_tokens(without_cache_control(block.block))
        if block.section == "system" and block.block.get("type") == "text":
            return rough_token_count(str(block.block.get("text", "")))
        return rough_token_count(canonical_json(without_cache_control(block.block)).decode())


class TextBlockCounter:
    """Counts blocks with any `TokenCounter` (e.g. `TiktokenCounter`) through its count_text."""

    def __init__(self, counter: TokenCounter) -> None:
        if not hasattr(counter, "count_text"):
            raise ConfigError("TextBlockCounter needs a counter with count_text")
        self._counter = counter
        self.name = f"text:{getattr(counter, 'name', type(counter).__name__)}"

    def _content(self, content: Any) -> int:
        if isinstance(content, str):
            return self._counter.count_text(content)
        if isinstance(content, list):
            return sum(self._block(part) for part in content if isinstance(part, Mapping))
        return 0

    def _block(self, block: Mapping[str, Any]) -> int:
        kind = block.get("type")
        if kind == "text":
            return self._counter.count_text(str(block.get("text", "")))
        if kind == "thinking":
            return self._counter.count_text(str(block.get("thinking", "")))
        if kind == "redacted_thinking":
            return self._counter.count_text(str(block.get("data", "")))
        if kind == "tool_use":
            text = str(block.get("name", "")) + orjson.dumps(block.get("input", {})).decode()
            return self._counter.count_text(text)
        if kind == "tool_result":
            return self._content(block.get("content"))
        if kind in ("image", "document"):
            return TOKENS_PER_IMAGE
        return self._counter.count_text(canonical_json(without_cache_control(block)).decode())

    def count_block(self, block: FlatBlock) -> int:
        """Tokens of this block's text."""
        if block.section == "tools":
            text = canonical_json(without_cache_control(block.block)).decode()
            return self._counter.count_text(text)
        return self._block(block.block)


def as_block_counter(counter: BlockTokenCounter | TokenCounter | None) -> BlockTokenCounter:
    """A block counter from a block counter, a text `TokenCounter`, or None (the estimate)."""
    if counter is None:
        return EstimateBlockCounter()
    if isinstance(counter, BlockTokenCounter):
        return counter
    if hasattr(counter, "count_text"):
        return TextBlockCounter(counter)
    raise ConfigError(f"not a token counter: {counter!r}")


def usage_cost_usd(
    model: ModelInfo,
    *,
    input_tokens: int = 0,
    cache_creation_5m_input_tokens: int = 0,
    cache_creation_1h_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    output_tokens: int = 0,
) -> float:
    """Price in USD of one response's usage, from the model table."""
    if cache_creation_1h_input_tokens and model.cache_write_1h_multiplier is None:
        raise ConfigError(f"model {model.name} has no 1-hour cache write price")
    per_token = model.input_per_mtok / 1_000_000
    write_1h = model.cache_write_1h_multiplier or 0.0
    return (
        input_tokens * per_token
        + cache_creation_5m_input_tokens * per_token * model.cache_write_5m_multiplier
        + cache_creation_1h_input_tokens * per_token * write_1h
        + cache_read_input_tokens * per_token * model.cache_read_multiplier
        + output_tokens * model.output_per_mtok / 1_000_000
    )


@dataclass(frozen=True, slots=True)
class SimulatedCall:
    """The usage the API would report for one request, and its price."""

    index: int
    time: float
    query_source: str
    model: str
    input_tokens: int
    cache_creation_5m_input_tokens: int
    cache_creation_1h_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cost_usd: float
    cache_deleted_input_tokens: int = 0
    breakpoints: tuple[int, ...] = ()
    """Flat indices of the request's cache markers."""
    read_until: int | None = None
    """Flat index of the last block read from the cache (None: nothing read)."""
    cache_write_cost_usd: float = 0.0
    """The part of `cost_usd` paid for cache writes."""
    cache_read_cost_usd: float = 0.0
    """The part of `cost_usd` paid for cache reads."""

    @property
    def cache_creation_input_tokens(self) -> int:
        """Cache writes, both TTLs."""
        return self.cache_creation_5m_input_tokens + self.cache_creation_1h_input_tokens

    @property
    def prompt_tokens(self) -> int:
        """Input + cache creation + cache read."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def usage(self) -> Usage:
        """As the Messages API reports it (`usage` of a response)."""
        usage: Usage = {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.cache_creation_1h_input_tokens,
            },
            "output_tokens": self.output_tokens,
        }
        if self.cache_deleted_input_tokens:
            usage["cache_deleted_input_tokens"] = self.cache_deleted_input_tokens
        return usage


@dataclass(frozen=True, slots=True)
class CacheTotals:
    """Sums over several simulated calls."""

    calls: int = 0
    input_tokens: int = 0
    cache_creation_5m_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def cache_creation_input_tokens(self) -> int:
        """Cache writes, both TTLs."""
        return self.cache_creation_5m_input_tokens + self.cache_creation_1h_input_tokens

    @property
    def prompt_tokens(self) -> int:
        """Input + cache creation + cache read."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def cache_read_share(self) -> float:
        """read / (input + creation + read); 0 when nothing was sent."""
        total = self.prompt_tokens
        return self.cache_read_input_tokens / total if total else 0.0

    def add(self, call: SimulatedCall) -> CacheTotals:
        """These totals with one more call."""
        return CacheTotals(
            calls=self.calls + 1,
            input_tokens=self.input_tokens + call.input_tokens,
            cache_creation_5m_input_tokens=self.cache_creation_5m_input_tokens
            + call.cache_creation_5m_input_tokens,
            cache_creation_1h_input_tokens=self.cache_creation_1h_input_tokens
            + call.cache_creation_1h_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + call.cache_read_input_tokens,
            output_tokens=self.output_tokens + call.output_tokens,
            cost_usd=self.cost_usd + call.cost_usd,
        )


def total_calls(calls: Iterable[SimulatedCall]) -> CacheTotals:
    """Totals of some simulated calls."""
    totals = CacheTotals()
    for call in calls:
        totals = totals.add(call)
    return totals


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """Per-request usage and the totals of a simulated sequence."""

    calls: tuple[SimulatedCall, ...]
    totals: CacheTotals

    @property
    def cache_read_share(self) -> float:
        """read / (input + creation + read) over all calls."""
        return self.totals.cache_read_share

    @property
    def cost_usd(self) -> float:
        """The sequence's price in USD."""
        return self.totals.cost_usd

    def by_query_source(self) -> dict[str, CacheTotals]:
        """Totals per query source."""
        grouped: dict[str, list[SimulatedCall]] = {}
        for call in self.calls:
            grouped.setdefault(call.query_source, []).append(call)
        return {source: total_calls(calls) for source, calls in grouped.items()}


@dataclass(frozen=True, slots=True)
class SimulatedRequest:
    """One request of a sequence: when it started, what it sent, who sent it."""

    time: TimeLike
    request: ProviderRequest
    query_source: str = DEFAULT_QUERY_SOURCE
    output_tokens: int = 0

    def __post_init__(self) -> None:
        as_seconds(self.time)
        if not isinstance(self.query_source, str) or not self.query_source:
            raise ConfigError("query_source must be a non-empty string")
        if not isinstance(self.output_tokens, int) or self.output_tokens < 0:
            raise ConfigError("output_tokens must be an int >= 0")


RequestLike = (
    SimulatedRequest
    | tuple[TimeLike, ProviderRequest]
    | tuple[TimeLike, ProviderRequest, str]
    | tuple[TimeLike, ProviderRequest, str, int]
)


def _as_simulated(item: RequestLike) -> SimulatedRequest:
    if isinstance(item, SimulatedRequest):
        return item
    if not isinstance(item, tuple) or not 2 <= len(item) <= 4:
        raise ConfigError("a request is (time, request[, query_source[, output_tokens]])")
    return SimulatedRequest(*item)


@dataclass(frozen=True, slots=True)
class _Marker:
    position: int
    ttl: CacheTtl
    scope: str


class CacheSimulator:
    """Replays requests against a model of the provider's prompt cache (see module doc)."""

    def __init__(
        self,
        model: ModelInfo | ModelTable,
        *,
        counter: BlockTokenCounter | TokenCounter | None = None,
        mode: CacheMode | None = None,
        lookback_blocks: int = CACHE_LOOKBACK_BLOCKS,
        max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
        openai_retention_seconds: float = OPENAI_RETENTION_SECONDS,
        openai_step_tokens: int = OPENAI_CACHE_STEP_TOKENS,
        other_models: Mapping[str, ModelInfo] | None = None,
    ) -> None:
        if not isinstance(model, ModelInfo | ModelTable):
            raise ConfigError("CacheSimulator needs a ModelInfo or a ModelTable")
        if mode not in (None, "anthropic", "openai", "none"):
            raise ConfigError(f"mode must be anthropic, openai or none, not {mode!r}")
        if lookback_blocks < 0:
            raise ConfigError(f"lookback_blocks must be >= 0, not {lookback_blocks}")
        if max_breakpoints < 1:
            raise ConfigError(f"max_breakpoints must be >= 1, not {max_breakpoints}")
        if openai_retention_seconds <= 0:
            raise ConfigError("openai_retention_seconds must be > 0")
        if openai_step_tokens < 1:
            raise ConfigError("openai_step_tokens must be >= 1")
        self._model = model
        # Requests naming one of these models are priced as it (a session that mixes models).
        self._other_models = dict(other_models or {})
        self._counter = as_block_counter(counter)
        self._mode = mode
        self.lookback_blocks = lookback_blocks
        self.max_breakpoints = max_breakpoints
        self.openai_retention_seconds = float(openai_retention_seconds)
        self.openai_step_tokens = openai_step_tokens
        self._entries: dict[tuple[str, str, bytes], float] = {}
        """(ttl, scope, prefix hash) -> time of last use (Anthropic)."""
        self._openai: dict[bytes, float] = {}
        """prefix hash -> time of last use (OpenAI), for prefixes the last request has not."""
        self._openai_last: tuple[float, int] | None = None
        """(time, minimum tokens) of the last request when it was cached the OpenAI way: every
        prefix of it that long was used then. Written into `_openai` only when it leaves the
        request (`_flush_openai`), so a call costs what it changed, not its length."""
        self._token_memo: dict[bytes, int] = {}
        self._calls = 0
        self._blocks = RequestBlocks(self._count, self._flush_openai)
        """The last request's blocks and hashes, reused by the next for what it repeats."""
        self._shelf: list[RequestBlocks] = []
        """The figures of the last requests of other heads, least recently sent first."""
        self.fold_settled = False
        """Let go of the figures of the blocks before the last `FOLD_KEEP_MESSAGES` messages
        that no marker of the last request could read back to (`RequestBlocks.fold`): for a
        caller whose markers only move forward (a request that reads a folded figure or
        sends cache_edits is computed in full again)."""

    def fork(self) -> CacheSimulator:
        """An independent simulator in this one's cache state (entries, their last use, the
        call count), for a strategy that sends something else from now on. Its first request
        is computed in full; the entries are copied, not the content of any request."""
        forked = copy.copy(self)
        forked._entries = dict(self._entries)
        forked._openai = dict(self._openai)
        forked._openai_last = None
        if self._openai_last is not None:
            forked._openai.update(self._implicit_openai(0, self._blocks.size))
        forked._token_memo = dict(self._token_memo)
        forked._blocks = RequestBlocks(forked._count, forked._flush_openai)
        forked._shelf = []
        return forked

    def __deepcopy__(self, memo: dict[int, Any]) -> CacheSimulator:
        return self.fork()

    def _implicit_openai(self, start: int, stop: int) -> dict[bytes, float]:
        """The last OpenAI request's prefixes at flat positions [start, stop) that it cached,
        with the time it used them."""
        if self._openai_last is None:
            return {}
        used, minimum = self._openai_last
        _, cumulative, hashes = self._blocks.columns()
        return {
            hashes[position]: used
            for position in range(max(start, 0), stop)
            if cumulative[position] >= minimum
        }

    def _flush_openai(self, start: int, stop: int | None = None) -> None:
        """Write the last OpenAI request's prefixes from `start` (to `stop`) into `_openai`:
        they are about to leave the request (RequestBlocks' cut hook)."""
        if self._openai_last is not None:
            end = self._blocks.size if stop is None else stop
            self._openai.update(self._implicit_openai(start, end))

    @property
    def counter(self) -> BlockTokenCounter:
        """The block counter in use."""
        return self._counter

    def model_for(self, request: ProviderRequest) -> ModelInfo:
        """The table row that prices (and sets the cache rules of) this request."""
        name = cast(Mapping[str, Any], request).get("model")
        if isinstance(name, str) and name in self._other_models:
            return self._other_models[name]
        if isinstance(self._model, ModelInfo):
            return self._model
        if not isinstance(name, str) or not name:
            raise ConfigError("the request has no model to look up in the model table")
        return self._model.get(name)

    def mode_for(self, model: ModelInfo) -> CacheMode:
        """How this model caches: explicit breakpoints, automatic, or not at all."""
        if self._mode is not None:
            return self._mode
        return "openai" if model.provider == "openai" else "anthropic"

    def swap_message(self, index: int, old: object, new: object) -> bool:
        """Hold `new` in place of `old` as the last request's message `index` (the caller's
        promise: `new` is `old` settled, with the figures held; `RequestBlocks.swap`); whether
        `old` was there (in the last request's or a shelved head's: all are told, so none
        keeps the original alive)."""
        swapped = self._blocks.swap(index, old, new)
        for shelved in self._shelf:
            swapped = shelved.swap(index, old, new) or swapped
        return swapped

    def block_tokens(self, block: FlatBlock, digest: bytes) -> int:
        """Tokens of one block whose digest is `digest`, as this simulator counts them."""
        return self._count(block, digest)

    def _count(self, block: FlatBlock, digest: bytes) -> int:
        """Tokens of one block, remembered by digest (blocks repeat across requests)."""
        memo = self._token_memo
        key = digest + block.section.encode()
        count = memo.get(key)
        if count is None:
            if len(memo) >= TOKEN_MEMO_SIZE:
                memo.clear()
            count = max(0, int(self._counter.count_block(block)))
            memo[key] = count
        return count

    def step(
        self,
        time: TimeLike,
        request: ProviderRequest,
        *,
        query_source: str = DEFAULT_QUERY_SOURCE,
        output_tokens: int = 0,
        unchanged: tuple[object, int] | None = None,
    ) -> SimulatedCall:
        """Send one request at `time` (its start); the usage the API would report.

        `unchanged` (source, n): the request's messages list is `source`'s, whose first n
        messages are the very ones of the last request `source` made, so they are not compared
        again when that was this simulator's last request too (`RequestBlocks.update`)."""
        if output_tokens < 0:
            raise ConfigError("output_tokens must be >= 0")
        now = as_seconds(time)
        call = self._process(now, request, query_source, output_tokens, unchanged)
        self._calls += 1
        if self._calls % PRUNE_EVERY == 0:
            self._prune(now)
        return call

    def _prune(self, now: float) -> None:
        """Forget the entries no later request can read (expired), so memory stays bounded
        over a long session."""
        self._entries = {
            key: used for key, used in self._entries.items() if now - used <= ttl_seconds(key[0])
        }
        retention = self.openai_retention_seconds
        self._openai = {key: used for key, used in self._openai.items() if now - used <= retention}

    def prime(self, time: TimeLike, request: ProviderRequest) -> None:
        """Warm the cache as if `request` had been sent at `time` (e.g. an earlier session)."""
        self._process(as_seconds(time), request, DEFAULT_QUERY_SOURCE, 0)

    def run(self, requests: Iterable[RequestLike]) -> SimulationResult:
        """Send a sequence of requests; per-request usage and totals."""
        calls = []
        for item in requests:
            simulated = _as_simulated(item)
            calls.append(
                self.step(
                    simulated.time,
                    simulated.request,
                    query_source=simulated.query_source,
                    output_tokens=simulated.output_tokens,
                )
            )
        return SimulationResult(tuple(calls), total_calls(calls))

    def live_entries(self, time: TimeLike) -> int:
        """How many cache entries are alive at `time`."""
        now = as_seconds(time)
        alive = sum(
            1 for (ttl, _, _), used in self._entries.items() if now - used <= ttl_seconds(ttl)
        )
        retention = self.openai_retention_seconds
        openai = {**self._openai, **self._implicit_openai(0, self._blocks.size)}
        return alive + sum(1 for used in openai.values() if now - used <= retention)

    # -- the model ------------------------------------------------------------------------

    def _process(
        self,
        now: float,
        request: ProviderRequest,
        query_source: str,
        output_tokens: int,
        unchanged: tuple[object, int] | None = None,
    ) -> SimulatedCall:
        model = self.model_for(request)
        mode = self.mode_for(model)
        body = cast(Mapping[str, Any], request)
        drop = not model.keeps_previous_thinking
        last = self._blocks
        blocks = self._blocks_for(request_head(body, drop))
        if blocks.folded and body.get("cache_edits"):
            blocks.reset()  # its deleted tokens are read from every block
        # (A call cached the OpenAI way reads any block too: it has another model, so the
        # update computes it in full; a folding simulator folds no such call.)
        blocks.update(body, drop_earlier_thinking=drop, unchanged=unchanged)
        if self._shelf:
            messages = body.get("messages") or []
            self._trim_shelf(blocks.agreed if blocks is last else last.agreement(messages))
        if blocks.folded and not self._markers_readable(blocks):
            blocks.reset()
            blocks.update(body, drop_earlier_thinking=drop, unchanged=unchanged)
        call = self._call(model, mode, now, request, query_source, output_tokens)
        if self.fold_settled and mode != "openai" and self._openai_last is None:
            lowest = min(
                (m for m in blocks.markers if m >= blocks.head_blocks), default=blocks.size
            )
            blocks.fold(lowest - self.lookback_blocks, FOLD_KEEP_MESSAGES)
        return call

    def _blocks_for(self, head: tuple[Any, ...]) -> RequestBlocks:
        """The figures the request of this head updates: the last request's when it has the
        head (or none), else the shelved ones of the head, taken up again (`resume`), else
        new ones; the last request's are shelved."""
        current = self._blocks
        if current.head is None or current.head == head:
            return current
        # The last request's prefixes leave it (what a head change always did), and the next
        # request keeps none of them: the OpenAI bookkeeping of it is done with.
        self._flush_openai(0)
        self._openai_last = None
        shelf = self._shelf
        taken = next((b for b in shelf if b.head == head), None)
        if taken is not None:
            shelf.remove(taken)
            taken.resume()
        else:
            taken = RequestBlocks(self._count, self._flush_openai)
        shelf.append(current)
        if len(shelf) > SHELVED_HEADS:
            del shelf[0]
        self._blocks = taken
        return taken

    def _trim_shelf(self, agreed: int) -> None:
        """Let the shelved heads go of what the request just sent no longer shares: each
        agreed with the last request before it as far as it went, and this one agrees with
        that one on `agreed` messages. A head resumed later computes from there anyway
        (the source's history moved on: a summary replaced it, a cut moved, a result was
        cleared), so the messages it held past there were kept alive for nothing."""
        shelf = self._shelf
        for shelved in list(shelf):
            if not shelved.trim(agreed):
                shelf.remove(shelved)

    def _markers_readable(self, blocks: RequestBlocks) -> bool:
        """Whether the blocks each marker of the last update may read back to are held."""
        return all(
            blocks.readable(max(0, m - self.lookback_blocks), m) for m in blocks.markers
        )

    def _call(
        self,
        model: ModelInfo,
        mode: CacheMode,
        now: float,
        request: ProviderRequest,
        query_source: str,
        output_tokens: int,
    ) -> SimulatedCall:
        """Price the request whose blocks were just updated."""
        blocks = self._blocks
        tokens, cumulative, hashes = blocks.columns()
        running = cumulative[-1] if len(cumulative) else 0
        name = str(cast(Mapping[str, Any], request).get("model") or model.name)
        if self._openai_last is not None and (mode != "openai" or not tokens):
            # This request is not cached the OpenAI way: the prefixes it kept from the last
            # one are not used again now, so they keep that request's time.
            self._flush_openai(0, blocks.kept)
            self._openai_last = None
        if mode == "none" or not tokens:
            return self._priced(model, name, now, query_source, running, 0, 0, 0, output_tokens)
        if mode == "openai":
            return self._openai_call(
                model, name, now, query_source, hashes, cumulative, blocks.kept, output_tokens
            )
        return self._anthropic_call(
            model,
            name,
            now,
            query_source,
            request,
            self._markers(blocks.markers, blocks.marker_controls),
            hashes,
            tokens,
            cumulative,
            output_tokens,
            not model.keeps_previous_thinking,
        )

    def _markers(
        self, positions: Sequence[int], controls: Sequence[Mapping[str, Any]]
    ) -> list[_Marker]:
        markers: list[_Marker] = []
        for position, marker in zip(positions, controls, strict=True):
            scope = "global" if marker.get("scope") == "global" else "org"
            markers.append(_Marker(position, ttl_of_cache_control(marker), scope))
        if len(markers) > self.max_breakpoints:
            raise InvalidRequestError(
                "cache-breakpoints",
                None,
                f"{len(markers)} cache_control markers; the API allows {self.max_breakpoints}",
            )
        seen_5m = False
        for item in markers:
            if item.ttl == "5m":
                seen_5m = True
            elif seen_5m:
                raise InvalidRequestError(
                    "cache-ttl-order", None, "a 1h cache_control marker follows a 5m one"
                )
        return markers

    def _anthropic_call(
        self,
        model: ModelInfo,
        name: str,
        now: float,
        query_source: str,
        request: ProviderRequest,
        markers: list[_Marker],
        hashes: Sequence[bytes],
        tokens: Sequence[int],
        cumulative: Sequence[int],
        output_tokens: int,
        drop_earlier_thinking: bool,
    ) -> SimulatedCall:
        total = cumulative[-1]
        read_until = -1
        found: list[tuple[str, str, bytes]] = []
        for marker in markers:
            lifetime = ttl_seconds(marker.ttl)
            lowest = max(0, marker.position - self.lookback_blocks)
            for position in range(marker.position, lowest - 1, -1):
                key: tuple[str, str, bytes] = (marker.ttl, marker.scope, hashes[position])
                used = self._entries.get(key)
                if used is not None and now - used <= lifetime:
                    found.append(key)
                    read_until = max(read_until, position)
                    break
        read = cumulative[read_until] if read_until >= 0 else 0

        minimum = model.min_cacheable_tokens
        creation = {"5m": 0, "1h": 0}
        covered = read_until
        for marker in markers:
            if cumulative[marker.position] < minimum:
                continue
            if marker.position > covered:
                span = cumulative[marker.position] - (cumulative[covered] if covered >= 0 else 0)
                creation[marker.ttl] += span
                covered = marker.position
            self._entries[(marker.ttl, marker.scope, hashes[marker.position])] = now
        for found_key in found:
            self._entries[found_key] = max(self._entries.get(found_key, now), now)
        cached_until = cumulative[covered] if covered >= 0 else 0
        input_tokens = total - cached_until

        deleted = self._deleted_tokens(request, tokens, read_until, drop_earlier_thinking)
        return self._priced(
            model,
            name,
            now,
            query_source,
            input_tokens,
            creation["5m"],
            creation["1h"],
            read - deleted,
            output_tokens,
            deleted=deleted,
            breakpoints=tuple(m.position for m in markers),
            read_until=read_until if read_until >= 0 else None,
        )

    @staticmethod
    def _deleted_tokens(
        request: ProviderRequest,
        tokens: Sequence[int],
        read_until: int,
        drop_earlier_thinking: bool,
    ) -> int:
        edits = cast(Mapping[str, Any], request).get("cache_edits") or []
        references = {
            str(edit.get("cache_reference"))
            for edit in edits
            if isinstance(edit, Mapping) and edit.get("type") == "delete"
        }
        if not references or read_until < 0:
            return 0
        # Only requests with cache edits need the blocks themselves: flattened again here
        # rather than held for every request.
        flat = flatten_request(request)
        if drop_earlier_thinking:
            flat = without_earlier_thinking(flat)
        return sum(
            tokens[position]
            for position in range(read_until + 1)
            if flat[position].block.get("type") == "tool_result"
            and str(flat[position].block.get("tool_use_id")) in references
        )

    def _openai_call(
        self,
        model: ModelInfo,
        name: str,
        now: float,
        query_source: str,
        hashes: Sequence[bytes],
        cumulative: Sequence[int],
        kept: int,
        output_tokens: int,
    ) -> SimulatedCall:
        minimum = model.min_cacheable_tokens
        retention = self.openai_retention_seconds
        matched = 0
        read_until = -1
        last = self._openai_last
        for position in range(len(hashes) - 1, -1, -1):
            if cumulative[position] < minimum:
                break
            if last is not None and position < kept and cumulative[position] >= last[1]:
                # Every longer kept prefix was used by the last request: this one too, then,
                # and the shorter ones no later than it.
                if now - last[0] <= retention:
                    matched = cumulative[position]
                    read_until = position
                break
            used = self._openai.get(hashes[position])
            if used is not None and now - used <= retention:
                matched = cumulative[position]
                read_until = position
                break
        cached = 0
        if matched >= minimum:
            step = self.openai_step_tokens
            cached = minimum + (matched - minimum) // step * step
        if last is not None and last[1] != minimum:
            self._flush_openai(0, kept)  # cached under another minimum: written as it was
        self._openai_last = (now, minimum)
        total = cumulative[-1]
        return self._priced(
            model,
            name,
            now,
            query_source,
            total - cached,
            0,
            0,
            cached,
            output_tokens,
            read_until=read_until if read_until >= 0 else None,
        )

    def _priced(
        self,
        model: ModelInfo,
        name: str,
        now: float,
        query_source: str,
        input_tokens: int,
        creation_5m: int,
        creation_1h: int,
        read: int,
        output_tokens: int,
        *,
        deleted: int = 0,
        breakpoints: tuple[int, ...] = (),
        read_until: int | None = None,
    ) -> SimulatedCall:
        cost = usage_cost_usd(
            model,
            input_tokens=input_tokens,
            cache_creation_5m_input_tokens=creation_5m,
            cache_creation_1h_input_tokens=creation_1h,
            cache_read_input_tokens=read,
            output_tokens=output_tokens,
        )
        write_cost = usage_cost_usd(
            model,
            cache_creation_5m_input_tokens=creation_5m,
            cache_creation_1h_input_tokens=creation_1h,
        )
        return SimulatedCall(
            index=self._calls,
            time=now,
            query_source=query_source,
            model=name,
            input_tokens=input_tokens,
            cache_creation_5m_input_tokens=creation_5m,
            cache_creation_1h_input_tokens=creation_1h,
            cache_read_input_tokens=read,
            output_tokens=output_tokens,
            cost_usd=cost,
            cache_deleted_input_tokens=deleted,
            breakpoints=breakpoints,
            read_until=read_until,
            cache_write_cost_usd=write_cost,
            cache_read_cost_usd=usage_cost_usd(model, cache_read_input_tokens=read),
        )


def simulate_cache(
    requests: Iterable[RequestLike],
    model: ModelInfo | ModelTable,
    *,
    counter: BlockTokenCounter | TokenCounter | None = None,
    mode: CacheMode | None = None,
    lookback_blocks: int = CACHE_LOOKBACK_BLOCKS,
    openai_retention_seconds: float = OPENAI_RETENTION_SECONDS,
) -> SimulationResult:
    """Simulate a sequence of (time, request[, query_source[, output_tokens]])."""
    simulator = CacheSimulator(
        model,
        counter=counter,
        mode=mode,
        lookback_blocks=lookback_blocks,
        openai_retention_seconds=openai_retention_seconds,
    )
    return simulator.run(requests)
