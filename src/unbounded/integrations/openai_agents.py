"""The OpenAI Agents SDK: a `Session` that keeps the conversation inside the window.

    from agents import Agent, RunConfig, Runner
    from unbounded.integrations.openai_agents import UnboundedSession

    session = UnboundedSession("user-42", model="gpt-5-mini", folder=".sessions")
    agent = Agent(name="coder", tools=[*my_tools, session.recall_tool()])
    result = await Runner.run(agent, "Fix the tests.", session=session,
                              run_config=RunConfig(call_model_input_filter=session.model_input))

`UnboundedSession` implements the SDK's `Session` protocol (`session_id`, `get_items`,
`add_items`, `pop_item`, `clear_session`) on one unbounded `Session`, stored in a folder
(`folder/<session_id>`), in any unbounded store (`store=`, a `PostgresStore` for many
workers) or in memory:

- `add_items` appends the run's items (Responses input items, converted by
  `unbounded.wire.openai_items`) to the session's append-only transcript;
- `get_items` returns what the agent should send, not the raw history: the session's
  prepared conversation (old tool results cleared, older turns summarized at the threshold)
  as Responses items;
- `model_input` (for `RunConfig(call_model_input_filter=...)`) does the same before every
  model call inside a run, since the SDK reads the session once per run and a long run grows
  in memory between its turns;
- `recall_tool()` is the `recall` tool for the agent, answered from the transcript.

The summaries are written offline (the extractive hand-over) unless `summarizer=` is an
unbounded `Provider` (such as `OpenAIProvider(AsyncOpenAI())`): the session does not see the
agent's model. Compared with the SDK's `OpenAIResponsesCompactionSession`, which wraps
another session and asks OpenAI's `responses.compact` endpoint to shorten the history (an
OpenAI-only, server-side summary whose content is opaque), this session works with any model
the SDK drives (Chat Completions servers included), clears stale tool output before it
summarizes, keeps the whole transcript for `recall`, and counts tokens itself.

Importing this module needs the Agents SDK (`pip install 'unbounded[agents]'`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from unbounded.errors import ConfigError

try:
    from agents import FunctionTool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as missing:  # pragma: no cover - exercised only without the Agents SDK
    raise ConfigError(
        f"the Agents SDK session needs openai-agents ({missing}): pip install 'unbounded[agents]'"
    ) from None

from unbounded.events import EventSink
from unbounded.integrations._support import answer_recall, append_message
from unbounded.model.content import MessageParam
from unbounded.model.response import Provider
from unbounded.policy import Policy
from unbounded.recall.schema import RECALL_DESCRIPTION, RECALL_INPUT_SCHEMA, RECALL_TOOL_NAME
from unbounded.session import Session, SessionConfig
from unbounded.storage import SessionStore
from unbounded.wire.openai_items import items_to_messages, messages_to_items, plain_item

logger = logging.getLogger(__name__)


def _same_message(a: MessageParam, b: MessageParam) -> bool:
    """Whether two messages say the same (cache markers aside)."""

    def blocks(message: MessageParam) -> list[dict[str, Any]]:
        content = message["content"]
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return [
            {key: value for key, value in dict(block).items() if key != "cache_control"}
            for block in content
        ]

    return a["role"] == b["role"] and blocks(a) == blocks(b)


class UnboundedSession:
    """An Agents SDK `Session` backed by one unbounded `Session` (see the module docstring).

    `model` names the model the agent uses (its window and prices come from the model table,
    or `context_window=`). Give `folder` (the session lives in `folder/<session_id>`), or
    `store` (any unbounded `SessionStore`), or neither (memory).
    """

    session_settings: Any = None
    """The SDK's per-session settings (none: the SDK's defaults)."""

    def __init__(
        self,
        session_id: str,
        *,
        model: str,
        folder: str | Path | None = None,
        store: SessionStore | None = None,
        context_window: int | None = None,
        policy: Policy | None = None,
        summarizer: Provider | None = None,
        events: EventSink | None = None,
        **session_options: Any,
    ) -> None:
        if not isinstance(session_id, str):
            raise ConfigError(
                f"session_id must be text (a name without '/'), not "
                f"{type(session_id).__name__} {session_id!r}: pass str({session_id!r}) if "
                "that is the name"
            )
        held = getattr(store, "session_id", session_id)  # a PostgresStore names its session
        if held != session_id:
            raise ConfigError(
                f"the store holds session {held!r}, not {session_id!r}: open the store with "
                "this session_id, or use its own"
            )
        if not session_id or "/" in session_id or session_id in (".", ".."):
            raise ConfigError(
                f"session_id must be a non-empty name without '/', not {session_id!r}"
            )
        if folder is not None and store is not None:
            raise ConfigError("give a folder or a store, not both")
        if summarizer is not None and not isinstance(summarizer, Provider):
            raise ConfigError(
                "summarizer must be an unbounded Provider (name, supports_cache_edits, profile "
                f"and create()), not {type(summarizer).__name__}"
            )
        self.session_id = session_id
        self._folder = Path(folder).expanduser() / session_id if folder is not None else None
        self._store = store
        self._config = SessionConfig(model=model, context_window=context_window)
        self._options: dict[str, Any] = {"policy": policy, "events": events, **session_options}
        if summarizer is None:
            from unbounded.providers.extractive import ExtractiveSummarizer

            summarizer = ExtractiveSummarizer()
        self._options["summarizer"] = summarizer
        self.session = self._open()
        """The unbounded session (its transcript, status and events)."""

    def _open(self) -> Session:
        if self._folder is not None:
            return Session.open(self._folder, self._config, **self._options)
        if self._store is not None:
            return Session(self._config, store=self._store, **self._options)
        return Session(self._config, **self._options)

    # -- the SDK's Session protocol

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation to send, as Responses items: the session's prepared one (cleared
        and summarized as needed), the latest `limit` items when given."""
        if limit is not None and limit < 0:
            raise ConfigError(f"limit must be >= 0, not {limit}")
        if not self.session.messages:
            return []
        items = await self._prepared_items()
        return items if limit is None else items[len(items) - limit :] if limit else []

    async def add_items(self, items: list[Any]) -> None:
        """Append the run's new items to the transcript."""
        if not items:
            return
        inbound = items_to_messages([plain_item(item) for item in items])
        for message in inbound.messages:
            self._append(message)

    async def pop_item(self) -> Any | None:
        """Take the last reply out of the conversation (a regenerate) and return its last
        item; the transcript keeps it on an abandoned branch. Only a reply can be taken
        back: the transcript is append-only, so other items raise `ConfigError`."""
        messages = self.session.messages
        if not messages:
            return None
        if messages[-1]["role"] != "assistant":
            raise ConfigError(
                "pop_item takes back the last reply only; the last item is the user's (the "
                "transcript is append-only): start a new session_id to change the history"
            )
        last = messages_to_items([messages[-1]])
        self.session.discard_last_reply()
        return last[-1] if last else None

    async def clear_session(self) -> None:
        """Start the conversation afresh: a folder's transcript is moved aside (kept, not
        deleted), a memory session is replaced; a store given by you is not touched."""
        if self._store is not None:
            raise ConfigError(
                "clear_session cannot empty a store you gave: open a new session_id instead"
            )
        self.session.close()
        if self._folder is not None and self._folder.exists():
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
            aside = self._folder.with_name(f"{self._folder.name}.cleared-{stamp}")
            self._folder.rename(aside)
            logger.info("session %s cleared: its folder moved to %s", self.session_id, aside)
        self.session = self._open()

    # -- inside a run

    async def model_input(self, data: CallModelData[Any]) -> ModelInputData:
        """`RunConfig(call_model_input_filter=session.model_input)`: the managed conversation
        before every model call of a run (the items the run added are already in the session,
        which the SDK saves after each turn). Input the session does not hold yet goes as
        given."""
        given = data.model_data.input
        inbound = items_to_messages([plain_item(item) for item in given]) if given else None
        held = self.session.messages
        if inbound is None or not inbound.messages or not held:
            return data.model_data
        if not _same_message(inbound.messages[-1], held[-1]):
            logger.warning(
                "the run's input ends with items session %s does not hold: sent unmanaged",
                self.session_id,
            )
            return data.model_data
        return ModelInputData(
            input=await self._prepared_items(), instructions=data.model_data.instructions
        )

    def recall_tool(self) -> FunctionTool:
        """The `recall` tool for the agent's `tools`, answered from this session's transcript
        (an argument error goes back to the model as the tool's error text)."""

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            call = ctx.tool_call
            call_id = getattr(ctx, "tool_call_id", None) or (call.call_id if call else "")
            try:
                parsed = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                parsed = {"invalid": arguments}
            return answer_recall(self.session, call_id, parsed).text

        return FunctionTool(
            name=RECALL_TOOL_NAME,
            description=RECALL_DESCRIPTION,
            params_json_schema=RECALL_INPUT_SCHEMA,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def close(self) -> None:
        """Release the session folder's lock."""
        self.session.close()

    # -- helpers

    def _append(self, message: MessageParam) -> None:
        content = message["content"]
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else [dict(block) for block in content]
        )
        append_message(self.session, message["role"], blocks)

    async def _prepared_items(self) -> list[Any]:
        request = await self.session.prepare()
        sent: Sequence[MessageParam] = request.get("messages", [])
        return list(messages_to_items(sent))


__all__ = ["UnboundedSession"]
