"""Message blocks whose text no one reads again, kept as what pricing needs of them.

A long replay holds the recorded history for the strategies that send it; most of its bytes
are tool results and the assistant's text and tool calls. Once every reader of a message is
past it (see `History.husk` in evaluation/baselines.py for who reads what), its blocks can
give their text up: a block becomes a `HuskedBlock`, one bytes object carrying the block's
digest, token count and type and its other fields, which `RequestBlocks` takes instead of
serialising and counting the block. A husked block is not a dict: readers of settled
messages go through `block_type` and `block_fields`.

- A tool_result keeps its other fields (tool_use_id, is_error), from which the clearing
  builds its cleared copy.
- An assistant message's blocks (text, thinking, tool_use, ...) keep their type (the
  simulator leaves out earlier thinking by type), a tool_use its id, and a block's
  cache_control marker when it has one (the simulator places breakpoints by it whenever it
  computes a request again: a truncation's cut moving, a model switch); nothing else reads a
  settled assistant message.
- A user message's images and documents keep their type and fields but their source (the
  data), and also the digest they have past a message's first place when they stood first:
  the truncate baseline moves a user message's blocks other than tool results behind its
  note (`HuskedBlock.moved`). Its text blocks stay whole (small, and read as they are).

The message dict is changed in place (a new content list, so an entry's own content is never
touched): every list and simulator that holds the message keeps the same object, which is
what lets them reuse their figures for it.

A message all of whose blocks give their text up (an assistant message, a user message of
tool results only) is settled whole instead (`husk_message`): one `HuskedMessage`, a bytes
object holding its role, its token estimate and each block's type, digest, tokens and kept
fields, with no dict, list or object per block. It takes the message's place in every list
that holds it (`History.husk` tells them); reading its role works, reading its content raises
`SettledMessageError`, so a reader the settling rules missed fails instead of reading wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, NamedTuple, TypeGuard

import orjson

from unbounded.caching.blocks import FlatBlock, message_block_digest
from unbounded.caching.packed_digests import DIGEST_SIZE
from unbounded.errors import SettledMessageError

BlockTokens = Callable[[FlatBlock, bytes], int]
"""A block and its digest -> its tokens (`CacheSimulator.block_tokens`)."""

# digest | tokens | flags | role length | role | type length | type | [digest elsewhere] |
# other fields (JSON)
_TOKENS = struct.Struct("<q")
_FLAGS_AT = DIGEST_SIZE + _TOKENS.size
_FIRST = 1
"""Flag bit: the block was its message's first."""
_MARKED = 2
"""Flag bit: the fields kept include a cache_control marker."""
_ELSEWHERE = 4
"""Flag bit: the digest the block has past its message's first place follows the type."""
_MOVABLE = ("image", "document")
"""A user message's blocks husked that a strategy may move (`HuskedBlock.moved`)."""


class HuskedBlock(bytes):
    """A message block once its text is let go: its digest and tokens where it stood, its
    type and its fields other than the text, packed in one bytes object (about 140 bytes a
    tool result instead of about 340 as a dict holding a husk and its own id string)."""

    __slots__ = ()

    def __new__(
        cls,
        digest: bytes,
        tokens: int,
        role: str,
        first: bool,
        kind: str,
        fields: Mapping[str, Any] | None = None,
        elsewhere: bytes | None = None,
    ) -> HuskedBlock:
        """The husk of a block of type `kind` with this digest and token count, in a message
        of `role`, its message's first block or not, keeping `fields` (JSON values) and, for
        a first block that may move, `elsewhere`: its digest past the first place."""
        if len(digest) != DIGEST_SIZE or (elsewhere is not None and len(elsewhere) != DIGEST_SIZE):
            raise ValueError(f"a digest is {DIGEST_SIZE} bytes")
        role_bytes, kind_bytes = role.encode(), kind.encode()
        if len(role_bytes) > 255 or len(kind_bytes) > 255:
            raise ValueError("a husked block's role and type are at most 255 bytes")
        return super().__new__(
            cls,
            b"".join(
                (
                    digest,
                    _TOKENS.pack(tokens),
                    bytes(
                        (
                            (_FIRST if first else 0)
                            | (_MARKED if fields and "cache_control" in fields else 0)
                            | (_ELSEWHERE if elsewhere is not None else 0),
                            len(role_bytes),
                        )
                    ),
                    role_bytes,
                    bytes((len(kind_bytes),)),
                    kind_bytes,
                    elsewhere or b"",
                    orjson.dumps(dict(fields)) if fields else b"",
                )
            ),
        )

    @property
    def digest(self) -> bytes:
        """`message_block_digest` of the block as it was, where it was."""
        return self[:DIGEST_SIZE]

    @property
    def tokens(self) -> int:
        """The block's tokens as the simulator counted them."""
        return int(_TOKENS.unpack_from(self, DIGEST_SIZE)[0])

    @property
    def first(self) -> bool:
        """Whether the block is its message's first (the digest depends on it)."""
        return bool(self[_FLAGS_AT] & _FIRST)

    @property
    def marker(self) -> Any:
        """The block's cache_control, when it kept one (else None)."""
        return self.fields().get("cache_control") if self[_FLAGS_AT] & _MARKED else None

    @property
    def role(self) -> str:
        """The role of the message the block is in (the digest depends on it)."""
        return self[_FLAGS_AT + 2 : _FLAGS_AT + 2 + self[_FLAGS_AT + 1]].decode()

    @property
    def kind(self) -> str:
        """The block's type."""
        at = _FLAGS_AT + 2 + self[_FLAGS_AT + 1]
        return self[at + 1 : at + 1 + self[at]].decode()

    def fields(self) -> dict[str, Any]:
        """The block's type and the fields it kept (a new dict)."""
        rest = self._after_kind()
        if self[_FLAGS_AT] & _ELSEWHERE:
            rest += DIGEST_SIZE
        kept = orjson.loads(self[rest:]) if rest < len(self) else {}
        return {"type": self.kind, **kept}

    def moved(self) -> HuskedBlock:
        """The husk of the same block past its message's first place (the truncate
        baseline's note goes first): itself when it was not first. Raises
        `SettledMessageError` for a first block husked without that digest (one that never
        moves: a tool result, a reply's block)."""
        if not self.first:
            return self
        if not self[_FLAGS_AT] & _ELSEWHERE:
            raise SettledMessageError(f"a settled {self.kind} block cannot move from its place")
        at = self._after_kind()
        fields = self.fields()
        del fields["type"]
        return HuskedBlock(
            self[at : at + DIGEST_SIZE], self.tokens, self.role, False, self.kind, fields
        )

    def _after_kind(self) -> int:
        """Where what follows the type starts."""
        at = _FLAGS_AT + 2 + self[_FLAGS_AT + 1]
        return at + 1 + self[at]

    def __repr__(self) -> str:
        return (
            f"HuskedBlock(digest={self.digest.hex()[:12]}..., tokens={self.tokens}, "
            f"role={self.role!r}, first={self.first}, fields={self.fields()!r})"
        )

    __str__ = __repr__


def block_type(block: Any) -> Any:
    """The type of a block of a message's content, husked or not (None for what has none)."""
    if type(block) is HuskedBlock:
        return block.kind
    return block.get("type") if isinstance(block, Mapping) else None


def block_fields(block: Mapping[str, Any] | HuskedBlock) -> Mapping[str, Any]:
    """A block's fields: the block itself, or what a husked one kept (its text gone)."""
    return block.fields() if type(block) is HuskedBlock else block  # type: ignore[return-value]


def husk_blocks(message: MutableMapping[str, Any], index: int, tokens_of: BlockTokens) -> int:
    """Replace the message's tool results, images and documents (every block of an assistant
    message) by husks (module docstring), in place; the number of blocks husked (0 when there
    was none left to husk). `index` is the message's position, for the counter's FlatBlock."""
    content = message.get("content")
    role = str(message.get("role", ""))
    assistant = role == "assistant"
    if not isinstance(content, list) or not _short_name(role):
        return 0
    if not any(_husks_alone(b, assistant) for b in content):
        return 0
    blocks: list[Any] = []
    husked = 0
    for position, block in enumerate(content):
        if _husks_alone(block, assistant):
            first = position == 0
            digest = message_block_digest(block, role, first=first)
            tokens = tokens_of(FlatBlock("messages", index, position, block, role), digest)
            kind = str(block.get("type"))
            elsewhere = None
            if assistant:
                kept = _reply_kept(block)
                if kind == "tool_use":
                    kept = {"id": block.get("id"), **kept}
            elif kind == "tool_result":
                kept = {k: v for k, v in block.items() if k not in ("type", "content")}
            else:  # an image or document: its source is the data
                kept = {k: v for k, v in block.items() if k not in ("type", "source")}
                if first:
                    elsewhere = message_block_digest(block, role, first=False)
            block = HuskedBlock(digest, tokens, role, first, kind, kept, elsewhere)
            husked += 1
        blocks.append(block)
    message["content"] = list(blocks)  # sized to fit: appends left room to grow
    return husked


# HuskedMessage: estimate | role, then per block:
# digest | tokens | type | kept fields' length | kept fields (JSON)
# A role or type is one byte when it is a common one (its index in `_NAMES`), else 255, its
# length and its bytes.
_ESTIMATE = struct.Struct("<i")
_BLOCK_TOKENS = struct.Struct("<i")
_FIELDS_LENGTH = struct.Struct("<H")
_NAMES = (
    "user",
    "assistant",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "server_tool_use",
)
_CODES = {name: bytes((code,)) for code, name in enumerate(_NAMES)}
_SPELLED = 255
_cut = bytes.__getitem__  # HuskedMessage's own [] reads a message's keys


def _packed_name(name: str) -> bytes:
    """A role or type as one byte (common ones) or spelled out."""
    code = _CODES.get(name)
    if code is not None:
        return code
    spelled = name.encode()
    if len(spelled) > 255:
        raise ValueError("a husked message's role and types are at most 255 bytes")
    return bytes((_SPELLED, len(spelled))) + spelled


def _read_name(data: bytes, at: int) -> tuple[str, int]:
    """The role or type packed at `at`, and where what follows it starts."""
    code = _cut(data, at)
    if code != _SPELLED:
        return _NAMES[code], at + 1
    size = _cut(data, at + 1)
    return _cut(data, slice(at + 2, at + 2 + size)).decode(), at + 2 + size


class SettledBlock(NamedTuple):
    """One block of a `HuskedMessage`: what pricing and clearing read of it."""

    kind: str
    digest: bytes
    """`message_block_digest` of the block as it was, where it was."""
    tokens: int
    """The block's tokens as the simulator counted them."""
    kept: bytes
    """The fields it kept other than its type, as JSON (empty when none)."""

    def fields(self) -> dict[str, Any]:
        """The fields the block kept, its type left out (a new dict)."""
        return dict(orjson.loads(self.kept)) if self.kept else {}

    @property
    def marker(self) -> Any:
        """The block's cache_control, when it kept one (else None)."""
        return self.fields().get("cache_control") if b'"cache_control"' in self.kept else None


class HuskedMessage(bytes):
    """A settled message packed whole (module docstring): its role reads as a dict's, its
    blocks' figures through `blocks`, and its content not at all (`SettledMessageError`).
    About 140 bytes for a message of one tool result, instead of a dict, a list and a husk
    per block (about 400)."""

    __slots__ = ()

    def __new__(
        cls, role: str, estimate: int, blocks: Iterable[tuple[str, bytes, int, bytes]]
    ) -> HuskedMessage:
        """The husk of a message of `role` whose token estimate is `estimate` (-1: none),
        with its blocks' (type, digest, tokens, kept fields as JSON) in order."""
        parts = [_ESTIMATE.pack(estimate), _packed_name(role)]
        for kind, digest, tokens, kept in blocks:
            if len(digest) != DIGEST_SIZE:
                raise ValueError(f"a digest is {DIGEST_SIZE} bytes, not {len(digest)}")
            parts += (
                digest,
                _BLOCK_TOKENS.pack(tokens),
                _packed_name(kind),
                _FIELDS_LENGTH.pack(len(kept)),
                kept,
            )
        return super().__new__(cls, b"".join(parts))

    @property
    def role(self) -> str:
        """The message's role."""
        return _read_name(self, _ESTIMATE.size)[0]

    @property
    def estimate(self) -> int:
        """The message's token estimate as its history counted it (-1 when not counted)."""
        return int(_ESTIMATE.unpack_from(self)[0])

    def blocks(self) -> list[SettledBlock]:
        """Each block's type, digest, tokens and kept fields, in order."""
        at = _read_name(self, _ESTIMATE.size)[1]
        found: list[SettledBlock] = []
        while at < len(self):
            digest = _cut(self, slice(at, at + DIGEST_SIZE))
            (tokens,) = _BLOCK_TOKENS.unpack_from(self, at + DIGEST_SIZE)
            kind, at = _read_name(self, at + DIGEST_SIZE + _BLOCK_TOKENS.size)
            (length,) = _FIELDS_LENGTH.unpack_from(self, at)
            at += _FIELDS_LENGTH.size
            found.append(SettledBlock(kind, digest, tokens, _cut(self, slice(at, at + length))))
            at += length
        return found

    def __getitem__(self, key: Any) -> Any:
        """`message["role"]` as a dict gives it; any other key is content let go."""
        if key == "role":
            return self.role
        if isinstance(key, str):
            raise SettledMessageError(
                f"the {key!r} of a settled {self.role} message was let go (caching/husks.py)"
            )
        return _cut(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """`message.get("role")` as a dict gives it; any other key raises as `[]` does."""
        return self[key]

    def __repr__(self) -> str:
        return f"HuskedMessage(role={self.role!r}, blocks={self.blocks()!r})"

    __str__ = __repr__


def is_husked_message(message: object) -> TypeGuard[HuskedMessage]:
    """Whether a message was settled whole (a `HuskedMessage`, not a dict)."""
    return type(message) is HuskedMessage


def husk_message(
    message: Mapping[str, Any], index: int, tokens_of: BlockTokens, estimate: int
) -> HuskedMessage | None:
    """The message packed whole (`HuskedMessage`), its blocks keeping what `husk_blocks`
    keeps of them; None when some block of it must stay whole (a user message's block
    other than a tool result) or it has no block list. `index` is its position, for the
    counter's FlatBlock; `estimate` its token estimate."""
    content = message.get("content")
    role = str(message.get("role", ""))
    assistant = role == "assistant"
    if not isinstance(content, list) or not content or not _short_name(role):
        return None
    if not all(_huskable(block, assistant) for block in content):
        return None
    blocks: list[tuple[str, bytes, int, bytes]] = []
    for position, block in enumerate(content):
        digest = message_block_digest(block, role, first=position == 0)
        tokens = tokens_of(FlatBlock("messages", index, position, block, role), digest)
        kind = str(block.get("type"))
        # A reply keeps its types and markers (read by the simulator; nothing reads a
        # settled reply's ids: its content is gone), a tool result what the clearing reads.
        kept = (
            _reply_kept(block) if assistant else {k: v for k, v in block.items() if k != "content"}
        )
        kept.pop("type", None)
        fields = orjson.dumps(kept) if kept else b""
        if len(fields) > 0xFFFF:
            return None  # fields this large stay in the dict
        blocks.append((kind, digest, tokens, fields))
    return HuskedMessage(role, estimate, blocks)


def _reply_kept(block: Mapping[str, Any]) -> dict[str, Any]:
    """What a settled reply block keeps besides its type: its cache_control marker, if any."""
    marker = block.get("cache_control")
    return {} if marker is None else {"cache_control": marker}


def _huskable(block: Any, assistant: bool) -> bool:
    """Whether a block gives its text up in a message settled whole (its type packs in at
    most 255 bytes: a longer one, which no API has, stays whole rather than fail the replay)."""
    return (
        isinstance(block, Mapping)
        and (assistant or block.get("type") == "tool_result")
        and _short_name(block.get("type"))
    )


def _short_name(name: Any) -> bool:
    """A role or type that packs (at most 255 bytes)."""
    return len(str(name).encode()) <= 255


def _husks_alone(block: Any, assistant: bool) -> bool:
    """Whether a block gives its data up husked by itself (`husk_blocks`)."""
    return _huskable(block, assistant) or (
        not assistant and isinstance(block, Mapping) and block.get("type") in _MOVABLE
    )
