"""What a compaction lets go of is freed a slice per later call (`DeferredRelease`), by the
cache-break detector and the tool ledger alike, never in the call that let it go."""

from __future__ import annotations

import weakref
from typing import Any

from unbounded.caching.break_detector import PromptCacheBreakDetector
from unbounded.compaction.ledger import ToolLedger
from unbounded.deferred_release import DeferredRelease


class Held:
    """An object whose freeing a weak reference can see."""


def test_each_step_frees_at_most_per_step_items_and_none_on_the_first_after_a_drop() -> None:
    release = DeferredRelease(per_step=3)
    items = [Held() for _ in range(7)]
    refs = [weakref.ref(item) for item in items]
    release.drop(items)
    del items
    assert release.pending == 7
    release.step()  # the dropping call's own step (if any): it does not pay
    assert release.pending == 7 and release.steps == 0
    release.step()
    assert release.pending == 4 and release.steps == 1
    assert sum(ref() is None for ref in refs) == 3
    release.step()
    release.step()
    assert release.pending == 0 and release.steps == 3
    assert all(ref() is None for ref in refs)
    release.step()  # nothing held: not counted
    assert release.steps == 3


def test_a_step_spans_containers_and_a_mapping_gives_its_values() -> None:
    release = DeferredRelease(per_step=4)
    first = [Held(), Held()]
    second = {"a": Held(), "b": Held(), "c": Held()}
    refs = [weakref.ref(v) for v in (*first, *second.values())]
    release.drop(first)
    release.drop(second)
    release.drop([])  # nothing to hold: no wait either
    del first, second
    release.step()
    release.step()
    assert release.pending == 1
    assert sum(ref() is None for ref in refs) == 4
    release.step()
    assert release.pending == 0 and all(ref() is None for ref in refs)


def _request(count: int) -> dict[str, Any]:
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"m{i}"}],
        }
        for i in range(count)
    ]
    return {"model": "claude-sonnet-4-5", "system": "s", "messages": messages}


def test_the_detector_hands_a_compactions_digests_to_later_calls() -> None:
    detector = PromptCacheBreakDetector(messages_immutable=True)
    detector._release.per_step = 10
    detector.record_prompt_state(_request(30), now=1.0)
    detector.notify_compaction()
    # The 30 digests and the 30 messages kept for the next call's reuse: none freed yet.
    assert detector._release.pending == 60 and detector._release.steps == 0
    detector.record_prompt_state(_request(2), now=2.0)  # the first call after it does not pay
    assert detector._release.pending == 60
    detector.record_prompt_state(_request(2), now=3.0)
    assert detector._release.pending == 50 and detector._release.steps == 1


def _messages(count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(count):
        tool_id = f"toolu_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}],
            }
        )
    return messages


def test_the_ledger_hands_its_records_to_later_observes() -> None:
    ledger = ToolLedger()
    ledger._release.per_step = 5
    ledger.observe(_messages(12))
    ledger.reset()
    assert ledger._release.pending == 12 and ledger._release.steps == 0
    ledger.observe(_messages(1))
    assert ledger._release.pending == 12
    ledger.observe(_messages(1))
    assert ledger._release.pending == 7 and ledger._release.steps == 1


def test_a_compaction_hands_microcompactions_last_view_and_pairs_to_later_calls() -> None:
    from unbounded.compaction.micro import MicrocompactState

    state = MicrocompactState()
    state._release.per_step = 7
    messages = _messages(5)  # 11 messages
    state.observe(messages)
    state.cleared.update({"toolu_0": 3, "toolu_1": 4})
    view = state.apply_clears(messages)
    assert view[2]["content"][0]["content"] != "ok"  # cleared
    assert len(state.cleared_pairs()) == 2
    state.reset_after_compaction()
    # The view's source and view (11 each) and the 2 pairs: none freed in this call.
    assert state._release.pending == 24 and state._applied is None
    assert state.cleared_pairs() == []
    state.observe(messages[:1])  # the first call after it does not pay
    assert state._release.pending == 24
    state.observe(messages[:1])
    assert state._release.pending == 17 and state._release.steps == 1


def test_drops_every_call_larger_than_a_step_wait_at_most_a_bounded_backlog() -> None:
    # A caller that starts over on every call drops more than `per_step` each time: each step
    # frees at least a sixteenth of what waits, so the backlog stops growing.
    release = DeferredRelease(per_step=10)
    waited = []
    for _ in range(400):
        release.drop([Held() for _ in range(100)])
        release.step()
        waited.append(release.pending)
    assert max(waited) <= 16 * 100 + 2 * 100
    assert max(waited[200:]) <= max(waited[:200])  # it levelled off, not kept growing


def test_what_was_dropped_first_is_freed_first() -> None:
    release = DeferredRelease(per_step=2)
    first, second = [Held(), Held(), Held()], [Held(), Held()]
    refs = [weakref.ref(item) for item in (*first, *second)]
    release.drop(first)
    release.step()  # `first` waits one step
    release.drop(second)
    release.step()  # two of `first`; `second` waits
    del first, second
    assert [ref() is None for ref in refs] == [False, True, True, False, False]
    release.step()  # the rest of `first` before any of `second`
    assert refs[0]() is None and sum(ref() is None for ref in refs[3:]) == 1
