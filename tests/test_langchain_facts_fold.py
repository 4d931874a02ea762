"""A warm LangChain middleware's facts ledger comes from its view's facts fold (`PrefixFacts`:
copies kept every few records, the records after the nearest one read at the compaction),
and the fold tells whether a summarized record holds media (the summary request's rewrites
are skipped when none does): over random conversations with error results, images in
results, clearing batches (which clear error results too) and several compactions, every
summary request and compacted update (the summary with its ledger appended) is the same
bytes as when the ledger reads every summarized record and the rewrites run."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage, messages_to_dict

import unbounded.integrations._langchain_view as view_module
import unbounded.integrations.langchain as middleware_module
import unbounded.model.entries as entries_module
from test_compaction_request_golden import _UUID, Capturing, numbered
from test_langchain_compaction_incremental import MODEL, SMALL_BATCHES, conversation
from unbounded.compaction.facts import LEDGER_TITLE, PrefixFacts, facts_ledger_for
from unbounded.integrations.langchain import UnboundedMiddleware
from unbounded.model.entries import Entry


def with_images(seed: int) -> list[BaseMessage]:
    """`conversation(seed, 150)` with an image in a result of an early round (the first
    compaction summarizes it, the next ones do not) and of a late one."""
    out = conversation(seed, 150)
    late = len(out) * 2 // 3
    for position, message in enumerate(out):
        if isinstance(message, ToolMessage) and position in (3, late, late + 1):
            image = {"type": "image", "source_type": "base64", "mime_type": "image/png"}
            out[position] = message.model_copy(
                update={"content": [{"type": "text", "text": "a plot"}, {**image, "data": "iVBO"}]}
            )
    return out


def drive(
    monkeypatch: pytest.MonkeyPatch, seed: int, *, from_scratch: bool
) -> tuple[list[str], list[str], list[int], list[bool | None]]:
    """One warm middleware called after each round of a random conversation (its updates
    applied as the agent applies them), its fold copied every 8 records: the summary
    requests, every compacting update (as JSON) and where each ledger took the fold from.
    `from_scratch`: every ledger reads all the summarized records."""
    real_init, real_ledger_of = PrefixFacts.__init__, PrefixFacts.ledger_of
    real_rewrites = PrefixFacts.rewrites
    taken: list[int] = []
    known: list[bool | None] = []

    def rewrites(self: PrefixFacts, head: Any, records: Any) -> bool | None:
        answer = real_rewrites(self, head, records)
        known.append(answer)
        return None if from_scratch else answer

    def small(self: PrefixFacts, every: int = 8, keep: int = 3) -> None:
        real_init(self, every, keep)

    def ledger_of(self: PrefixFacts, head: Any, records: Any) -> Any:
        folded = real_ledger_of(self, head, records)
        taken.append(self.taken_from)

        def ledger(items: list[Entry]) -> str:
            return facts_ledger_for(items) if from_scratch else folded(items)

        return ledger

    monkeypatch.setattr(PrefixFacts, "__init__", small)
    monkeypatch.setattr(PrefixFacts, "ledger_of", ledger_of)
    monkeypatch.setattr(PrefixFacts, "rewrites", rewrites)
    for module in (view_module, middleware_module, entries_module):
        monkeypatch.setattr(module, "now_iso", lambda: "2026-11-29T12:00:00.000Z")
    summarizer = Capturing()
    middleware = UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=("messages", 90),
        keep=("messages", 12),
        summarizer=summarizer,
        summary_retries=0,
        policy=SMALL_BATCHES,
    )
    every = with_images(seed)
    state: dict[str, Any] = {"messages": []}
    compacted: list[str] = []
    for position, message in enumerate(every):
        state["messages"] = [*state["messages"], message]
        following = every[position + 1] if position + 1 < len(every) else None
        if isinstance(following, ToolMessage | HumanMessage) or not (
            position == 0 or isinstance(message, ToolMessage)
        ):
            continue
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        if not update:
            continue
        written = update.get("messages") or []
        if any(m.type == "remove" for m in written):
            text = json.dumps(
                {k: messages_to_dict(v) if k == "messages" else v for k, v in update.items()},
                ensure_ascii=False,
                default=repr,
            )
            compacted.append(numbered(_UUID, "uuid", text))
            state["messages"] = list(written[1:])
        elif written:
            by_id = {m.id: m for m in written}
            state["messages"] = [by_id.get(m.id, m) for m in state["messages"]]
        if "unbounded" in update:
            state["unbounded"] = update["unbounded"]
    monkeypatch.undo()
    return summarizer.requests, compacted, taken, known


@pytest.mark.parametrize("seed", range(6))
def test_every_ledger_of_a_warm_middleware_is_the_one_read_from_every_record(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    requests, compacted, taken, known = drive(monkeypatch, seed, from_scratch=False)
    scratch_requests, scratch_compacted, _, _ = drive(monkeypatch, seed, from_scratch=True)
    assert len(compacted) >= 2
    assert any(taken)  # some ledger was taken from a copy of the fold
    assert None in known and False in known  # the first summarizes the image, a later not
    assert all(LEDGER_TITLE in update for update in compacted)  # each summary has its ledger
    assert requests == scratch_requests
    assert compacted == scratch_compacted


def _result(text: str, *, error: bool = False, call: str = "c1") -> Entry:
    block = {"type": "tool_result", "tool_use_id": call, "content": text, "is_error": error}
    return Entry({"type": "user", "message": {"role": "user", "content": [block]}})


def _call(call: str = "c1") -> Entry:
    block = {"type": "tool_use", "id": call, "name": "bash", "input": {"command": "make"}}
    return Entry({"type": "assistant", "message": {"role": "assistant", "content": [block]}})


def test_an_error_result_replaced_after_it_was_folded_stops_the_fold_there() -> None:
    records: list[Entry | None] = [_call(), _result("boom", error=True), _call("c2")]
    records += [_result("fine", call="c2"), None, _call("c3")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    assert fold.count == len(records)
    # The error's placeholder: the fold read the error, the records now hold another text.
    records[1] = _result("[cleared]", error=True)
    fold.replaced(1, _result("boom", error=True), records[1])
    head = records[:5]
    items = [entry for entry in head if entry is not None]
    assert fold.ledger_of(head, records)(items) == facts_ledger_for(items)
    assert fold.taken_from == 0  # the copy at 2 holds the error as it was: not taken


def test_an_inert_result_replaced_keeps_the_fold() -> None:
    records: list[Entry | None] = [_call(), _result("ok"), _call("c2"), _result("ok", call="c2")]
    records += [_call("c3"), _result("no", error=True, call="c3")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    records[1] = _result("[cleared]")
    fold.replaced(1, _result("ok"), records[1])
    head = records[:5]
    items = [entry for entry in head if entry is not None]
    assert fold.ledger_of(head, records)(items) == facts_ledger_for(items)
    assert fold.taken_from == 4


def test_a_list_other_than_the_one_folded_is_read_whole() -> None:
    records: list[Entry | None] = [_call(), _result("no", error=True), _call("c2"), _call("c3")]
    fold = PrefixFacts(every=2, keep=4)
    fold.advance(records, 100)
    other: list[Entry | None] = [_call(), _result("other", error=True), _call("c2"), _call("c3")]
    items = [entry for entry in other if entry is not None]
    assert fold.ledger_of(other, records)(items) == facts_ledger_for(items)
    assert fold.taken_from == 0
    assert "other" in facts_ledger_for(items)


def test_the_fold_catches_up_a_limited_number_of_records_a_call() -> None:
    records: list[Entry | None] = [_call(f"c{n}") for n in range(10)]
    fold = PrefixFacts(every=4, keep=2)
    fold.advance(records, 3)
    assert fold.count == 3
    fold.advance(records, 3)
    assert fold.count == 6
    fold.reset()
    assert fold.count == 0


def _image_result(call: str = "c1") -> Entry:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    block = {"type": "tool_result", "tool_use_id": call, "content": [image]}
    return Entry({"type": "user", "message": {"role": "user", "content": [block]}})


def test_the_fold_knows_whether_a_prefix_holds_media() -> None:
    records: list[Entry | None] = [_call(), _result("ok"), _call("c2"), _image_result("c2")]
    records.append(_call("c3"))
    fold = PrefixFacts()
    fold.advance(records, 2)
    assert fold.rewrites(records[:3], records) is None  # not folded that far
    fold.advance(records, 10)
    assert fold.rewrites(records[:3], records) is False
    assert fold.rewrites(records[:4], records) is None  # the image's record is in it
    # A head holding a record the list does not (this call's original of a placeholder).
    head = [*records[:1], _image_result(), records[2]]
    assert fold.rewrites(head, records) is None
    # A record replaced by one holding media after it was folded.
    fold.replaced(1, records[1], _image_result())
    assert fold.rewrites(records[:3], records) is None
    fold.reset()
    fold.advance(records, 10)
    assert fold.rewrites(records[:3], records) is False
