"""Modules that moved keep their old import paths: the old module hands out the same objects."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        (
            "unbounded.models",
            "unbounded.catalog",
            ["DEFAULT_MODEL", "MODELS_FILE_ENV", "ModelInfo", "ModelTable", "load_model_table",
             "read_model_file", "ProviderName"],
        ),
        (
            "unbounded.demo",
            "unbounded.cli.demo",
            ["DEMO_SOURCE", "DEMO_MODEL", "demo_records", "demo_transcript", "demo_jsonl",
             "write_demo_session"],
        ),
        (
            "unbounded.integrations.agent_loop",
            "unbounded.integrations._schema",
            ["ArgumentConverter", "json_schema_for", "parse_docstring", "tool_schema"],
        ),
        ("unbounded.integrations._support", "unbounded.blocking", ["BlockingRunner", "run_blocking"]),
    ],
)
def test_the_old_module_hands_out_the_moved_objects(old: str, new: str, names: list[str]) -> None:
    before, after = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(before, name) is getattr(after, name), name
    assert set(names) <= set(before.__all__)  # explicit re-exports (typed code sees them)


def test_the_catalogue_literal_keeps_its_old_name() -> None:
    from unbounded import catalog, models

    assert models.Provider is catalog.ProviderName
    assert not hasattr(catalog, "Provider")  # no clash with the Provider protocol
    assert importlib.import_module("unbounded").ModelInfo is catalog.ModelInfo
