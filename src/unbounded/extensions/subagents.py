"""Sub-agents: child sessions forked from a parent session (seeds 000 and 004).

`fork_subagent(parent, name, prompt)` starts a child `Session` that shares the parent's
prompt cache: the same cache-safe parameters (system prompt, tools, model, thinking config,
output cap, extra request fields), the parent's conversation as its message prefix (the view
after the last boundary, copied into the child's own transcript) and the parent's cleared
tool results (a copy of its microcompaction state), so the child's first request repeats the
parent's last one byte for byte before the task prompt. Its query source is `agent:<name>`.

The child is a session of its own:

- **Storage.** A folder-backed parent gives the child `<parent folder>/subagents/<name>/`
  (its own transcript, state and lock); otherwise a `MemoryStore`. `resume_subagent` opens an
  existing child folder again.
- **Compaction.** Before each of its turns the child auto-compacts when it is over its own
  threshold, like any session, but its summary call asks for the sub-agent continuation
  summary (`SUBAGENT_CONTINUATION_PROMPT`: task overview, current state, discoveries, next
  steps, context to preserve) instead of the nine-section one: `ContinuationSummarizer` wraps
  the provider and swaps the prompt, so PTL retries, the fallback call, the breaker and its
  extractive takeover all work as for the main session.
- **Cleanup scoped to itself.** Post-compact cleanup runs over the child's own state
  (microcompaction, break-detector baseline, listeners registered on the child). Nothing of
  the parent is shared mutably (its microcompaction state is copied, not referenced), so a
  child's compaction never resets the main session's state (seed 004: "Clearing state during
  a subagent compaction would corrupt the main thread").
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unbounded.compaction.micro import MicrocompactState
from unbounded.compaction.prompts import SUBAGENT_CONTINUATION_PROMPT
from unbounded.compaction.summary_guard import ANY_SECTIONS, CONTINUATION_SECTIONS
from unbounded.errors import ConfigError
from unbounded.extension import Extension
from unbounded.model.entries import Entry
from unbounded.model.profile import ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ProviderWrapper
from unbounded.providers.base import Heartbeat, ModelResponse, Provider
from unbounded.session import Session
from unbounded.storage import FolderStore, MemoryStore, SessionStore

SUBAGENT_FOLDER = "subagents"
"""Sub-folder of a folder-backed parent that holds its children's folders."""
QUERY_SOURCE_PREFIX = "agent:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_agent_name(name: str) -> str:
    """The name if it is 1-64 letters, digits, `_`, `-` or `.` (not leading); else ConfigError."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise ConfigError(
            f"sub-agent name {name!r} must be 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit"
        )
    return name


def subagent_query_source(name: str) -> str:
    """`agent:<name>`, the query source of a sub-agent's requests."""
    return QUERY_SOURCE_PREFIX + check_agent_name(name)


class ContinuationSummarizer(ProviderWrapper):
    """A provider that asks for the sub-agent continuation summary instead of the full one.

    The summary request's last user message (the summary prompt) is replaced by
    `SUBAGENT_CONTINUATION_PROMPT`; everything before it, and so the shared cache prefix, is
    left as it is. Any other request passes through unchanged.
    """

    def __init__(self, provider: Provider, prompt: str = SUBAGENT_CONTINUATION_PROMPT) -> None:
        if not isinstance(provider, Provider):
            raise ConfigError("ContinuationSummarizer needs a Provider (an object with create())")
        if not prompt.strip():
            raise ConfigError("the continuation prompt must not be empty")
        super().__init__(provider)
        self.prompt = prompt

    @property
    def profile(self) -> ProviderProfile:
        """The wrapped provider's profile, with the sections its own prompt asks for: the
        continuation's five parts, or, for a prompt of the caller's own, none (size only)."""
        sections = (
            CONTINUATION_SECTIONS if self.prompt == SUBAGENT_CONTINUATION_PROMPT else ANY_SECTIONS
        )
        return dataclasses.replace(self.inner.profile, summary_sections=sections)

    def rewrite(self, request: ProviderRequest) -> ProviderRequest:
        """The request with its summary prompt replaced (a copy; the input is untouched)."""
        messages = list(request.get("messages", []))
        if not messages or messages[-1].get("role") != "user":
            return request
        last = messages[-1]
        content = last.get("content")
        text = content if isinstance(content, str) else "".join(
            str(block.get("text", "")) for block in content if block.get("type") == "text"
        )
        if "<summary>" not in text:
            return request
        marker: dict[str, Any] = {}
        if isinstance(content, list):
            for block in content:
                control = dict(block).get("cache_control")
                if control is not None:
                    marker = {"cache_control": copy.deepcopy(control)}
        new_content: Any = (
            [{"type": "text", "text": self.prompt, **marker}] if marker else self.prompt
        )
        messages[-1] = {"role": "user", "content": new_content}
        rewritten = dict(request)
        rewritten["messages"] = messages
        return rewritten  # type: ignore[return-value]

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Send the rewritten request to the wrapped provider."""
        return await self.inner.create(self.rewrite(request), stream=stream, heartbeat=heartbeat)


def _child_store(parent: Session, name: str, store: SessionStore | None) -> SessionStore:
    if store is not None:
        return store
    if isinstance(parent.store, FolderStore):
        return FolderStore(Path(parent.store.folder) / SUBAGENT_FOLDER / name)
    return MemoryStore()


def _prefix_entries(parent: Session) -> list[Entry]:
    """Copies of the parent's view (boundary left out: its segment points into the parent's
    file), so the child's transcript reproduces the parent's messages on its own."""
    return [
        Entry(copy.deepcopy(entry.data))
        for entry in parent.view
        if not entry.is_compact_boundary
    ]


def fork_subagent(
    parent: Session,
    name: str,
    prompt: str | None = None,
    *,
    summarizer: Provider | None = None,
    inherit_messages: bool = True,
    store: SessionStore | None = None,
    extensions: Sequence[Extension] = (),
    **options: Any,
) -> Session:
    """A child session of `parent` (module docstring); `prompt`, when given, is its first
    user message. `summarizer` (default: the parent's, or the parent's model) is wrapped in a
    `ContinuationSummarizer`; `options` go to `Session` (policy, events, hooks, model_table…).
    """
    check_agent_name(name)
    config = dataclasses.replace(parent.config, query_source=subagent_query_source(name))
    child_store = _child_store(parent, name, store)
    if child_store.load().entries:
        if isinstance(child_store, FolderStore):
            child_store.close()
        raise ConfigError(f"sub-agent {name!r} already has a transcript; use resume_subagent")
    if inherit_messages:
        child_store.append(_prefix_entries(parent))
    provider = summarizer if summarizer is not None else _parents_summarizer(parent)
    options.setdefault("policy", parent.policy)
    options.setdefault("allowed_roots", parent.options.allowed_roots)
    options.setdefault("ttl_eligible", parent.ttl_latch.eligible)
    child = Session(
        config,
        store=child_store,
        summarizer=ContinuationSummarizer(provider) if provider is not None else None,
        extensions=extensions,
        **options,
    )
    if inherit_messages:
        child.state.micro = MicrocompactState.from_dict(parent.micro.to_dict())
    if prompt is not None:
        child.add_user(prompt)
    return child


def resume_subagent(
    parent: Session,
    name: str,
    *,
    summarizer: Provider | None = None,
    store: SessionStore | None = None,
    extensions: Sequence[Extension] = (),
    **options: Any,
) -> Session:
    """Open an existing child of `parent` again (its folder under `subagents/<name>/`)."""
    check_agent_name(name)
    config = dataclasses.replace(parent.config, query_source=subagent_query_source(name))
    provider = summarizer if summarizer is not None else _parents_summarizer(parent)
    options.setdefault("policy", parent.policy)
    options.setdefault("allowed_roots", parent.options.allowed_roots)
    options.setdefault("ttl_eligible", parent.ttl_latch.eligible)
    return Session(
        config,
        store=_child_store(parent, name, store),
        summarizer=ContinuationSummarizer(provider) if provider is not None else None,
        extensions=extensions,
        **options,
    )


def _parents_summarizer(parent: Session) -> Provider | None:
    """The summarizer the parent uses: the one it was given, else its model (the provider
    of its last `call`); None when it has neither."""
    return parent.summarizer if parent.summarizer is not None else parent.model_provider()


def subagent_result(child: Session) -> str:
    """The text of the child's last response (what goes back to the parent's tool result)."""
    for entry in reversed(child.view):
        content = entry.content
        if entry.type != "assistant" or entry.is_synthetic_api_error:
            continue
        if isinstance(content, str):
            return content
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        if any(text.strip() for text in texts):
            return "\n".join(text for text in texts if text.strip())
    return ""


__all__ = [
    "SUBAGENT_FOLDER",
    "ContinuationSummarizer",
    "check_agent_name",
    "fork_subagent",
    "resume_subagent",
    "subagent_query_source",
    "subagent_result",
]
