"""The OpenAI Responses API wire format (`responses.create`).

The conversion of input items to and from the project's messages lives in
`unbounded.wire.openai_items`; its names are re-exported here.
"""

from __future__ import annotations

from unbounded.wire.openai_items import (
    OPAQUE_ITEM,
    RESPONSES_FORMAT,
    is_opaque_block,
    items_to_messages,
    messages_to_items,
    opaque_block,
    plain_item,
)

__all__ = [
    "OPAQUE_ITEM",
    "RESPONSES_FORMAT",
    "is_opaque_block",
    "items_to_messages",
    "messages_to_items",
    "opaque_block",
    "plain_item",
]
