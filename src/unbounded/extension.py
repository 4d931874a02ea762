"""`Extension`: the one way to plug into a session, and `ExtensionHost`, what a hook sees of it.

An extension (session memory, instruction files, your own) subclasses `Extension` and
overrides the hooks it needs; the session runs the hooks of its extensions in the order they
were given (docs/session.md, "Extensions"). Each hook receives the session as an
`ExtensionHost`: the protocol names what an extension may read and call, so this module sits
below `session.py` and imports nothing of it (`Session` is an `ExtensionHost`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from unbounded.errors import ConfigError

if TYPE_CHECKING:
    from unbounded.caching.ttl import CacheTtl
    from unbounded.catalog import ModelInfo
    from unbounded.compaction.context import CompactionContext
    from unbounded.compaction.conversation import CacheSafeParams, CompactionResult
    from unbounded.compaction.micro import MicrocompactState
    from unbounded.configuration import SessionConfig
    from unbounded.events import EventSink
    from unbounded.model.content import MessageParam
    from unbounded.model.entries import Entry
    from unbounded.model.response import Provider
    from unbounded.policy import Policy, Thresholds
    from unbounded.session_state import SessionStatus
    from unbounded.storage import SessionStore
    from unbounded.turn import TurnContext


class ExtensionHost(Protocol):
    """What an extension's hooks may read and call of the session they belong to."""

    @property
    def config(self) -> SessionConfig:
        """What the main requests are made of."""
        ...

    @property
    def policy(self) -> Policy:
        """The session's policy, scaled for the window."""
        ...

    @property
    def thresholds(self) -> Thresholds:
        """The window's warning, error and auto-compact thresholds."""
        ...

    @property
    def model_info(self) -> ModelInfo:
        """The model's limits, with the config's window."""
        ...

    @property
    def store(self) -> SessionStore:
        """Where the session keeps its transcript, state and notes."""
        ...

    @property
    def entries(self) -> Sequence[Entry]:
        """The transcript's main thread (read it, never edit it)."""
        ...

    @property
    def view(self) -> list[Entry]:
        """The entries after the last compaction boundary."""
        ...

    @property
    def messages(self) -> list[MessageParam]:
        """The API messages of the current view."""
        ...

    @property
    def micro(self) -> MicrocompactState:
        """The microcompaction state (what is cleared)."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append records to the transcript."""
        ...

    def status(self) -> SessionStatus:
        """Where the context stands now."""
        ...

    def cache_safe_params(self) -> CacheSafeParams:
        """The parameters a fork repeats to share the session's prompt cache."""
        ...

    def cache_ttls(self) -> tuple[CacheTtl, CacheTtl]:
        """(messages' TTL, tools and system TTL) of the session's cache markers."""
        ...

    def compaction_context(self) -> CompactionContext:
        """What a compaction of this conversation reads now."""
        ...

    async def compact(self, *, instructions: str | None = None) -> CompactionResult:
        """Compact the conversation now, the summary prompt given `instructions`."""
        ...

    def model_provider(self) -> Provider | None:
        """The model the session's summaries and notes are written by (None: none yet)."""
        ...

    def call_provider(self) -> Provider | None:
        """The provider the conversation's requests go to (None: not known yet)."""
        ...

    def events_sink(self) -> EventSink | None:
        """Where the session's events go."""
        ...

    def write_notes(self, text: str) -> None:
        """Replace the session notes in the store."""
        ...

    def extension_state(self, name: str) -> dict[str, Any]:
        """The values the extension `name` keeps across a resume: a dict of JSON values it
        changes in place, saved with the session's state after each step."""
        ...


class Extension:
    """Something that plugs into a session (session memory, instruction files): subclass it
    and override the hooks you need; each one here does nothing.

    A session runs the hooks of its `extensions` in the order they were given, each with the
    session and what the hook is about (docs/session.md, "Extensions"). The hooks belong to
    one session: a sub-agent's compaction (its own Session) never reaches the parent's.
    """

    def attached(self, session: ExtensionHost) -> None:
        """Called once, when `session` is built with this extension (load saved state)."""

    async def before_prepare(self, session: ExtensionHost) -> None:
        """Awaited at the start of every `prepare()`, before the auto-compact check."""

    def tools_offered(
        self, session: ExtensionHost, tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The tools the requests declare, given those the extensions before this one left;
        asked when the session builds its request parameters, not on every turn, and when it
        derives its settings (once the extensions are attached, and on `reconfigure`), so the
        size estimate of the system prompt and tools counts what an extension adds; again
        whenever `tools_state` changes."""
        return tools

    def tools_state(self, session: ExtensionHost) -> object:
        """A small comparable value that changes when `tools_offered` would give other tools
        (asked every turn; the default never changes)."""
        return None

    async def before_request(self, session: ExtensionHost, turn: TurnContext) -> None:
        """Awaited once the request is built and its cache markers placed, before it is
        validated and kept as sent: may replace `turn.request`."""

    def after_record(self, session: ExtensionHost, entry: Entry) -> None:
        """Called after each recorded response, with its entry."""

    def answers_tool(self, session: ExtensionHost, name: str) -> bool:
        """Whether this extension answers calls of the tool `name` (one it offers in
        `tools_offered`); the session then asks `answer_tool` for their results."""
        return False

    async def answer_tool(
        self, session: ExtensionHost, tool_use: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The tool_result block for a call of a tool this extension answers."""
        raise NotImplementedError(f"{type(self).__name__} answers no tool calls")

    async def compact_from_memory(
        self, session: ExtensionHost, *, max_post_tokens: int | None = None
    ) -> CompactionResult | None:
        """A compaction without a summary call (the first tier of `auto_compact`), or None to
        fall through; None too when it would hold more than `max_post_tokens` (default: the
        auto-compact threshold). Only extensions that override it are asked, in order."""
        return None

    def after_compact(self, session: ExtensionHost, result: CompactionResult) -> None:
        """Called after a compaction was appended: post-compact cleanup of state that referred
        to the old messages."""


def offers_memory_compaction(extension: Extension) -> bool:
    """Whether the extension overrides `compact_from_memory` (it holds notes to compact from)."""
    return type(extension).compact_from_memory is not Extension.compact_from_memory


def checked_extensions(extensions: Sequence[object]) -> tuple[Extension, ...]:
    """The extensions, each an `Extension` (a ConfigError names the first that is not)."""
    checked: list[Extension] = []
    for position, extension in enumerate(extensions):
        if not isinstance(extension, Extension):
            raise ConfigError(
                f"extensions[{position}] is a {type(extension).__name__}, not an "
                "unbounded.Extension: subclass Extension and override the hooks you need "
                "(an attach(session) that appends to the session's listener lists is no "
                "longer called; docs/session.md, Extensions)"
            )
        checked.append(extension)
    return tuple(checked)


__all__ = ["Extension", "ExtensionHost", "checked_extensions", "offers_memory_compaction"]
