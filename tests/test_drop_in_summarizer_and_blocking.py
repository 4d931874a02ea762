"""What a drop-in keeps of the caller's choices (issue 28's leftovers): the summarizer given in
`options=SessionOptions(...)` writes the summaries of the session the wrapper opens, and a
session driven by a blocking entry point refuses `Policy.background_summary` when
`reconfigure` switches it on later, as the constructors refuse it. The SDKs are the real
ones, talking to the local server (tests/apiserver.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from apiserver import ApiServer, api_server_fixture, message  # noqa: F401  (registers the api_server fixture)
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.integrations import wrap
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session_options import SessionOptions

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

MODEL = "claude-sonnet-4-6"


def _client(api_server: ApiServer, sdk: str, *, sync: bool) -> Any:
    if sdk == "anthropic":
        return api_server.anthropic_client(sync=sync)
    return api_server.openai_client(sync=sync)


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
@pytest.mark.parametrize("in_folder", [False, True])
def test_the_summarizer_given_in_options_writes_the_summaries(api_server: ApiServer, tmp_path: Path, sdk: str, in_folder: bool) -> None:
    chosen = ExtractiveSummarizer()
    folder = tmp_path / "s" if in_folder else None
    with wrap(_client(api_server, sdk, sync=True), session_folder=folder, model=MODEL, options=SessionOptions(summarizer=chosen)) as client:
        assert client.session.deps.summarizer is chosen
    with wrap(_client(api_server, sdk, sync=True), model=MODEL) as client:
        assert client.session.deps.summarizer is not chosen  # without it: the client's own


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_summarizer_given_twice_is_refused_at_wrap(api_server: ApiServer, tmp_path: Path, sdk: str) -> None:
    options = SessionOptions(summarizer=ExtractiveSummarizer())
    with pytest.raises(ConfigError, match=r"summarizer twice.*give it in one place"):
        wrap(_client(api_server, sdk, sync=True), session_folder=tmp_path / "s", model=MODEL, summarizer="extractive", options=options)
    assert not (tmp_path / "s").exists()  # refused before the folder was made


def test_a_model_table_given_in_options_names_the_model_of_an_openai_drop_in(api_server: ApiServer) -> None:
    table = load_model_table()
    own = dataclasses.replace(table.get("gpt-5.4"), name="acme-chat-1", context_window=64_000)
    with wrap(api_server.openai_client(sync=True), model="acme-chat-1", options=SessionOptions(model_table=table.with_model(own))) as client:
        assert client.session.model_info.context_window == 64_000
    with pytest.raises(ConfigError, match="'acme-chat-1' is not in the model table"):
        wrap(api_server.openai_client(sync=True), model="acme-chat-1")
