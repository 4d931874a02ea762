"""Whether compacting before a resume costs less than the resume: the break-even of idle
compaction and of the cold-resume guard, written once (docs/compaction.md "Idle compaction").

With `C` the context now, `E` the context a compaction leaves (system prompt and tools, the
summary `Policy.compaction_summary_tokens`, the re-read files
`Policy.rehydrate_total_file_tokens`), `S` the summary's output, `H` the turns counted after the
resume (`Policy.compaction_payback_turns`), and the model's prices (input `p`, output `o`, cache
write `w` at the messages' TTL, cache read `r`, as multiples of `p`):

    keep:     the resume writes C again,                  w·C + H·r·C
    compact:  the summary call sends C, then the resume
              writes the small context,                   s·C + (o/p)·S + w·E + H·r·E

The summary call's input `s` is a cache read (`r`) while the cache is warm (idle compaction:
the host said it is idle before the TTL ran out, and the summary shares the cached prefix),
and a cache write (`w`) when it has expired (the cold-resume guard: the summary request must
send the whole context again). Compacting pays when `compact < keep`; idle compaction also
needs `Policy.idle_compact_min_tokens`, because the pause may end the session, and then the
summary bought nothing.

An unpriced model (input price 0, as the drop-ins give a model they have no prices for) never
pays to compact: with nothing to save, both sides are 0 and the context is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from unbounded.caching.ttl import CacheTtl
from unbounded.catalog import ModelInfo
from unbounded.policy import Policy


@dataclass(frozen=True, slots=True)
class ResumeCosts:
    """The two sides of the break-even, in USD."""

    keep_usd: float
    """Resuming the context as it is."""
    compact_usd: float
    """Compacting first (the summary call included), then resuming the small context."""

    @property
    def compacting_pays(self) -> bool:
        """Compacting first costs less."""
        return self.compact_usd < self.keep_usd


def write_multiplier(model: ModelInfo, ttl: CacheTtl) -> float:
    """The cache-write price of a TTL, as a multiple of the input price."""
    if ttl == "1h" and model.cache_write_1h_multiplier is not None:
        return model.cache_write_1h_multiplier
    return model.cache_write_5m_multiplier


def resume_costs(
    policy: Policy,
    model: ModelInfo,
    *,
    tokens: int,
    overhead: int,
    ttl: CacheTtl,
    cache_warm: bool,
) -> ResumeCosts:
    """The break-even's two sides (module docstring) for a context of `tokens`, of which
    `overhead` is the system prompt and tools; both 0 for an unpriced model."""
    if model.input_per_mtok <= 0:
        return ResumeCosts(keep_usd=0.0, compact_usd=0.0)  # nothing to save: never compacts
    per_token = model.input_per_mtok / 1_000_000
    write = write_multiplier(model, ttl)
    read = model.cache_read_multiplier
    after = overhead + policy.compaction_summary_tokens + policy.rehydrate_total_file_tokens
    after = min(after, tokens)
    turns = policy.compaction_payback_turns
    keep = write * tokens + turns * read * tokens
    summary_input = read if cache_warm else write
    output = model.output_per_mtok / model.input_per_mtok * policy.compaction_summary_tokens
    compact = summary_input * tokens + output + write * after + turns * read * after
    return ResumeCosts(keep_usd=keep * per_token, compact_usd=compact * per_token)


def idle_compaction_pays(
    policy: Policy, model: ModelInfo, *, tokens: int, overhead: int, ttl: CacheTtl
) -> ResumeCosts | None:
    """The costs when compacting an idle session with a warm cache pays, else None."""
    if tokens < policy.idle_compact_min_tokens:
        return None
    costs = resume_costs(policy, model, tokens=tokens, overhead=overhead, ttl=ttl, cache_warm=True)
    return costs if costs.compacting_pays else None


def cold_resume_pays(
    policy: Policy, model: ModelInfo, *, tokens: int, overhead: int, ttl: CacheTtl
) -> bool:
    """Compacting with a summary call before the first request after the cache expired costs
    less than sending the whole context again."""
    costs = resume_costs(policy, model, tokens=tokens, overhead=overhead, ttl=ttl, cache_warm=False)
    return costs.compacting_pays


__all__ = [
    "ResumeCosts",
    "cold_resume_pays",
    "idle_compaction_pays",
    "resume_costs",
    "write_multiplier",
]
