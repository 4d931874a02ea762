"""The opaque system prompt + tools prefix of a replayed session, and how its tokens are counted.

Transcripts hold neither the system prompt nor the tools, yet both sit at the front of every
request and dominate what the prompt cache reads. A replay therefore puts one opaque block
(two when part of it was already cached before the session began) where they would be, with
the size `caching/fidelity.py` infers from the first recorded call; for a transcript without
usage, a fixed 15,000-token block. Message blocks are counted with the rough estimate times
the session's calibration scale (recorded tokens per estimated token), so the replay's token
counts, thresholds and prices follow the recorded sizes. Every strategy of a replay (ours and
the baselines) uses the same prefix and the same counter, so their costs are comparable.

When the recording shows its prefix change mid-session (an MCP server reconnected: tools and
instructions differ from then on), the part after the one cached before the session is new
from that call's time for every strategy alike: each strategy's simulator sends it under a
new version (same size, new text), so it misses once as the recording did.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from unbounded.caching.blocks import FlatBlock
from unbounded.caching.breakpoints import place_cache_breakpoints
from unbounded.caching.fidelity import FidelityReport
from unbounded.caching.simulator import CacheSimulator, EstimateBlockCounter, SimulatedCall
from unbounded.caching.system_prompt import get_cache_control
from unbounded.caching.ttl import DEFAULT_QUERY_SOURCE, CacheTtl, TimeLike, as_seconds
from unbounded.catalog import ModelInfo
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest, SystemBlock

DEFAULT_PREFIX_TOKENS = 15_000
"""Size of the opaque system prompt + tools when the transcript records no usage."""

PrefixSource = Literal["inferred", "fixed"]

RECORDED_TOOLS: dict[str, Any] = {
    "name": "recorded_tools",
    "description": "Stands for the recorded session's tools, counted in the opaque prefix.",
    "input_schema": {"type": "object"},
}
"""The one tool a replayed session of ours declares before `recall` (the recorded tools'
schemas are not in the transcript; their tokens are part of the opaque prefix, so this
stand-in counts as none: requests that declare it cost what requests without it cost)."""


class ScaledBlockCounter:
    """Counts message blocks as the rough estimate times a scale; opaque blocks as given,
    the recorded tools' stand-in as nothing."""

    name = "estimate-scaled"

    def __init__(self, scale: float, fixed: Mapping[str, int]) -> None:
        self.scale = scale
        self._fixed = dict(fixed)
        self._base = EstimateBlockCounter()

    def count_block(self, block: FlatBlock) -> int:
        """Tokens of one block of a request."""
        if block.section == "tools" and block.block.get("name") == RECORDED_TOOLS["name"]:
            return 0
        if block.section == "system":
            text = block.block.get("text")
            if isinstance(text, str) and text in self._fixed:
                return self._fixed[text]
        return round(self._base.count_block(block) * self.scale)


class ChangingPrefixSimulator(CacheSimulator):
    """A cache simulator whose requests carry the prefix version of their time: from each
    change time on, the opaque block after the warm one is sent under that version's text."""

    def __init__(
        self,
        model: ModelInfo,
        *,
        counter: ScaledBlockCounter,
        other_models: Mapping[str, ModelInfo] | None,
        changes: Sequence[float],
        versions: Sequence[str],
    ) -> None:
        super().__init__(model, counter=counter, other_models=other_models)
        if len(versions) != len(changes) + 1:
            raise ConfigError(
                f"{len(changes)} prefix change(s) need {len(changes) + 1} version texts "
                f"(the original first), not {len(versions)}"
            )
        self._changes = list(changes)
        self._versions = list(versions)

    def step(
        self,
        time: TimeLike,
        request: ProviderRequest,
        *,
        query_source: str = DEFAULT_QUERY_SOURCE,
        output_tokens: int = 0,
        unchanged: tuple[object, int] | None = None,
    ) -> SimulatedCall:
        """Send the request with the prefix version in force at `time` (the same messages)."""
        version = bisect_right(self._changes, as_seconds(time))
        if version:
            request = _with_system_text(request, self._versions[0], self._versions[version])
        return super().step(
            time,
            request,
            query_source=query_source,
            output_tokens=output_tokens,
            unchanged=unchanged,
        )


def _with_system_text(request: ProviderRequest, old: str, new: str) -> ProviderRequest:
    """A shallow copy of the request whose system block with text `old` has text `new`."""
    system = request.get("system")
    if not isinstance(system, list):
        return request
    blocks: list[SystemBlock] = [
        {**block, "text": new} if block.get("text") == old else block for block in system
    ]
    return {**request, "system": blocks}


@dataclass(frozen=True, slots=True)
class OpaquePrefix:
    """The modelled system prompt + tools: its size, the part cached before, the scale, and
    the times from which the recording shows it changed."""

    tokens: int
    warm_tokens: int = 0
    scale: float = 1.0
    source: PrefixSource = "fixed"
    changes: tuple[float, ...] = ()
    """Request times (seconds, ascending) from which the part after the warm one is new."""

    @classmethod
    def from_fidelity(cls, report: FidelityReport) -> OpaquePrefix:
        """The prefix fidelity.py inferred, or the fixed default when it had nothing to go on."""
        if not report.calls or report.prefix_tokens <= 0:
            return cls(DEFAULT_PREFIX_TOKENS, 0, report.scale if report.calls else 1.0, "fixed")
        warm = min(report.warm_prefix_tokens, report.prefix_tokens)
        # A model change also marks a call `prefix_changed`; the replay keys the cache by the
        # model its requests name already, so only the changes on one model are taken here.
        changes = tuple(
            call.time
            for previous, call in zip(report.calls, report.calls[1:], strict=False)
            if call.prefix_changed and call.model == previous.model
        )
        if warm >= report.prefix_tokens:  # all of it was cached before: nothing after it
            changes = ()
        return cls(report.prefix_tokens, warm, report.scale, "inferred", changes)

    def _texts(self, version: int = 0) -> list[tuple[str, int]]:
        parts: list[tuple[str, int]] = []
        if self.warm_tokens > 0:
            parts.append(
                (
                    f"[opaque system prompt and tools, cached earlier: {self.warm_tokens} tokens]",
                    self.warm_tokens,
                )
            )
        rest = self.tokens - self.warm_tokens
        if rest > 0 or not parts:
            name = "opaque system prompt and tools" + (f", version {version}" if version else "")
            parts.append((f"[{name}: {rest} tokens]", max(rest, 0)))
        return parts

    def system_blocks(self, ttl: CacheTtl = "5m") -> list[SystemBlock]:
        """The system blocks every replayed request starts with (each cached, org scope)."""
        return [
            {"type": "text", "text": text, "cache_control": get_cache_control("org", ttl)}
            for text, _ in self._texts()
        ]

    def counter(self) -> ScaledBlockCounter:
        """A block counter that knows the opaque blocks' sizes (every version's) and the
        session's scale."""
        sizes = {
            text: size
            for version in range(len(self.changes) + 1)
            for text, size in self._texts(version)
        }
        return ScaledBlockCounter(self.scale, sizes)

    def simulator(
        self,
        model: ModelInfo,
        model_name: str,
        *,
        time: float,
        ttl: CacheTtl,
        other_models: Mapping[str, ModelInfo] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> CacheSimulator:
        """A cache simulator for one strategy, with the warm part primed just before `time`
        and the recorded prefix changes applied to the requests from their times on.

        `model_name` is the model string the requests carry (it keys the cache). `tools`: the
        tools the strategy's requests declare before the prefix; the earlier sessions that
        warmed it declared the same ones."""
        simulator: CacheSimulator
        if self.changes:
            versions = [self._texts(version)[-1][0] for version in range(len(self.changes) + 1)]
            simulator = ChangingPrefixSimulator(
                model,
                counter=self.counter(),
                other_models=other_models,
                changes=self.changes,
                versions=versions,
            )
        else:
            simulator = CacheSimulator(model, counter=self.counter(), other_models=other_models)
        if self.warm_tokens > 0:
            warm_text, _ = self._texts()[0]
            primer: ProviderRequest = {
                "model": model_name,
                "system": [{"type": "text", "text": warm_text}],
            }
            if tools:
                primer["tools"] = [dict(tool) for tool in tools]
            simulator.prime(time - 1.0, place_cache_breakpoints(primer, ttl=ttl))
        return simulator

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description."""
        return {
            "tokens": self.tokens,
            "warm_tokens": self.warm_tokens,
            "scale": round(self.scale, 4),
            "source": self.source,
            "changes": len(self.changes),
        }
