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
from typing import Any, NamedTuple, Protocol, cast, overload

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
    def __getitem__(self, position: slice) -> Sequence[FidelityCall]: ...

    def __getitem__(self, position: int | slice) -> FidelityCall | Sequence[FidelityCall]:
        if isinstance(position, slice):
            # A view, not a list: `report.calls[1:]` of 100,000 calls built them all at once
            # (about 70 MB).
            return _FidelityCallsView(self, range(len(self))[position])
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


class _FidelityCallsView(Sequence[FidelityCall]):
    """Some rows of a `FidelityCalls` (a slice of it), each call built when read."""

    def __init__(self, calls: FidelityCalls, rows: range) -> None:
        """The calls at `rows` of `calls`."""
        self._calls = calls
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, position: int) -> FidelityCall: ...

    @overload
    def __getitem__(self, position: slice) -> Sequence[FidelityCall]: ...

    def __getitem__(self, position: int | slice) -> FidelityCall | Sequence[FidelityCall]:
        if isinstance(position, slice):
            return _FidelityCallsView(self._calls, self._rows[position])
        try:
            row = self._rows[position]
        except IndexError:
            raise IndexError(
                f"fidelity call {position} out of range ({len(self._rows)} calls)"
            ) from None
        return self._calls[row]

    def __iter__(self) -> Iterator[FidelityCall]:
        calls = self._calls
        for row in self._rows:
            yield calls[row]

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same calls (a list included)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


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
    time: float | None
    """When its response was written (POSIX seconds)."""
    on_thread: bool


class _Placed(Protocol):
    """Where a call stands: its conversation and the index of its first line."""

    @property
    def chain(self) -> Sequence[Entry]: ...

    @property
    def first(self) -> int: ...


class _Place(NamedTuple):
    """A call's conversation and first line, without the rest of the call."""

    chain: Sequence[Entry]
    first: int


_UNTIMED = float("nan")
"""The time column's code for a call without a time."""


class _LaidCalls:
    """Every billed call laid out, as columns in file order: a simulation of 100,000 calls
    holds about 60 bytes a call here, not a call object and its usage dict (about 1 KB).
    A call's usage is read again from the calls it came from when asked for."""

    def __init__(self) -> None:
        """No calls yet: `add` them, then `sort`."""
        self._chains: list[Sequence[Entry]] = []
        self._chain_codes: dict[int, int] = {}
        self._sources: list[Sequence[ApiCall] | Sequence[BilledCall]] = []
        self._source_codes: dict[int, int] = {}
        self._models: list[str | None] = []
        self._model_codes: dict[str | None, int] = {}
        self._columns: dict[str, array[Any]] = {
            "chain": array("I"),
            "source": array("I"),
            "row": array("q"),
            "first": array("q"),
            "last": array("q"),
            "line": array("q"),
            "time": array("d"),
            "model": array("I"),
            "on_thread": array("B"),
        }

    @staticmethod
    def _code(value: Any, key: Any, values: list[Any], codes: dict[Any, int]) -> int:
        code = codes.get(key)
        if code is None:
            code = codes[key] = len(values)
            values.append(value)
        return code

    def add(
        self,
        chain: Sequence[Entry],
        source: Sequence[ApiCall] | Sequence[BilledCall],
        row: int,
        *,
        model: str | None,
        first: int,
        last: int,
        line: int,
        time: datetime | None,
        on_thread: bool,
    ) -> None:
        """One call: `source[row]` (whose usage it takes), standing in `chain`."""
        # Keyed by identity: a conversation is one object, and equal ones are not the same.
        codes = (
            self._code(chain, id(chain), self._chains, self._chain_codes),
            self._code(source, id(source), self._sources, self._source_codes),
            row,
            first,
            last,
            line,
            _UNTIMED if time is None else time.timestamp(),
            self._code(model, model, self._models, self._model_codes),
            int(on_thread),
        )
        for column, value in zip(self._columns.values(), codes, strict=True):
            column.append(value)

    def sort(self) -> None:
        """Put the calls in file order (stable: calls on one line keep the order added)."""
        lines = self._columns["line"]
        if all(lines[i] <= lines[i + 1] for i in range(len(lines) - 1)):
            return
        order = sorted(range(len(lines)), key=lines.__getitem__)
        for name, column in self._columns.items():
            self._columns[name] = array(column.typecode, (column[i] for i in order))

    def __len__(self) -> int:
        return len(self._columns["line"])

    def chain(self, index: int) -> Sequence[Entry]:
        """The conversation call `index` stands in."""
        return self._chains[int(self._columns["chain"][index])]

    def first(self, index: int) -> int:
        """Index in its conversation of the call's first line."""
        return int(self._columns["first"][index])

    def last(self, index: int) -> int:
        """Index of the call's last line."""
        return int(self._columns["last"][index])

    def time(self, index: int) -> float | None:
        """When the call's response was written (POSIX seconds), if known."""
        time = float(self._columns["time"][index])
        return None if time != time else time  # NaN: no time

    def model(self, index: int) -> str | None:
        """The model the call recorded."""
        return self._models[int(self._columns["model"][index])]

    def on_thread(self, index: int) -> bool:
        """Whether the call is one of the main thread's own."""
        return bool(self._columns["on_thread"][index])

    def usage(self, index: int) -> Usage:
        """The call's recorded usage, read again from the call it came from."""
        columns = self._columns
        return self._sources[int(columns["source"][index])][int(columns["row"][index])].usage

    def places(self) -> Iterator[_Place]:
        """Each call's conversation and first line, in order."""
        chains, codes, firsts = self._chains, self._columns["chain"], self._columns["first"]
        for code, first in zip(codes, firsts, strict=True):
            yield _Place(chains[code], first)

    def __getitem__(self, index: int) -> _LaidCall:
        """Call `index`, built."""
        return _LaidCall(
            chain=self.chain(index),
            first=self.first(index),
            last=self.last(index),
            usage=self.usage(index),
            model=self.model(index),
            line=int(self._columns["line"][index]),
            time=self.time(index),
            on_thread=self.on_thread(index),
        )


def _laid_out_calls(recording: RecordedConversation) -> _LaidCalls:
    """Every billed call, in file order, with the conversation it sent (module docstring)."""
    laid = _LaidCalls()

    def lay(chain: Sequence[Entry], calls: Sequence[ApiCall], on_thread: bool) -> None:
        for row, call in enumerate(calls):
            start = chain[call.first]
            laid.add(
                chain,
                calls,
                row,
                model=call.model,
                first=call.first,
                last=call.last,
                line=start.line or 0,
                time=start.time,
                on_thread=on_thread,
            )

    main = recording.main
    thread_calls = recording.thread_calls
    lay(main, thread_calls, True)
    billed = recording.billed
    done: set[str] | None = None  # built only when a billed call is on a branch
    for billed_call in reversed(billed):  # a branch's last call rebuilds the whole branch
        if billed_call.place != "branch":
            continue
        if done is None:
            done = {call.message_id for call in thread_calls}
        if billed_call.message_id in done or billed_call.uuid is None:
            continue
        chain = recording.branch_thread(billed_call.uuid)
        own = [call for call in api_calls(chain) if call.message_id not in done]
        done.update(call.message_id for call in own)
        lay(chain, own, False)
    main_last_line: int | None = None
    for row, side in enumerate(billed):
        if side.place != "side":
            continue
        # Where it stands: before the first record written after it (at the end without a line).
        line = side.line
        if line is None:
            if main_last_line is None:
                main_last_line = max((e.line or 0 for e in main), default=0)
            line = main_last_line
        first = next((i for i, e in enumerate(main) if (e.line or 0) > line), len(main))
        laid.add(
            main,
            billed,
            row,
            model=side.model,
            first=first,
            last=first - 1,
            line=line,
            time=parse_timestamp(side.timestamp),
            on_thread=False,
        )
    laid.sort()
    return laid


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


_TTLS: tuple[CacheTtl, CacheTtl] = ("5m", "1h")
"""The TTL codes of a TTL column."""


def _ttl_split(usage: Mapping[str, Any]) -> tuple[int, int]:
    """A recorded usage's cache writes at 5 minutes and at 1 hour (0, 0 without the split)."""
    detail = usage.get("cache_creation")
    if not isinstance(detail, Mapping):
        return 0, 0
    return (
        int(detail.get("ephemeral_5m_input_tokens") or 0),
        int(detail.get("ephemeral_1h_input_tokens") or 0),
    )


def _call_ttls(five: Sequence[int], one: Sequence[int], count: int) -> array[int]:
    """The TTL (a code of `_TTLS`) of each of the first `count` calls, from their 5m and 1h
    writes: the one a call wrote most of, else the call before's, else the session's."""
    total_5m = sum(five[i] for i in range(count))
    total_1h = sum(one[i] for i in range(count))
    current = 1 if total_1h > total_5m else 0
    ttls = array("B")
    for index in range(count):
        if one[index] > five[index]:
            current = 1
        elif five[index] > one[index]:
            current = 0
        ttls.append(current)
    return ttls


class _RecordedColumns:
    """The recorded usages of a session's calls as integer columns (40 bytes a call)."""

    def __init__(self) -> None:
        """No calls yet."""
        self._columns = tuple(array("q") for _ in range(5))

    def append(self, recorded: RecordedUsage) -> None:
        """Add a call's after the others."""
        values = (
            recorded.input_tokens,
            recorded.cache_creation_5m_input_tokens,
            recorded.cache_creation_1h_input_tokens,
            recorded.cache_read_input_tokens,
            recorded.output_tokens,
        )
        for column, value in zip(self._columns, values, strict=True):
            column.append(value)

    def __getitem__(self, index: int) -> RecordedUsage:
        """Call `index`'s, built."""
        values = [column[index] for column in self._columns]
        return RecordedUsage(*values)

    def prompt_tokens(self, index: int) -> int:
        """Input + cache creation + cache read of call `index`."""
        return sum(self._columns[column][index] for column in range(4))


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


def _add_recorded_cost(model: ModelInfo, total: float, recorded: RecordedUsage) -> float | None:
    """`total` plus one recorded call's cost at this model's prices (`recorded_cost_usd` one
    call at a time, summed in the same order); None when the model cannot price it."""
    if model.cache_write_1h_multiplier is None and recorded.cache_creation_1h_input_tokens:
        return None
    return total + usage_cost_usd(
        model,
        input_tokens=recorded.input_tokens,
        cache_creation_5m_input_tokens=recorded.cache_creation_5m_input_tokens,
        cache_creation_1h_input_tokens=recorded.cache_creation_1h_input_tokens,
        cache_read_input_tokens=recorded.cache_read_input_tokens,
        output_tokens=recorded.output_tokens,
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
        self.before: Entry | None = None
        """The record at `position - 1`: the last one taken in."""

    def advance(self, first: int) -> None:
        """Take in the records before `first` (a call's first line)."""
        if first < self.position:  # an earlier place in the conversation: read it again
            self.normalizer = MessageNormalizer()
            self.boundary = -1
            self.position = 0
            self.before = None
        for index, entry in enumerate(self.chain[self.position : first], self.position):
            if entry.is_compact_boundary:
                self.boundary = index
                self.normalizer = MessageNormalizer()
            self.normalizer.append(entry)
            self.before = entry
        self.position = first


def _view_walk(
    calls: Iterable[_Placed],
) -> Iterator[tuple[int, list[MessageParam], Entry | None]]:
    """`_views`, each with the record just before the call in its conversation (None at its
    start): the last one the walk took in, so it is not read again."""
    builders: dict[int, _ViewBuilder] = {}
    for call in calls:
        builder = builders.get(id(call.chain))
        if builder is None:
            builder = builders[id(call.chain)] = _ViewBuilder(call.chain)
        builder.advance(call.first)
        yield builder.boundary, builder.normalizer.messages, builder.before


def _views(calls: Iterable[_Placed]) -> Iterator[tuple[int, list[MessageParam]]]:
    """(index of the last compact boundary before the call in its conversation, or -1; the
    API messages from it on) for each call in order, built as the records go by: one pass
    per conversation, not one per call."""
    for boundary, messages, _ in _view_walk(calls):
        yield boundary, messages


_MEMO_LIMIT = 20_000
"""Block counts a simulation remembers by digest (about 2 MB) before it starts afresh."""


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
                    if len(self._memo) >= _MEMO_LIMIT:
                        # Counting again is all a forgotten block costs: a count is its
                        # content's, and the memo grew ~350 bytes a call over a session.
                        self._memo.clear()
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
    count = len(calls)
    # Per call, only columns are kept: each usage is read again from its call when needed.
    five, one = array("q"), array("q")
    for index in range(count):
        split = _ttl_split(calls.usage(index))
        five.append(split[0])
        one.append(split[1])
    recorded_ttls = _call_ttls(five, one, count)
    recorded = _RecordedColumns()
    for index in range(count):
        recorded.append(RecordedUsage.from_usage(calls.usage(index), _TTLS[recorded_ttls[index]]))
    # The TTLs the simulation uses: the recorded ones on the fitted calls, then the last of
    # them (what a later call records is not known to a prediction).
    fitted_ttls = _call_ttls(five, one, fitted)
    del five, one, recorded_ttls

    def ttl(index: int) -> CacheTtl:
        return _TTLS[fitted_ttls[min(index, fitted - 1)]]

    # When each request started: the last record before its response, else the call before.
    times = array("d")
    untimed = 0
    previous = float("-inf")
    boundaries = array("q")
    estimates = array("q")
    memo: dict[bytes, int] = {}
    view_sizes: dict[int, _ViewEstimates] = {}  # per conversation (by identity)
    for index, (place, (boundary, messages, before)) in enumerate(
        zip(calls.places(), _view_walk(calls.places()), strict=True)
    ):
        boundaries.append(boundary)
        sizes_of_chain = view_sizes.setdefault(id(place.chain), _ViewEstimates(base, memo))
        estimates.append(sizes_of_chain.estimate(messages))
        time = calls.time(index)
        if time is None:
            untimed += 1
            start = previous if previous > float("-inf") else 0.0
        else:
            start = time
            before_time = before.time if before is not None else None
            if before_time is not None:
                start = min(start, before_time.timestamp())
        start = max(start, previous)
        times.append(start)
        previous = start
    del memo, view_sizes, sizes_of_chain

    prompts = array("q", (recorded.prompt_tokens(index) for index in range(count)))
    scale = _calibrate(prompts[:fitted], estimates[:fitted]) if calibrate else 1.0
    first_recorded = recorded[0]
    prefix = max(0, round(first_recorded.prompt_tokens - scale * estimates[0]))
    warm = min(first_recorded.cache_read_input_tokens, prefix)
    rest = prefix - warm
    del prompts, estimates

    simulator_counter = _SessionCounter(base, scale, {})
    simulator = CacheSimulator(model, counter=simulator_counter)
    if warm > 0:
        system, sizes = _opaque_system(warm, 0, 0, ttl(0))
        simulator_counter.fix(sizes)
        primer: ProviderRequest = {"model": calls.model(0) or model.name, "system": system}
        simulator.prime(times[0] - 1.0, primer)

    judged_from = 0 if fit_calls is None else fitted
    # What is compared is summed as the calls go by, over the judged calls only.
    recorded_read = recorded_total = simulated_read = simulated_total = 0
    recorded_cost: float | None = 0
    simulated_cost: float = 0
    version = 0
    changes: list[str] = []
    results = FidelityCalls()
    previous_model: str | None = None
    previous_thread_last: int | None = None
    last_boundary: dict[int, int] = {}  # per conversation (by identity): its last boundary
    compactions = 0
    for index, (place, (_, messages)) in enumerate(
        zip(calls.places(), _views(calls.places()), strict=True)
    ):
        name = calls.model(index) or recording.model or model.name
        on_thread = calls.on_thread(index)
        changed = False
        if index > 0:
            events: list[str] = []
            if on_thread and previous_thread_last is not None:
                events = prefix_change_events(main[previous_thread_last + 1 : place.first])
            if previous_model is not None and name != previous_model:
                events.append(f"model changed ({previous_model} -> {name})")
            if events:
                version += 1
                changed = True
                changes.extend(f"call {index}: {event}" for event in events)
        previous_model = name
        if on_thread:
            previous_thread_last = calls.last(index)
        chain_key = id(place.chain)
        after_compaction = (
            chain_key in last_boundary and boundaries[index] != last_boundary[chain_key]
        )
        last_boundary[chain_key] = boundaries[index]
        compactions += int(after_compaction)
        call_ttl = ttl(index)
        system, sizes = _opaque_system(warm, rest, version, call_ttl)
        simulator_counter.fix(sizes)
        request: ProviderRequest = {"model": name, "system": system, "messages": messages}
        # From scratch: a recorded view is at most the recording's window long.
        planned = plan_cache_breakpoints(request, ttl=call_ttl).request
        call_recorded = recorded[index]
        simulated = simulator.step(times[index], planned, output_tokens=call_recorded.output_tokens)
        results.append(
            FidelityCall(
                index=index,
                time=times[index],
                ttl=call_ttl,
                model=name,
                recorded=call_recorded,
                simulated=simulated,
                after_compaction=after_compaction,
                prefix_changed=changed,
            )
        )
        if index < judged_from:
            continue
        recorded_read += call_recorded.cache_read_input_tokens
        recorded_total += call_recorded.prompt_tokens
        simulated_read += simulated.cache_read_input_tokens
        simulated_total += simulated.prompt_tokens
        simulated_cost += simulated.cost_usd
        if recorded_cost is not None:
            recorded_cost = _add_recorded_cost(model, recorded_cost, call_recorded)

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
        simulated_cost_usd=simulated_cost,
        compactions=compactions,
        prefix_changes=tuple(changes),
        judged_from=judged_from,
        untimed_calls=untimed,
    )
