"""How faithfully the simulator reproduces a recorded session's prompt caching.

`simulate_recorded_session(transcript, model_info)` lays out each recorded API call of the
main thread as Claude Code sent it, simulates the cache, and compares the simulated
cache-read share with the one the API reported. The future `unbounded replay --json` reports
its `fidelity` from here.

How a session is laid out:

- Calls: every call the recording billed (`Transcript.billed_calls()`), in file order. A
  call's messages are the normalized view before it in the conversation it belongs to: the
  main thread for the thread's calls (`Transcript.api_calls()`), the branch's own history
  (`Transcript.branch_thread`) for a call on a branch the thread does not follow (a rewind:
  the cache saw that request too), and the thread's view where it stands for the agent's own
  side calls (Codex's compaction summary sends the history it summarizes). One marker on the
  last message, as Claude Code places it (no lookback bridge: Claude Code has none).
- System prompt and tools: transcripts hold neither (nor the user context Claude Code puts
  before the first message), so they are one opaque cached prefix of P tokens, inferred from
  the first call: its recorded prompt (input + creation + read) minus the estimate of its
  messages. When the first call already *read* R tokens (a cache warmed by an earlier
  session), the prefix is two marked blocks, R tokens then P - R, and the first R are primed
  into the cache just before the session starts.
- Calibration: the counter estimates message tokens (length / 4 by default) and real Claude
  tokens run denser. One scale factor per session maps the estimate to the recorded sizes:
  k = sum(prompt_i - prompt_0) / sum(estimate_i - estimate_0) over the calls (prompt_i =
  P + k * estimate_i), clamped to [0.25, 4] and 1 when there is nothing to fit; P then
  follows from the first call. Only recorded *sizes* are used, never the recorded cache
  figures (except R for the warm start).
- TTL: the one each call recorded (`cache_creation.ephemeral_1h_input_tokens` vs
  `ephemeral_5m_input_tokens`); a call that wrote nothing keeps the previous call's TTL.
  Request start times are the time of the last record before each response; a call whose
  record has no time follows the call before it at once (`FidelityReport.untimed_calls`).
- Prefix changes the transcript shows: a model change (the model is part of the cache key,
  so nothing is read) and an MCP reconnection (`/mcp` whose output says a server
  (re)connected or disconnected: tools and the MCP-instructions section change, seed 001's
  example of a `DANGEROUS_uncachedSystemPromptSection`), which invalidates the part of the
  prefix after R.
- After a compaction the messages change entirely: the simulator misses on them and reads the
  opaque prefix.
- A session on an OpenAI model (a Codex rollout) is simulated in the simulator's automatic
  caching mode: the markers are ignored, each call reads the longest live prefix it shares
  with an earlier one, and nothing is written at a surcharge.

Recorded share = sum(cache_read) / sum(input + creation + read) over the session's calls, and
the simulated share likewise. Not modelled, and so the main sources of difference: breaks the
transcript does not explain (server-side evictions, client changes it does not record), the
compaction fork's own call (in another file; it only refreshes the cache), and Claude Code's
user-context message counted inside the opaque prefix (after a compaction the real read is
smaller by its size).

In-sample and held out: by default the prefix, the scale and the TTLs are fitted on the very
calls the shares are compared over. With `fit_calls=n` only the first n calls are fitted on
(the prefix and warm start from the first call, the scale from calls 0..n-1, later calls
keep the last fitted call's TTL) and the shares and costs are compared over the other calls
only: a prediction of the rest of the session from its beginning. All calls are still
simulated, so the cache the judged calls meet is the one the earlier calls left.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast, overload

from unbounded.caching.blocks import FlatBlock, block_digest, flatten_request
from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.caching.simulator import (
    BlockTokenCounter,
    CacheSimulator,
    SimulatedCall,
    as_block_counter,
    usage_cost_usd,
)
from unbounded.caching.system_prompt import get_cache_control
from unbounded.caching.ttl import CacheTtl
from unbounded.catalog import ModelInfo, as_provider, load_model_table, resolve_recorded_model
from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam, Usage
from unbounded.model.entries import Entry, parse_timestamp
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.prefix import shared_prefix_length
from unbounded.model.request import ProviderRequest, SystemBlock
from unbounded.model.transcript import ApiCall, BilledCall, Transcript, api_calls
from unbounded.tokens.exact import TokenCounter

_MCP_COMMAND = re.compile(r"<command-name>\s*/mcp\s*</command-name>")
_MCP_CHANGE = re.compile(
    r"<local-command-stdout>[^<]*?\b(?:reconnected|connected|disconnected|enabled|disabled)\b",
    re.IGNORECASE,
)
_SCALE_BOUNDS = (0.25, 4.0)


@dataclass(frozen=True, slots=True)
class RecordedUsage:
    """What the API reported for one recorded call."""

    input_tokens: int
    cache_creation_5m_input_tokens: int
    cache_creation_1h_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        """Cache writes, both TTLs."""
        return self.cache_creation_5m_input_tokens + self.cache_creation_1h_input_tokens

    @property
    def prompt_tokens(self) -> int:
        """Input + cache creation + cache read."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @classmethod
    def from_usage(cls, usage: Usage | Mapping[str, Any], ttl: CacheTtl) -> RecordedUsage:
        """Read a recorded usage; creation without a 5m/1h split is put under `ttl`."""
        creation = int(usage.get("cache_creation_input_tokens") or 0)
        split = usage.get("cache_creation")
        five = one = 0
        if isinstance(split, Mapping) and (
            "ephemeral_5m_input_tokens" in split or "ephemeral_1h_input_tokens" in split
        ):
            five = int(split.get("ephemeral_5m_input_tokens") or 0)
            one = int(split.get("ephemeral_1h_input_tokens") or 0)
            rest = creation - five - one
            if rest > 0:
                five, one = (five, one + rest) if ttl == "1h" else (five + rest, one)
        elif ttl == "1h":
            one = creation
        else:
            five = creation
        return cls(
            input_tokens=int(usage.get("input_tokens") or 0),
            cache_creation_5m_input_tokens=five,
            cache_creation_1h_input_tokens=one,
            cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        )


@dataclass(frozen=True, slots=True)
class FidelityCall:
    """One recorded call next to its simulation."""

    index: int
    time: float
    ttl: CacheTtl
    """The TTL simulated: the recorded one, or the last fitted call's on a held-out call."""
    model: str
    recorded: RecordedUsage
    simulated: SimulatedCall
    after_compaction: bool = False
    prefix_changed: bool = False


_NONE = -1
"""An integer column's code for None (`read_until` of a call that read nothing)."""
_INT_FIELDS = (
    "index",
    "recorded_input",
    "recorded_5m",
    "recorded_1h",
    "recorded_read",
    "recorded_output",
    "simulated_index",
    "input",
    "write_5m",
    "write_1h",
    "read",
    "output",
    "deleted",
    "read_until",
)
_FLOAT_FIELDS = ("time", "simulated_time", "cost", "write_cost", "read_cost")
_CODED_FIELDS = ("ttl", "model", "query_source", "simulated_model", "flags")


class FidelityCalls(Sequence[FidelityCall]):
    """A session's `FidelityCall`s kept as columns of machine numbers, each call built back
    when read: a replay of 100,000 calls keeps its fidelity simulation for its whole run, and
    as objects a call takes about 700 bytes (about 200 here)."""

    def __init__(self, calls: Iterable[FidelityCall] = ()) -> None:
        """The calls, in order."""
        self._ints = {name: array("q") for name in _INT_FIELDS}
        self._floats = {name: array("d") for name in _FLOAT_FIELDS}
        self._codes = {name: array("B") for name in _CODED_FIELDS}
        self._breakpoints = array("q")
        self._starts = array("q", [0])
        self._texts: list[str] = []
        """The strings the coded columns name (TTLs, models, query sources), by code."""
        self._text_codes: dict[str, int] = {}
        for call in calls:
            self.append(call)

    def _code(self, text: str) -> int:
        code = self._text_codes.get(text)
        if code is None:
            if len(self._texts) > 255:
                raise ConfigError(
                    f"a fidelity simulation names more than 256 distinct models, TTLs and "
                    f"query sources (adding {text!r}): it cannot be kept in columns"
                )
            code = self._text_codes[text] = len(self._texts)
            self._texts.append(text)
        return code

    def append(self, call: FidelityCall) -> None:
        """Add a call after the others."""
        recorded, simulated = call.recorded, call.simulated
        # Coded first: a name that cannot be coded leaves every column as it was.
        codes = (
            self._code(call.ttl),
            self._code(call.model),
            self._code(simulated.query_source),
            self._code(simulated.model),
            int(call.after_compaction) | int(call.prefix_changed) << 1,
        )
        read_until = simulated.read_until
        ints = (
            call.index,
            recorded.input_tokens,
            recorded.cache_creation_5m_input_tokens,
            recorded.cache_creation_1h_input_tokens,
            recorded.cache_read_input_tokens,
            recorded.output_tokens,
            simulated.index,
            simulated.input_tokens,
            simulated.cache_creation_5m_input_tokens,
            simulated.cache_creation_1h_input_tokens,
            simulated.cache_read_input_tokens,
            simulated.output_tokens,
            simulated.cache_deleted_input_tokens,
            _NONE if read_until is None else read_until,
        )
        for name, value in zip(_INT_FIELDS, ints, strict=True):
            self._ints[name].append(value)
        floats = (
            call.time,
            simulated.time,
            simulated.cost_usd,
            simulated.cache_write_cost_usd,
            simulated.cache_read_cost_usd,
        )
        for name, number in zip(_FLOAT_FIELDS, floats, strict=True):
            self._floats[name].append(number)
        for name, code in zip(_CODED_FIELDS, codes, strict=True):
            self._codes[name].append(code)
        self._breakpoints.extend(simulated.breakpoints)
        self._starts.append(len(self._breakpoints))

    def __len__(self) -> int:
        return len(self._starts) - 1

    @overload
    def __getitem__(self, position: int) -> FidelityCall: ...

    @overload
    def __getitem__(self, position: slice) -> list[FidelityCall]: ...

    def __getitem__(self, position: int | slice) -> FidelityCall | list[FidelityCall]:
        if isinstance(position, slice):
            return [self._row(row) for row in range(*position.indices(len(self)))]
        size = len(self)
        row = position + size if position < 0 else position
        if not 0 <= row < size:
            raise IndexError(f"fidelity call {position} out of range ({size} calls)")
        return self._row(row)

    def __iter__(self) -> Iterator[FidelityCall]:
        for row in range(len(self)):
            yield self._row(row)

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same calls (a tuple included)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def _row(self, row: int) -> FidelityCall:
        ints = {name: column[row] for name, column in self._ints.items()}
        floats = {name: column[row] for name, column in self._floats.items()}
        texts = self._texts
        codes = self._codes
        flags = codes["flags"][row]
        read_until = ints["read_until"]
        return FidelityCall(
            index=ints["index"],
            time=floats["time"],
            ttl=cast(CacheTtl, texts[codes["ttl"][row]]),
            model=texts[codes["model"][row]],
            recorded=RecordedUsage(
                input_tokens=ints["recorded_input"],
                cache_creation_5m_input_tokens=ints["recorded_5m"],
                cache_creation_1h_input_tokens=ints["recorded_1h"],
                cache_read_input_tokens=ints["recorded_read"],
                output_tokens=ints["recorded_output"],
            ),
            simulated=SimulatedCall(
                index=ints["simulated_index"],
                time=floats["simulated_time"],
                query_source=texts[codes["query_source"][row]],
                model=texts[codes["simulated_model"][row]],
                input_tokens=ints["input"],
                cache_creation_5m_input_tokens=ints["write_5m"],
                cache_creation_1h_input_tokens=ints["write_1h"],
                cache_read_input_tokens=ints["read"],
                output_tokens=ints["output"],
                cost_usd=floats["cost"],
                cache_deleted_input_tokens=ints["deleted"],
                breakpoints=tuple(self._breakpoints[self._starts[row] : self._starts[row + 1]]),
                read_until=None if read_until == _NONE else read_until,
                cache_write_cost_usd=floats["write_cost"],
                cache_read_cost_usd=floats["read_cost"],
            ),
            after_compaction=bool(flags & 1),
            prefix_changed=bool(flags & 2),
        )


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """Recorded vs simulated prompt caching of one session."""

    session: str | None
    model: str
    counter: str
    calls: Sequence[FidelityCall]
    """Per recorded call, in order (`FidelityCalls` as the simulation writes them)."""
    prefix_tokens: int
    """The opaque system prompt + tools (+ user context) prefix, inferred."""
    warm_prefix_tokens: int
    """Part of it already cached when the session started (the first call's read)."""
    scale: float
    """Calibration: recorded tokens per estimated message token."""
    recorded_cache_read_share: float
    simulated_cache_read_share: float
    recorded_cost_usd: float | None
    """The recorded usage at this model's prices; None when they cannot price it (a recording
    with 1-hour cache writes and a model without that tier, e.g. an OpenAI model)."""
    simulated_cost_usd: float
    compactions: int = 0
    prefix_changes: tuple[str, ...] = field(default_factory=tuple)
    judged_from: int = 0
    """First call the shares and costs are compared over; the calls before it alone were
    fitted on (0: in-sample, fitted on the calls it is judged on)."""
    untimed_calls: int = 0
    """Calls whose record has no time: each was taken to follow the call before it at once."""

    @property
    def share_error(self) -> float:
        """Simulated minus recorded cache-read share (fractions, not percent)."""
        return self.simulated_cache_read_share - self.recorded_cache_read_share

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (per-call figures included)."""
        return {
            "session": self.session,
            "model": self.model,
            "counter": self.counter,
            "calls": len(self.calls),
            "prefix_tokens": self.prefix_tokens,
            "warm_prefix_tokens": self.warm_prefix_tokens,
            "scale": round(self.scale, 4),
            "recorded_cache_read_share": round(self.recorded_cache_read_share, 5),
            "simulated_cache_read_share": round(self.simulated_cache_read_share, 5),
            "share_error": round(self.share_error, 5),
            "recorded_cost_usd": round(self.recorded_cost_usd, 6)
            if self.recorded_cost_usd is not None
            else None,
            "simulated_cost_usd": round(self.simulated_cost_usd, 6),
            "compactions": self.compactions,
            "prefix_changes": list(self.prefix_changes),
            "judged_from": self.judged_from,
            "untimed_calls": self.untimed_calls,
            "per_call": [
                {
                    "index": c.index,
                    "ttl": c.ttl,
                    "after_compaction": c.after_compaction,
                    "prefix_changed": c.prefix_changed,
                    "recorded": {
                        "input": c.recorded.input_tokens,
                        "creation": c.recorded.cache_creation_input_tokens,
                        "read": c.recorded.cache_read_input_tokens,
                    },
                    "simulated": {
                        "input": c.simulated.input_tokens,
                        "creation": c.simulated.cache_creation_input_tokens,
                        "read": c.simulated.cache_read_input_tokens,
                    },
                }
                for c in self.calls
            ],
        }


class _SessionCounter:
    """Message blocks: the base counter times the calibration scale; opaque blocks: fixed."""

    def __init__(self, base: BlockTokenCounter, scale: float, fixed: Mapping[str, int]) -> None:
        self._base = base
        self._scale = scale
        self._fixed = dict(fixed)
        self.name = base.name

    def fix(self, sizes: Mapping[str, int]) -> None:
        """Give the opaque blocks with these texts these sizes."""
        self._fixed.update(sizes)

    def count_block(self, block: FlatBlock) -> int:
        """Tokens of one block of a laid-out call."""
        if block.section == "system":
            text = str(block.block.get("text", ""))
            if text in self._fixed:
                return self._fixed[text]
        return round(self._base.count_block(block) * self._scale)


@dataclass(frozen=True, slots=True)
class RecordedConversation:
    """What simulating a recording reads of it: its main thread, its calls, and the
    conversation of a branch call. From a loaded transcript (`of`), or from a file read by
    offset (`unbounded.evaluation.recording_stream`), whose threads read their records again
    when they are walked."""

    main: Sequence[Entry]
    thread_calls: Sequence[ApiCall]
    """The main thread's calls (`Transcript.api_calls()`)."""
    billed: Sequence[BilledCall]
    """`Transcript.billed_calls()`."""
    branch_thread: Callable[[str], Sequence[Entry]]
    """`Transcript.branch_thread`: the conversation ending at a record's uuid."""
    model: str | None
    provider: str | None
    session: str | None
    """The file name, when there is one."""

    @classmethod
    def of(cls, transcript: Transcript) -> RecordedConversation:
        """A loaded transcript's."""
        main = transcript.main_thread()
        return cls(
            main=main,
            thread_calls=api_calls(main),
            billed=transcript.billed_calls(),
            branch_thread=transcript.branch_thread,
            model=transcript.model,
            provider=transcript.provider,
            session=transcript.path.name if transcript.path is not None else None,
        )


@dataclass(frozen=True, slots=True)
class _LaidCall:
    """A billed call laid out in the conversation it belongs to."""

    chain: Sequence[Entry]
    """The conversation: the main thread, or a branch's own history."""
    first: int
    """Index in `chain` of the call's first line (for a side call: where it stands)."""
    last: int
    """Index of its last line (`first - 1` for a side call, which has none)."""
    usage: Usage
    model: str | None
    line: int
    """File line of its first line, which orders the calls."""
    time: datetime | None
    """When its response was written."""
    on_thread: bool


def _laid_out_calls(recording: RecordedConversation) -> list[_LaidCall]:
    """Every billed call, in file order, with the conversation it sent (module docstring)."""

    def laid(chain: Sequence[Entry], call: ApiCall, on_thread: bool) -> _LaidCall:
        start = chain[call.first]
        return _LaidCall(
            chain=chain,
            first=call.first,
            last=call.last,
            usage=call.usage,
            model=call.model,
            line=start.line or 0,
            time=start.time,
            on_thread=on_thread,
        )

    main = recording.main
    thread_calls = recording.thread_calls
    calls = [laid(main, call, True) for call in thread_calls]
    done = {call.message_id for call in thread_calls}
    billed = recording.billed
    for billed_call in reversed(billed):  # a branch's last call rebuilds the whole branch
        if billed_call.place != "branch" or billed_call.message_id in done:
            continue
        if billed_call.uuid is None:
            continue
        chain = recording.branch_thread(billed_call.uuid)
        for own in api_calls(chain):
            if own.message_id not in done:
                done.add(own.message_id)
                calls.append(laid(chain, own, False))
    for side in billed:
        if side.place != "side":
            continue
        # Where it stands: before the first record written after it (at the end without a line).
        line = side.line if side.line is not None else max((e.line or 0 for e in main), default=0)
        first = next((i for i, e in enumerate(main) if (e.line or 0) > line), len(main))
        calls.append(
            _LaidCall(
                chain=main,
                first=first,
                last=first - 1,
                usage=side.usage,
                model=side.model,
                line=line,
                time=parse_timestamp(side.timestamp),
                on_thread=False,
            )
        )
    return sorted(calls, key=lambda call: call.line)


def _request_times(calls: Sequence[_LaidCall]) -> tuple[list[float], int]:
    """When each call's request started (the last record before its response), and how many
    calls had no time and were taken to follow the call before at once."""
    times: list[float] = []
    untimed = 0
    previous = float("-inf")
    for call in calls:
        if call.time is None:
            untimed += 1
            start = previous if previous > float("-inf") else 0.0
        else:
            start = call.time.timestamp()
            if call.first > 0:
                before = call.chain[call.first - 1].time
                if before is not None:
                    start = min(start, before.timestamp())
        start = max(start, previous)
        times.append(start)
        previous = start
    return times, untimed


def _entry_texts(entry: Entry) -> list[str]:
    texts: list[str] = []
    content = entry.data.get("content")
    if isinstance(content, str):
        texts.append(content)
    message = entry.message
    if message is not None:
        body = message.get("content")
        if isinstance(body, str):
            texts.append(body)
        elif isinstance(body, list):
            texts.extend(str(b.get("text", "")) for b in body if isinstance(b, dict))
    return texts


def prefix_change_events(entries: Sequence[Entry]) -> list[str]:
    """Prefix-changing events among these records: an MCP server (re)connected/disconnected."""
    texts = [text for entry in entries for text in _entry_texts(entry)]
    if any(_MCP_COMMAND.search(t) for t in texts) and any(_MCP_CHANGE.search(t) for t in texts):
        return ["mcp servers changed (/mcp)"]
    return []


def _call_ttls(usages: Sequence[Mapping[str, Any]]) -> list[CacheTtl]:
    def split(usage: Mapping[str, Any]) -> tuple[int, int]:
        detail = usage.get("cache_creation")
        if not isinstance(detail, Mapping):
            return 0, 0
        return (
            int(detail.get("ephemeral_5m_input_tokens") or 0),
            int(detail.get("ephemeral_1h_input_tokens") or 0),
        )

    total_5m = sum(split(u)[0] for u in usages)
    total_1h = sum(split(u)[1] for u in usages)
    current: CacheTtl = "1h" if total_1h > total_5m else "5m"
    ttls: list[CacheTtl] = []
    for usage in usages:
        five, one = split(usage)
        if one > five:
            current = "1h"
        elif five > one:
            current = "5m"
        ttls.append(current)
    return ttls


def recorded_cost_usd(model: ModelInfo, recorded: Sequence[RecordedUsage]) -> float | None:
    """The recorded calls' cost at this model's prices; None when the model has no price for
    what they did (1-hour cache writes on a model without that tier)."""
    if model.cache_write_1h_multiplier is None and any(
        r.cache_creation_1h_input_tokens for r in recorded
    ):
        return None
    return sum(
        usage_cost_usd(
            model,
            input_tokens=r.input_tokens,
            cache_creation_5m_input_tokens=r.cache_creation_5m_input_tokens,
            cache_creation_1h_input_tokens=r.cache_creation_1h_input_tokens,
            cache_read_input_tokens=r.cache_read_input_tokens,
            output_tokens=r.output_tokens,
        )
        for r in recorded
    )


def _calibrate(prompts: Sequence[int], estimates: Sequence[int]) -> float:
    """Recorded tokens per estimated message token (prompt_i = P + k * estimate_i)."""
    if len(prompts) < 2:
        return 1.0
    numerator = sum(p - prompts[0] for p in prompts[1:])
    denominator = sum(e - estimates[0] for e in estimates[1:])
    if denominator <= 0 or numerator <= 0:
        return 1.0
    low, high = _SCALE_BOUNDS
    return min(high, max(low, numerator / denominator))


def _opaque_system(
    warm: int, rest: int, version: int, ttl: CacheTtl
) -> tuple[list[SystemBlock], dict[str, int]]:
    blocks: list[SystemBlock] = []
    sizes: dict[str, int] = {}
    marker = get_cache_control("org", ttl)
    if warm > 0:
        text = f"[opaque system prompt and tools: cached before the session, {warm} tokens]"
        blocks.append({"type": "text", "text": text, "cache_control": dict(marker)})
        sizes[text] = warm
    if rest > 0:
        text = f"[opaque system prompt, tools and user context: v{version}, {rest} tokens]"
        blocks.append({"type": "text", "text": text, "cache_control": dict(marker)})
        sizes[text] = rest
    return blocks, sizes


class _ViewBuilder:
    """One conversation's view, built as its records go by."""

    def __init__(self, chain: Sequence[Entry]) -> None:
        self.chain = chain
        self.normalizer = MessageNormalizer()
        self.boundary = -1
        self.position = 0

    def advance(self, first: int) -> None:
        """Take in the records before `first` (a call's first line)."""
        if first < self.position:  # an earlier place in the conversation: read it again
            self.normalizer = MessageNormalizer()
            self.boundary = -1
            self.position = 0
        for index, entry in enumerate(self.chain[self.position : first], self.position):
            if entry.is_compact_boundary:
                self.boundary = index
                self.normalizer = MessageNormalizer()
            self.normalizer.append(entry)
        self.position = first


def _views(calls: Sequence[_LaidCall]) -> Iterator[tuple[int, list[MessageParam]]]:
    """(index of the last compact boundary before the call in its conversation, or -1; the
    API messages from it on) for each call in order, built as the records go by: one pass
    per conversation, not one per call."""
    builders: dict[int, _ViewBuilder] = {}
    for call in calls:
        builder = builders.get(id(call.chain))
        if builder is None:
            builder = builders[id(call.chain)] = _ViewBuilder(call.chain)
        builder.advance(call.first)
        yield builder.boundary, builder.normalizer.messages


class _ViewEstimates:
    """Estimated tokens of successive views, counting only the messages that changed."""

    def __init__(self, counter: BlockTokenCounter, memo: dict[bytes, int]) -> None:
        self._counter = counter
        self._memo = memo
        self._messages: list[MessageParam] = []
        self._counts: list[int] = []

    def estimate(self, messages: list[MessageParam]) -> int:
        """The view's estimate: the sum of its blocks' counts (memoised by digest)."""
        same = shared_prefix_length(messages, self._messages)
        del self._counts[same:]
        for message in messages[same:]:
            total = 0
            for block in flatten_request({"messages": [message]}):
                key = block_digest(block)
                count = self._memo.get(key)
                if count is None:
                    count = self._memo[key] = self._counter.count_block(block)
                total += count
            self._counts.append(total)
        self._messages = list(messages)
        return sum(self._counts)


def simulate_recorded_session(
    transcript: Transcript | RecordedConversation,
    model_info: ModelInfo | None = None,
    *,
    counter: BlockTokenCounter | TokenCounter | None = None,
    calibrate: bool = True,
    fit_calls: int | None = None,
) -> FidelityReport:
    """Simulate a recorded session's calls and compare cache reads (see module doc); with
    `fit_calls`, fit on that many first calls and compare over the rest (held out)."""
    recording = (
        transcript
        if isinstance(transcript, RecordedConversation)
        else RecordedConversation.of(transcript)
    )
    model = (
        model_info
        or resolve_recorded_model(
            load_model_table(), recording.model, provider=as_provider(recording.provider)
        )[0]
    )
    base = as_block_counter(counter)
    main = recording.main
    calls = _laid_out_calls(recording)
    session = recording.session
    if not calls:
        return FidelityReport(session, model.name, base.name, (), 0, 0, 1.0, 0.0, 0.0, 0.0, 0.0)

    if fit_calls is not None and not 1 <= fit_calls < len(calls):
        raise ConfigError(
            f"fit_calls={fit_calls} for a session of {len(calls)} recorded calls: fit on "
            f"1 to {len(calls) - 1} calls so that at least one is left to judge"
        )
    fitted = len(calls) if fit_calls is None else fit_calls
    usages = [dict(call.usage) for call in calls]
    ttls = _call_ttls(usages)
    recorded = [RecordedUsage.from_usage(u, t) for u, t in zip(usages, ttls, strict=True)]
    # The TTLs the simulation uses: the recorded ones on the fitted calls, then the last of
    # them (what a later call records is not known to a prediction).
    fitted_ttls = _call_ttls(usages[:fitted])
    ttls = fitted_ttls + [fitted_ttls[-1]] * (len(calls) - fitted)
    times, untimed = _request_times(calls)

    boundaries: list[int] = []
    estimates: list[int] = []
    memo: dict[bytes, int] = {}
    view_sizes: dict[int, _ViewEstimates] = {}  # per conversation (by identity)
    for call, (boundary, messages) in zip(calls, _views(calls), strict=True):
        boundaries.append(boundary)
        sizes_of_chain = view_sizes.setdefault(id(call.chain), _ViewEstimates(base, memo))
        estimates.append(sizes_of_chain.estimate(messages))

    prompts = [r.prompt_tokens for r in recorded]
    scale = _calibrate(prompts[:fitted], estimates[:fitted]) if calibrate else 1.0
    prefix = max(0, round(prompts[0] - scale * estimates[0]))
    warm = min(recorded[0].cache_read_input_tokens, prefix)
    rest = prefix - warm

    simulator_counter = _SessionCounter(base, scale, {})
    simulator = CacheSimulator(model, counter=simulator_counter)
    if warm > 0:
        system, sizes = _opaque_system(warm, 0, 0, ttls[0])
        simulator_counter.fix(sizes)
        primer: ProviderRequest = {"model": calls[0].model or model.name, "system": system}
        simulator.prime(times[0] - 1.0, primer)

    version = 0
    changes: list[str] = []
    results = FidelityCalls()
    previous_model: str | None = None
    previous_thread_last: int | None = None
    last_boundary: dict[int, int] = {}  # per conversation (by identity): its last boundary
    compactions = 0
    for (index, call), (_, messages) in zip(enumerate(calls), _views(calls), strict=True):
        name = call.model or recording.model or model.name
        changed = False
        if index > 0:
            events: list[str] = []
            if call.on_thread and previous_thread_last is not None:
                events = prefix_change_events(main[previous_thread_last + 1 : call.first])
            if previous_model is not None and name != previous_model:
                events.append(f"model changed ({previous_model} -> {name})")
            if events:
                version += 1
                changed = True
                changes.extend(f"call {index}: {event}" for event in events)
        previous_model = name
        if call.on_thread:
            previous_thread_last = call.last
        chain_key = id(call.chain)
        after_compaction = (
            chain_key in last_boundary and boundaries[index] != last_boundary[chain_key]
        )
        last_boundary[chain_key] = boundaries[index]
        compactions += int(after_compaction)
        system, sizes = _opaque_system(warm, rest, version, ttls[index])
        simulator_counter.fix(sizes)
        request: ProviderRequest = {"model": name, "system": system, "messages": messages}
        # From scratch: a recorded view is at most the recording's window long.
        planned = plan_cache_breakpoints(request, ttl=ttls[index]).request
        simulated = simulator.step(
            times[index], planned, output_tokens=recorded[index].output_tokens
        )
        results.append(
            FidelityCall(
                index=index,
                time=times[index],
                ttl=ttls[index],
                model=name,
                recorded=recorded[index],
                simulated=simulated,
                after_compaction=after_compaction,
                prefix_changed=changed,
            )
        )

    judged_from = 0 if fit_calls is None else fitted
    # Read in passes rather than sliced: a slice would build every call at once.
    judged: Sequence[FidelityCall] = results[judged_from:] if judged_from else results
    recorded_read = sum(c.recorded.cache_read_input_tokens for c in judged)
    recorded_total = sum(c.recorded.prompt_tokens for c in judged)
    simulated_read = sum(c.simulated.cache_read_input_tokens for c in judged)
    simulated_total = sum(c.simulated.prompt_tokens for c in judged)
    recorded_cost = recorded_cost_usd(model, [c.recorded for c in judged])
    return FidelityReport(
        session=session,
        model=model.name,
        counter=base.name,
        calls=results,
        prefix_tokens=prefix,
        warm_prefix_tokens=warm,
        scale=scale,
        recorded_cache_read_share=recorded_read / recorded_total if recorded_total else 0.0,
        simulated_cache_read_share=simulated_read / simulated_total if simulated_total else 0.0,
        recorded_cost_usd=recorded_cost,
        simulated_cost_usd=sum(c.simulated.cost_usd for c in judged),
        compactions=compactions,
        prefix_changes=tuple(changes),
        judged_from=judged_from,
        untimed_calls=untimed,
    )
