"""The timestamps of the records a compaction of the middleware archives (review rev13m).

Since `ConversationView.rebase` the view is kept up to date across a compaction, so every
message is converted once, by the call that first sees it: a record's timestamp is the time
of the model call that first added its message to the view (before the rebase, a later
compaction archived the records its compacting call converted anew, stamped with that call's
time). These tests give every model call a clock reading of its own and pin that rule."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import HumanMessage, ToolMessage

import unbounded.integrations._langchain_view as view_module
import unbounded.integrations.langchain as middleware_module
import unbounded.model.entries as entries_module
from test_compaction_request_golden import Capturing
from test_langchain_compaction_incremental import MODEL, SMALL_BATCHES, conversation
from unbounded.compaction.ledger import is_cleared_content
from unbounded.integrations._langchain_view import ConversationView
from unbounded.integrations.langchain import UnboundedMiddleware


def _minute(call: int) -> str:
    return f"2026-11-29T12:{call // 60:02d}:{call % 60:02d}Z"


def drive(
    monkeypatch: pytest.MonkeyPatch, seed: int, *, rebase: bool = True
) -> tuple[list[list[dict[str, Any]]], dict[str, str]]:
    """Drive a middleware through a random conversation, every model call reading a clock
    of its own (call n: second n). Returns the records each compacting update archives and,
    per message id, the time of the first call whose messages held it ("cleared ID": of the
    call that cleared it, its placeholder's record; "kept ID": of the call after the
    compaction that kept it). `rebase=False`: the
    view after a compaction is built again from the messages (the code before the rebase)."""
    calls = [0]
    for module in (view_module, middleware_module, entries_module):
        monkeypatch.setattr(module, "now_iso", lambda: _minute(calls[0]))
    if not rebase:
        monkeypatch.setattr(ConversationView, "rebase", lambda self, messages: None)
    middleware = UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=("messages", 90),
        keep=("messages", 12),
        summarizer=Capturing(),
        summary_retries=0,
        policy=SMALL_BATCHES,
    )
    every = conversation(seed, 150)
    state: dict[str, Any] = {"messages": []}
    archives: list[list[dict[str, Any]]] = []
    first_seen: dict[str, str] = {}
    kept_at = first_seen  # (one map: "kept ID" keys)
    for position, message in enumerate(every):
        state["messages"] = [*state["messages"], message]
        following = every[position + 1] if position + 1 < len(every) else None
        if isinstance(following, ToolMessage | HumanMessage) or not (
            position == 0 or isinstance(message, ToolMessage)
        ):
            continue
        calls[0] += 1
        for seen in state["messages"]:
            first_seen.setdefault(seen.id, _minute(calls[0]))
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        if not update:
            continue
        written = update.get("messages") or []
        if any(m.type == "remove" for m in written):
            archives.append([dict(record) for record in update["unbounded"]["archive"]["messages"]])
            state["messages"] = list(written[1:])
            for kept in state["messages"]:
                kept_at.setdefault(f"kept {kept.id}", _minute(calls[0] + 1))
        elif written:
            by_id = {m.id: m for m in written}
            state["messages"] = [by_id.get(m.id, m) for m in state["messages"]]
        if "unbounded" in update:
            state["unbounded"] = update["unbounded"]
        for seen in state["messages"]:
            if isinstance(seen, ToolMessage) and is_cleared_content(seen.content):
                first_seen.setdefault(f"cleared {seen.id}", _minute(calls[0]))
    monkeypatch.undo()
    return archives, first_seen


@pytest.mark.parametrize("seed", range(3))
def test_an_archived_record_is_stamped_by_the_call_that_last_put_it_in_the_view(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    archives, first_seen = drive(monkeypatch, seed)
    assert len(archives) >= 3
    for archive in archives:
        for record in archive:
            message_id = record["uuid"].split("#")[0]  # (an AI message's uuid: its id#hash)
            # Its record was last put in the view by the latest of: the call that first saw
            # the message, the call that cleared it (a placeholder's record), the call after a
            # compaction that kept it (`rebase` builds the view whole from the kept messages).
            times = [first_seen[message_id], first_seen.get(f"kept {message_id}", "")]
            if is_cleared_content(_result_content(record)):
                times.append(first_seen[f"cleared {message_id}"])
            assert record["timestamp"] == max(times), message_id


def _result_content(record: dict[str, Any]) -> Any:
    """The content of the tool result a user record is (None for any other record)."""
    content = record.get("message", {}).get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        return content[0].get("content")
    return None


@pytest.mark.parametrize("seed", range(2))
def test_a_later_compaction_archives_earlier_stamps_than_a_view_built_again(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """The change the rule makes: from the second compaction on, a record built again by the
    compacting call (the code before the rebase) carried that call's time; now the earlier
    one of the call that first converted it. The first compaction's records are unchanged."""
    warm, _ = drive(monkeypatch, seed)
    cold, _ = drive(monkeypatch, seed, rebase=False)
    assert len(warm) == len(cold) >= 2
    assert warm[0] == cold[0]
    later = [
        (new["timestamp"], old["timestamp"])
        for new_archive, old_archive in zip(warm[1:], cold[1:], strict=True)
        for new, old in zip(new_archive, old_archive, strict=True)
        if new["uuid"] == old["uuid"]
    ]
    assert all(new <= old for new, old in later)
    assert any(new < old for new, old in later)
