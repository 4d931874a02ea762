"""The provider's own compaction as a replay strategy, priced beside ours and the baselines.

- `server_compaction`: Anthropic's `compact_20260112` as `ServerCompaction` asks for it: the
  server compacts once the prompt reaches its trigger (20,000 tokens under the auto-compact
  threshold, `Policy.warning_buffer`, and never under the server's 50,000-token minimum). The
  compaction is an extra sampling step in the same call (a `compaction` entry of
  `usage.iterations`, billed at the model's rates): it reads the whole prompt (the cached
  prefix is read from the cache, as the request shares it) and writes the summary; the
  reply then goes on from the summary alone. Later requests send the compaction block and
  what follows (the server drops what precedes it). The step is priced as a side call over
  the same request with the summary instructions appended; its output is the offline
  extractive summary's size, so a replay stays offline.

The server's `clear_tool_uses_20250919` with its defaults (trigger 100,000 input tokens, keep
3 tool uses) clears what the `clear_every_turn` baseline clears (LangChain's edit copies its
defaults), so that baseline prices it too.
"""

from __future__ import annotations

from unbounded.compaction.prompts import summary_message_text
from unbounded.evaluation.baselines import (
    NAIVE_SUMMARY_PROMPT,
    SUMMARY_MAX_TOKENS,
    Baseline,
    CallPlan,
    History,
    ReplaySettings,
    SidePlan,
    settled_once_own,
)
from unbounded.evaluation.recorded import RecordedCall
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.tokens.estimate import rough_token_count
from unbounded.wire.context_edits import MIN_COMPACTION_TRIGGER

NATIVE_STRATEGIES: tuple[str, ...] = ("server_compaction",)
"""The provider-native strategies, in report order (after the baselines)."""


def server_trigger(threshold: int, policy: Policy | None = None) -> int:
    """The server's compaction trigger for an auto-compact `threshold` (as `ServerCompaction`
    sets it by default)."""
    buffer = (policy or Policy()).warning_buffer
    return max(MIN_COMPACTION_TRIGGER, threshold - buffer)


class ServerCompactionStrategy(Baseline):
    """Anthropic's server compaction at its trigger (module docstring)."""

    name = "server_compaction"

    def __init__(self, settings: ReplaySettings, history: History | None = None) -> None:
        super().__init__(settings, history)
        self.summarizer = ExtractiveSummarizer()
        self.trigger = server_trigger(settings.threshold)
        self.compacted = False

    def plan(self, call: RecordedCall) -> CallPlan:
        """The history from the last compaction on; at the trigger, the compaction step as a
        side call sharing the cached prefix, then the summary alone."""
        messages = self.history.messages()
        if self._context_tokens(messages) < self.trigger or len(messages) < 2:
            return CallPlan(messages, changed=self.compacted)
        step = self.settings.request(
            [*messages, {"role": "user", "content": NAIVE_SUMMARY_PROMPT}],
            model_name=self.settings.model_for(call),
        )
        step["max_tokens"] = SUMMARY_MAX_TOKENS
        reply = self.summarizer.summarize(step).text
        output = round(rough_token_count(reply) * self.settings.prefix.scale)
        self.compacted = True
        self.run.compactions += 1
        summary = summary_message_text(reply, transcript_path=None, messages_preserved=False)
        self.replace_history([Entry.user(summary, is_compact_summary=True)])
        return CallPlan(
            self.history.messages(),
            (SidePlan(step, output, query_source="server_compaction"),),
            changed=True,
        )

    def settled(self, history: History) -> int:
        """None of it before the compaction (which reads all), all of it after."""
        return settled_once_own(self, history)


def native_strategies(settings: ReplaySettings, history: History | None = None) -> list[Baseline]:
    """One instance of each native strategy, in report order (sharing `history` when given:
    feed them with `feed_strategies`)."""
    return [ServerCompactionStrategy(settings, history)]


__all__ = [
    "NATIVE_STRATEGIES",
    "ServerCompactionStrategy",
    "native_strategies",
    "server_trigger",
]
