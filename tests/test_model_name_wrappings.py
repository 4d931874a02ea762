"""A model name wrapped by a gateway or a cloud (a `provider/` or `provider:` prefix, a Bedrock
id, a Vertex `@date`) is the table's row of the bare name, or planned as its provider's."""

from __future__ import annotations

import pytest

from unbounded.catalog import bare_model_name, load_model_table, provider_of_name
from unbounded.configuration import model_for_window

TABLE = load_model_table()


@pytest.mark.parametrize(
    ("name", "bare"),
    [
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("global.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1-20250805"),
        ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307"),
        ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("anthropic:claude-sonnet-9-9", "claude-sonnet-9-9"),
        ("anthropic/claude-sonnet-9-9", "claude-sonnet-9-9"),
        ("openai:gpt-5.4", "gpt-5.4"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5@20250929"),
        # A ":0" is a Bedrock version, not a provider; another vendor's Bedrock id is kept.
        ("claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307-v1:0"),
        ("mistral.mistral-large-2402-v1:0", "mistral.mistral-large-2402-v1:0"),
    ],
)
def test_bare_model_name(name: str, bare: str) -> None:
    assert bare_model_name(name) == bare


@pytest.mark.parametrize(
    "name",
    [
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5@20250929",
        "anthropic:claude-sonnet-4-5",
        "anthropic/claude-sonnet-4-5",
    ],
)
def test_a_wrapped_known_claude_name_is_the_tables_row(name: str) -> None:
    found = TABLE.find(name)
    assert found is not None and found.name == "claude-sonnet-4-5"
    assert model_for_window(TABLE, name, 200_000).input_per_mtok == found.input_per_mtok


@pytest.mark.parametrize(
    "name",
    [
        "anthropic:claude-sonnet-9-9",
        "anthropic.claude-sonnet-9-9-20300101-v1:0",
        "us.anthropic.claude-sonnet-9-9-20300101-v1:0",
        "claude-sonnet-9-9@20300101",
    ],
)
def test_a_wrapped_unknown_claude_name_is_planned_as_claude(name: str) -> None:
    assert TABLE.find(name) is None
    assert provider_of_name(name) == "anthropic"
    info = model_for_window(TABLE, name, 200_000)
    bare = model_for_window(TABLE, "claude-sonnet-9-9", 200_000)
    assert (info.provider, info.input_per_mtok, info.max_output) == (
        "anthropic",
        bare.input_per_mtok,
        bare.max_output,
    )


@pytest.mark.parametrize(
    ("name", "provider"),
    [("openai:gpt-9", "openai"), ("azure/o3-mini", "openai"), ("ollama:llama3", None)],
)
def test_the_provider_is_read_through_a_prefix(name: str, provider: str | None) -> None:
    assert provider_of_name(name) == provider
