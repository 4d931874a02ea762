"""The opaque system prompt + tools prefix of a replayed session, and how its tokens are counted.

Transcripts hold neither the system prompt nor the tools, yet both sit at the front of every
request and dominate what the prompt cache reads. A replay therefore puts one opaque block
(two when part of it was already cached before the session began) where they would be, with
the size `caching/fidelity.py` infers from the first recorded call; for a transcript without
usage, a fixed 15,000-token block. Message blocks are counted with the rough estimate times
the session's calibration scale (recorded tokens per estimated token), so the replay's token
counts, thresholds and prices follow the recorded sizes. Every strategy of a replay (ours and
the baselines) uses the same prefix and the same counter, so their costs are comparable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from unbounded.caching.blocks import FlatBlock
from unbounded.caching.breakpoints import place_cache_breakpoints
from unbounded.caching.fidelity import FidelityReport
from unbounded.caching.simulator import CacheSimulator, EstimateBlockCounter
from unbounded.caching.system_prompt import get_cache_control
from unbounded.caching.ttl import CacheTtl
from unbounded.catalog import ModelInfo
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


@dataclass(frozen=True, slots=True)
class OpaquePrefix:
    """The modelled system prompt + tools: its size, the part cached before, the scale."""

    tokens: int
    warm_tokens: int = 0
    scale: float = 1.0
    source: PrefixSource = "fixed"

    @classmethod
    def from_fidelity(cls, report: FidelityReport) -> OpaquePrefix:
        """The prefix fidelity.py inferred, or the fixed default when it had nothing to go on."""
        if not report.calls or report.prefix_tokens <= 0:
            return cls(DEFAULT_PREFIX_TOKENS, 0, report.scale if report.calls else 1.0, "fixed")
        warm = min(report.warm_prefix_tokens, report.prefix_tokens)
        return cls(report.prefix_tokens, warm, report.scale, "inferred")

    def _texts(self) -> list[tuple[str, int]]:
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
            parts.append((f"[opaque system prompt and tools: {rest} tokens]", max(rest, 0)))
        return parts

    def system_blocks(self, ttl: CacheTtl = "5m") -> list[SystemBlock]:
        """The system blocks every replayed request starts with (each cached, org scope)."""
        return [
            {"type": "text", "text": text, "cache_control": get_cache_control("org", ttl)}
            for text, _ in self._texts()
        ]

    def counter(self) -> ScaledBlockCounter:
        """A block counter that knows the opaque blocks' sizes and the session's scale."""
        return ScaledBlockCounter(self.scale, dict(self._texts()))

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
        """A cache simulator for one strategy, with the warm part primed just before `time`.

        `model_name` is the model string the requests carry (it keys the cache). `tools`: the
        tools the strategy's requests declare before the prefix; the earlier sessions that
        warmed it declared the same ones."""
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
        }
