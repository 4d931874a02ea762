"""A built tiktoken encoding lets its Python copy of the ranks go (`tokens/exact.py`): the
Rust encoder holds its own; the Python dict (about 27 MB for o200k_base) was kept by
tiktoken only for pickling, and a replay held it for its whole run."""

from __future__ import annotations

import copy
import pickle
from unittest import mock

import tiktoken
from tiktoken_ext import openai_public

from unbounded.tokens import TiktokenCounter, get_encoding
from unbounded.tokens.exact import _verified_ranks

SAMPLE = "def parse(tree):\n    return [n for n in tree if n.kind == 'name']  # ünïcode, 漢字 🙂"


def test_a_built_encoding_holds_no_python_ranks() -> None:
    for name in ("o200k_base", "cl100k_base"):
        encoding = get_encoding(name)
        assert len(encoding._mergeable_ranks) == 0, name
        assert encoding.max_token_value > 100_000  # taken from the ranks before they went


def test_it_encodes_as_an_encoding_that_keeps_its_ranks() -> None:
    def bundled(_path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return _verified_ranks("cl100k_base", expected_hash)

    with mock.patch.object(openai_public, "load_tiktoken_bpe", bundled):
        spec = openai_public.ENCODING_CONSTRUCTORS["cl100k_base"]()
    whole = tiktoken.Encoding(**spec)
    released = get_encoding("cl100k_base")
    assert released.encode_ordinary(SAMPLE) == whole.encode_ordinary(SAMPLE)
    assert released.encode(SAMPLE + "<|endoftext|>", allowed_special="all") == whole.encode(
        SAMPLE + "<|endoftext|>", allowed_special="all"
    )
    assert released.decode(whole.encode_ordinary(SAMPLE)) == SAMPLE
    assert TiktokenCounter("cl100k_base").count_text(SAMPLE) == len(whole.encode_ordinary(SAMPLE))


def test_a_pickled_or_copied_encoding_is_the_one_built_by_name() -> None:
    encoding = get_encoding("o200k_base")
    assert pickle.loads(pickle.dumps(encoding)) is encoding
    assert copy.copy(encoding) is encoding
    assert pickle.loads(pickle.dumps(TiktokenCounter())).count_text(SAMPLE) == (
        TiktokenCounter().count_text(SAMPLE)
    )
