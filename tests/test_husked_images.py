"""Images a user sent, settled in the shared baseline history, give up their data and keep
what pricing reads; the truncate baseline moves them behind its note at their new place's
digest, and every figure stays that of a history that keeps the data."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from held import reachable
from replay_settings import recorded_call, replay_settings

from unbounded.caching.blocks import message_block_digest
from unbounded.caching.husks import HuskedBlock, husk_blocks
from unbounded.errors import SettledMessageError
from unbounded.evaluation.baselines import (
    Baseline,
    History,
    TruncateBaseline,
    feed_strategies,
    make_baselines,
    run_baselines,
)
from unbounded.evaluation.native_strategies import native_strategies
from unbounded.model.entries import Entry

DATA_SIZE = 50_000


def _image(n: int) -> dict[str, Any]:
    data = chr(65 + n % 26) * DATA_SIZE + str(n)  # a distinct image each turn
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _tokens(block: Any, digest: bytes) -> int:
    return 7 + digest[0] % 5


def _replay(calls: int, threshold: int) -> tuple[list[Baseline], list[dict[str, Any]], int]:
    """Every baseline and native strategy over `calls` calls, each user turn an image (first)
    and a line of text, then a tool call and its result; the figures per call, and how many
    calls truncate sent a husked image behind its note."""
    shared = History(1.0)
    config = replay_settings(threshold)
    strategies = [*make_baselines(config, shared), *native_strategies(config, shared)]
    feed_strategies(strategies, [Entry.user("start the work")])
    figures: list[dict[str, Any]] = []
    moved = 0
    truncate = next(s for s in strategies if isinstance(s, TruncateBaseline))
    for n in range(calls):
        figures.append(dict(run_baselines(strategies, recorded_call(n))))
        head = truncate._head
        if (
            head is not None
            and type(head[0]) is dict
            and type(head[0]["content"][0]) is HuskedBlock
        ):
            # Cut at a settled message whose image stood first: sent at another place.
            moved += head[0]["content"][0].kind == "image"
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}}
        size = 300 + 300 * (n % 4)  # so that truncate cuts at every kind of user message
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"line {n}\n" * size}
        entries = [
            Entry.assistant([{"type": "text", "text": f"step {n}"}, use], message_id=f"m{n}"),
            Entry.user([result]),
        ]
        if n % 2 == 1:
            entries += [
                Entry.assistant([{"type": "text", "text": f"look {n}"}], message_id=f"a{n}"),
                Entry.user([_image(n), {"type": "text", "text": f"this one {n}"}]),
            ]
        feed_strategies(strategies, entries)
    figures.append({s.name: s.run.to_dict() for s in strategies})
    return strategies, figures, moved


def _no_husk(self: History, upto: int, tokens_of: Any) -> None:
    return None


def _image_data_held(strategies: list[Baseline]) -> int:
    """How many image data strings are reachable from the strategies that send the shared
    history (not one of their own, made by a summary and replaced by the next)."""
    shared = strategies[0].history
    roots = [s for s in strategies if s.history is shared]
    assert len(roots) >= 3
    return sum(type(item) is str and len(item) > DATA_SIZE for item in reachable(roots))


@pytest.mark.parametrize("threshold", [20_000, 60_000])
def test_images_settled_give_up_their_data_and_change_no_figure(threshold: int) -> None:
    """Past the summaries, the settled images' data is held by no strategy (only those of
    the unsettled last messages stay), truncate sent settled images behind its note, and
    the figures equal those of a history that keeps every image whole."""
    strategies, husked, moved = _replay(120, threshold)
    assert strategies[0].history.husked > 100
    assert _image_data_held(strategies) <= 2
    assert moved > 10
    with mock.patch.object(History, "husk", _no_husk):
        kept_strategies, kept, _ = _replay(120, threshold)
    assert _image_data_held(kept_strategies) > 50
    assert husked == kept


def test_an_image_keeps_its_fields_and_the_digest_of_the_place_it_moves_to() -> None:
    image = {**_image(1), "cache_control": {"type": "ephemeral"}}
    text = {"type": "text", "text": "see"}
    message: dict[str, Any] = {"role": "user", "content": [image, text, _image(2)]}
    assert husk_blocks(message, 3, _tokens) == 2
    first, kept, second = message["content"]
    assert kept is text
    assert type(first) is HuskedBlock and type(second) is HuskedBlock
    assert first.fields() == {"type": "image", "cache_control": {"type": "ephemeral"}}
    assert first.marker == {"type": "ephemeral"}
    assert first.digest == message_block_digest(image, "user", first=True)
    moved = first.moved()
    assert (moved.first, moved.kind, moved.tokens, moved.role) == (
        False,
        "image",
        first.tokens,
        "user",
    )
    assert moved.digest == message_block_digest(image, "user", first=False)
    assert moved.fields() == first.fields()
    assert second.moved() is second
    assert second.digest == message_block_digest(_image(2), "user", first=False)


def test_a_first_block_that_never_moves_cannot_be_moved() -> None:
    result = {"type": "tool_result", "tool_use_id": "t", "content": "x"}
    message: dict[str, Any] = {"role": "user", "content": [result]}
    husk_blocks(message, 1, _tokens)
    with pytest.raises(SettledMessageError):
        message["content"][0].moved()


def test_a_document_gives_up_its_source_and_keeps_its_other_fields() -> None:
    documents: dict[str, Any] = {
        "role": "user",
        "content": [
            {"type": "text", "text": "read"},
            {"type": "document", "source": {"type": "text", "data": "d" * 99}, "title": "T"},
        ],
    }
    assert husk_blocks(documents, 1, _tokens) == 1
    document = documents["content"][1]
    assert document.fields() == {"type": "document", "title": "T"}
