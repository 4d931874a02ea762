"""`get_encoding` builds each encoding once per process, whichever thread asks first, and
swaps tiktoken's rank loader only for its own build (`tokens/exact.py`)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest
from tiktoken_ext import openai_public

from unbounded.tokens import exact


@pytest.fixture
def no_built_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process in which no encoding was built yet."""
    monkeypatch.setattr(exact, "_ENCODINGS", {})


def test_threads_asking_at_once_share_one_build(
    no_built_encodings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[str] = []
    verified = exact._verified_ranks
    release = threading.Event()

    def counted(name: str, expected_hash: str | None) -> dict[bytes, int]:
        builds.append(name)
        release.wait(10)  # every other thread asks while this build is still running
        return verified(name, expected_hash)

    monkeypatch.setattr(exact, "_verified_ranks", counted)
    asked = threading.Barrier(5)
    results: list[Any] = []

    def ask() -> None:
        asked.wait(10)
        results.append(exact.get_encoding("cl100k_base"))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    asked.wait(10)
    while not builds:  # the first build has begun: the other three are asking meanwhile
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)
    release.set()
    for thread in threads:
        thread.join(30)
    assert builds == ["cl100k_base"]
    assert len(results) == 4 and all(found is results[0] for found in results)


def test_tiktokens_own_loader_is_untouched_while_building(
    no_built_encodings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    verified = exact._verified_ranks

    def watching(name: str, expected_hash: str | None) -> dict[bytes, int]:
        # what another thread calling tiktoken.get_encoding would use at this moment
        seen.append(openai_public.load_tiktoken_bpe)
        return verified(name, expected_hash)

    original = openai_public.load_tiktoken_bpe
    monkeypatch.setattr(exact, "_verified_ranks", watching)
    encoding = exact.get_encoding("cl100k_base")
    assert seen == [original]
    assert encoding.encode_ordinary("hello world") == [15339, 1917]


def test_an_unknown_encoding_is_refused(no_built_encodings: None) -> None:
    with pytest.raises(exact.ConfigError, match="unknown encoding 'p50k_base'"):
        exact.get_encoding("p50k_base")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a forked child is POSIX's")
def test_a_child_forked_while_the_lock_is_held_still_builds() -> None:
    # The parent's builder thread does not exist in the child: the lock it held must not.
    with exact._ENCODING_LOCK:
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            signal.alarm(60)  # a hang ends the child with SIGALRM instead of the test
            exact._ENCODINGS.clear()
            built = exact.get_encoding("cl100k_base").encode_ordinary("hello world")
            os._exit(0 if built == [15339, 1917] else 1)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
