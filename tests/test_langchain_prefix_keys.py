"""The view keeps no key for the settled prefix it leaves out (reading them was a pass over the
history on a new middleware's first call): the prefix is known by its first message and the
one after it, and a later call reuses what still matches as before."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import BaseMessage, ToolMessage

from test_langchain_settled import _ai, _apply, _comparable, _long_checkpointed, _middleware
from unbounded.integrations import _langchain_view
from unbounded.integrations.langchain import UnboundedMiddleware


def _first(messages: list[Any]) -> tuple[UnboundedMiddleware, dict[str, Any]]:
    """A new middleware's first call on a long checkpointed thread (a settled prefix left out)."""
    middleware = _middleware()
    state = _apply({"messages": messages}, middleware.before_model({"messages": messages}, None))  # type: ignore[arg-type]
    assert middleware._view.base > 0
    return middleware, state


def _converted(monkeypatch: pytest.MonkeyPatch) -> list[BaseMessage]:
    seen: list[BaseMessage] = []
    real = _langchain_view.ConversationView._add

    def counting(self: Any, message: BaseMessage) -> None:
        seen.append(message)
        real(self, message)

    monkeypatch.setattr(_langchain_view.ConversationView, "_add", counting)
    return seen


def test_the_view_holds_keys_only_from_the_settled_split_on() -> None:
    middleware, state = _first(_long_checkpointed(400, 20))
    view = middleware._view
    assert len(view.keys) == len(state["messages"]) - view.base
    assert view.keys[0] == state["messages"][view.base].id
    assert view.held == len(state["messages"])


def _round(index: int) -> list[Any]:
    tool_id = f"call-new-{index}"
    return [
        _ai(1_000 + index, [(tool_id, "read_file")], 30_000 + 50 * index),
        ToolMessage(content="z" * 800, tool_call_id=tool_id, id=f"tool-new-{index}"),
    ]


def test_a_grown_thread_is_reused_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    middleware, state = _first(_long_checkpointed(400, 20))
    converted = _converted(monkeypatch)
    grown = {**state, "messages": [*state["messages"], *_round(0)]}
    middleware.before_model(grown, None)  # type: ignore[arg-type]
    assert [m.id for m in converted] == [m.id for m in _round(0)]


def test_a_changed_tail_is_reused_up_to_the_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest round replaced by another: the settled prefix still stands (its first
    message and the one after it carry their ids), the tail is matched key by key and only
    the new round is converted; the call does what a new middleware does on that state."""
    middleware, state = _first(_long_checkpointed(400, 20))
    converted = _converted(monkeypatch)
    changed = {**state, "messages": [*state["messages"][:-2], *_round(1)]}
    warm = _apply(dict(changed), middleware.before_model(changed, None))  # type: ignore[arg-type]
    assert [m.id for m in converted] == [m.id for m in _round(1)]
    monkeypatch.undo()
    fresh = _apply(dict(changed), _middleware().before_model(changed, None))  # type: ignore[arg-type]
    assert _comparable(warm) == _comparable(fresh)


@pytest.mark.parametrize("edit", ["first message", "message after the prefix"])
def test_a_prefix_whose_ends_changed_is_read_again(
    monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    """The first message, or the one after the settled prefix, given another id, and the
    newest round replaced (so the last message the view saw is gone): the view is not
    reused (built again, as a new middleware builds it) and the call does what a new
    middleware does."""
    middleware, state = _first(_long_checkpointed(400, 20))
    messages = list(state["messages"])
    at = 0 if edit == "first message" else middleware._view.base
    messages[at] = messages[at].model_copy(update={"id": "edited"})
    edited = {**state, "messages": [*messages[:-2], *_round(2)]}
    assert middleware._view.reused(edited["messages"], frozenset()) == 0
    converted = _converted(monkeypatch)
    warm = _apply(dict(edited), middleware.before_model(edited, None))  # type: ignore[arg-type]
    assert len(converted) > 2
    monkeypatch.undo()
    fresh = _apply(dict(edited), _middleware().before_model(edited, None))  # type: ignore[arg-type]
    assert _comparable(warm) == _comparable(fresh)
