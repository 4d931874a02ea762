"""The model catalogue: per-model facts (window, output limit, prices, cache rules) loaded from
a TOML table.

The packaged table is `unbounded/data/models.toml`. Users extend it with their own file in the
same shape: `load_model_table(extra_files=[...])`, or the UNBOUNDED_MODELS_FILE environment
variable (several files separated by the OS path separator). Later rows replace earlier ones.

A recorded model the table does not list is planned and priced as its provider's model:
`resolve_recorded_model` assumes the figures of `ASSUMED_MODELS[provider]` under the recorded
name, and says so. The provider comes from the transcript's format when it is certain (a
Codex rollout calls OpenAI, a Claude Code session Anthropic), else from the model's name; a
model of no provider the name tells is assumed to be the default Claude model, also said.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from unbounded.errors import ConfigError
from unbounded.model.entries import UNNAMED_MODEL

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ProviderName = Literal["anthropic", "openai", "other"]
"""Which API family a model belongs to (not to be confused with the `Provider` protocol)."""
MODELS_FILE_ENV = "UNBOUNDED_MODELS_FILE"
MIN_CONTEXT_WINDOW = 8_192
"""The smallest window unbounded works in: a structured summary plus one more turn."""


def window_too_small(context_window: int) -> str:
    """The one refusal of a window below `MIN_CONTEXT_WINDOW` (zero and negative ones too)."""
    return (
        f"a {context_window:,}-token context window is too small: unbounded needs at least "
        f"{MIN_CONTEXT_WINDOW:,} tokens (a summary and one more turn); use a model or "
        "--window (context_window in the library) with a larger window"
    )


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What unbounded needs to know about one model."""

    name: str
    provider: ProviderName
    context_window: int
    max_output: int
    input_per_mtok: float
    output_per_mtok: float
    cache_write_5m_multiplier: float = 1.25
    cache_write_1h_multiplier: float | None = 2.0
    cache_read_multiplier: float = 0.1
    min_cacheable_tokens: int = 1_024
    encoding: str | None = "o200k_base"
    long_context_window: int | None = None
    keeps_previous_thinking: bool = True
    """False for models whose API drops the thinking blocks of earlier turns once a new user
    turn starts (Claude models before Opus 4.5): the cached prefix then ends before them."""
    native_compaction: bool = False
    """The provider compacts this model's context on its own server when asked (Anthropic's
    `compact_20260112`; the provider must declare it too, `ProviderProfile`)."""
    aliases: tuple[str, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        if self.context_window <= 0:
            raise ConfigError(f"model {self.name}: context_window must be > 0")
        if self.max_output <= 0:
            raise ConfigError(f"model {self.name}: max_output must be > 0")
        for label in ("input_per_mtok", "output_per_mtok", "cache_read_multiplier"):
            if getattr(self, label) < 0:
                raise ConfigError(f"model {self.name}: {label} must be >= 0")

    def with_window(self, context_window: int) -> ModelInfo:
        """The same model planned for another context window (e.g. to force compactions)."""
        if context_window < MIN_CONTEXT_WINDOW:
            raise ConfigError(window_too_small(context_window))
        return replace(self, context_window=context_window)


_FIELDS = {
    "provider": str,
    "context_window": int,
    "max_output": int,
    "input_per_mtok": (int, float),
    "output_per_mtok": (int, float),
    "cache_write_5m_multiplier": (int, float),
    "cache_write_1h_multiplier": (int, float),
    "cache_read_multiplier": (int, float),
    "min_cacheable_tokens": int,
    "encoding": str,
    "long_context_window": int,
    "keeps_previous_thinking": bool,
    "native_compaction": bool,
    "aliases": list,
    "source": str,
}
_REQUIRED = ("context_window", "max_output", "input_per_mtok", "output_per_mtok")


def _model_from_row(name: str, row: Mapping[str, Any], origin: str) -> ModelInfo:
    unknown = set(row) - set(_FIELDS)
    if unknown:
        raise ConfigError(f"{origin}: model {name!r} has unknown fields {sorted(unknown)}")
    for key in _REQUIRED:
        if key not in row:
            raise ConfigError(f"{origin}: model {name!r} is missing {key!r}")
    for key, value in row.items():
        expected = _FIELDS[key]
        if expected is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{origin}: model {name!r} field {key!r} must be true or false")
            continue
        if not isinstance(value, expected) or isinstance(value, bool):  # type: ignore[arg-type]
            raise ConfigError(f"{origin}: model {name!r} field {key!r} has the wrong type")
    provider = row.get("provider", "other")
    if provider not in ("anthropic", "openai", "other"):
        raise ConfigError(f"{origin}: model {name!r}: provider must be anthropic, openai or other")
    values: dict[str, Any] = dict(row)
    values["aliases"] = tuple(str(a) for a in row.get("aliases", []))
    if provider == "openai" and "cache_write_1h_multiplier" not in row:
        values["cache_write_1h_multiplier"] = None
    return ModelInfo(name=name, **values)


@dataclass(slots=True)
class ModelTable:
    """Model facts by name, with alias and prefix lookup."""

    models: dict[str, ModelInfo] = field(default_factory=dict)

    def add(self, info: ModelInfo) -> None:
        """Add or replace a model."""
        self.models[info.name] = info

    def _index(self) -> dict[str, ModelInfo]:
        index: dict[str, ModelInfo] = {}
        for info in self.models.values():
            index[info.name] = info
            for alias in info.aliases:
                index[alias] = info
        return index

    def find(self, name: str) -> ModelInfo | None:
        """The model by exact name or alias, else by the longest known name it starts with (a
        provider's prefix and a Bedrock id's wrapping are passed over: `bare_model_name`)."""
        index = self._index()
        key = name.strip()
        if key in index:
            return index[key]
        base = key.split("[", 1)[0]  # "claude-opus-4-6[1m]" style suffixes
        if base in index:
            return index[base]
        bare = bare_model_name(base)
        if bare != base:
            return self.find(bare)
        candidates = [
            known for known in index if base.startswith(known + "-") or base.startswith(known + "@")
        ]
        if candidates:
            return index[max(candidates, key=len)]
        return None

    def get(self, name: str) -> ModelInfo:
        """The model, or a ConfigError that suggests close names and how to add one."""
        info = self.find(name)
        if info is not None:
            return info
        close = difflib.get_close_matches(name, list(self._index()), n=3)
        suggestion = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"unknown model {name!r}.{suggestion} Add its row to a TOML file in the shape of "
            f"unbounded/data/models.toml and set {MODELS_FILE_ENV} to it (or give a Session "
            "model_table=load_model_table([FILE]))."
        )

    def names(self) -> list[str]:
        """Known model names, sorted."""
        return sorted(self.models)

    def with_model(self, info: ModelInfo) -> ModelTable:
        """A copy of the table with one more (or a replaced) model; this one is unchanged."""
        copy = ModelTable(dict(self.models))
        copy.add(info)
        return copy


def read_model_file(path: str | Path) -> list[ModelInfo]:
    """Parse one models TOML file."""
    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"models file not found: {source}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from None
    return _models_from_document(data, str(source))


def _models_from_document(data: Mapping[str, Any], origin: str) -> list[ModelInfo]:
    rows = data.get("models")
    if not isinstance(rows, dict):
        raise ConfigError(f"{origin}: expected a [models.<name>] table")
    return [
        _model_from_row(name, row, origin) for name, row in rows.items() if isinstance(row, dict)
    ]


@lru_cache(maxsize=1)
def _packaged_models() -> tuple[ModelInfo, ...]:
    text = resources.files("unbounded.data").joinpath("models.toml").read_text(encoding="utf-8")
    return tuple(_models_from_document(tomllib.loads(text), "unbounded/data/models.toml"))


def load_model_table(
    extra_files: Iterable[str | Path] = (), *, environ: Mapping[str, str] | None = None
) -> ModelTable:
    """The packaged table, then files from UNBOUNDED_MODELS_FILE, then `extra_files`."""
    env = os.environ if environ is None else environ
    table = ModelTable()
    for info in _packaged_models():
        table.add(info)
    env_files = [p for p in env.get(MODELS_FILE_ENV, "").split(os.pathsep) if p]
    for path in [*env_files, *extra_files]:
        for info in read_model_file(path):
            table.add(info)
    return table


@lru_cache(maxsize=4)
def _table_for(env_files: str) -> ModelTable:
    return load_model_table(environ={MODELS_FILE_ENV: env_files})


@lru_cache(maxsize=256)
def _keeps_thinking(name: str, env_files: str) -> bool:
    found = _table_for(env_files).find(name)
    return True if found is None else found.keeps_previous_thinking


def keeps_previous_thinking(model_name: str) -> bool:
    """Whether `model_name`'s API keeps earlier turns' thinking in context, by the packaged
    table and UNBOUNDED_MODELS_FILE's rows (a model neither lists is assumed to keep it)."""
    return _keeps_thinking(model_name, os.environ.get(MODELS_FILE_ENV, ""))


DEFAULT_MODEL = "claude-sonnet-5-5"
"""Used when a transcript does not say which model it ran on."""

ASSUMED_MODELS: dict[ProviderName, str] = {
    "anthropic": DEFAULT_MODEL,
    "openai": "gpt-5.4",
    "other": DEFAULT_MODEL,
}
"""Whose figures a model missing from the table is given, by its provider: the provider's
current general model (window, prices, caching rules: an OpenAI model never pays a cache
write)."""

_OPENAI_PREFIXES = ("gpt-", "gpt5", "o1", "o3", "o4", "codex-", "chatgpt-", "openai/")


def as_provider(value: object) -> ProviderName | None:
    """`value` when it names an API family (anthropic, openai, other), else None."""
    if value == "anthropic":
        return "anthropic"
    if value == "openai":
        return "openai"
    if value == "other":
        return "other"
    return None


# "anthropic:claude-…" (LangChain's provider:model), not the ":0" of a Bedrock id.
# A LangChain `provider:model` prefix names a known provider; any other `name:tag` keeps its
# name (OpenRouter's `:beta`, `:thinking`; ollama's `:latest`, `:8b`).
_PROVIDER_COLON = re.compile(
    r"^(?:anthropic|openai|azure_openai|azure|google_genai|google_vertexai|"
    r"google_anthropic_vertex|vertexai|vertex_ai|gemini|bedrock|bedrock_converse|mistralai|"
    r"groq|ollama|together|fireworks|deepseek|xai|cohere|huggingface|openrouter|"
    r"litellm):(?=[A-Za-z])",
    re.I,
)
# A Bedrock id: "anthropic.claude-…-v1:0", with a region's inference profile ("us.", "global.").
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?anthropic\.(?=claude)", re.I)
_BEDROCK_SUFFIX = re.compile(r"-v\d+(?::\d+)?(?::\d+k)?$", re.I)


def bare_model_name(name: str) -> str:
    """`name` without what a gateway or cloud wraps a model name in: a `provider/` path
    (litellm, OpenRouter), a `provider:` prefix (LangChain), a Bedrock id's `anthropic.` and
    region prefix and `-v1:0` suffix. A Vertex `@date` is left for `ModelTable.find`."""
    bare = name.strip().rsplit("/", 1)[-1]
    bare = _PROVIDER_COLON.sub("", bare, count=1)
    if _BEDROCK_PREFIX.match(bare):
        bare = _BEDROCK_SUFFIX.sub("", _BEDROCK_PREFIX.sub("", bare, count=1))
    return bare


def provider_of_name(name: str) -> ProviderName | None:
    """The API family a model name tells (`claude-…` Anthropic, `gpt-…`/`o3…` OpenAI), or
    None when it tells none; read through a provider's prefix or a Bedrock id
    (`bare_model_name`)."""
    key = name.strip().lower()
    bare = bare_model_name(key)
    if key.startswith(("anthropic/", "anthropic:")) or bare.startswith("claude"):
        return "anthropic"
    if key.startswith(_OPENAI_PREFIXES) or bare.startswith(_OPENAI_PREFIXES):
        return "openai"
    return None


def assumed_model(table: ModelTable, name: str, provider: ProviderName) -> ModelInfo:
    """The figures a model missing from the table is planned and priced with: those of its
    provider's `ASSUMED_MODELS` row, under its own name, marked as assumed in `source`."""
    base = table.get(ASSUMED_MODELS[provider])
    return replace(
        base,
        name=name,
        aliases=(),
        source=f"not in the model table: figures of {base.name} assumed",
    )


def resolve_recorded_model(
    table: ModelTable, recorded: str | None, *, provider: ProviderName | None = None
) -> tuple[ModelInfo, str, list[str]]:
    """The model a recording is planned and priced for: (info, how it was found, notes).

    How: `transcript` (the table lists it), `assumed` (missing: its provider's figures under
    its own name, see `assumed_model`), or `default` (the recording names no model).
    `provider` is the recording's provider when its format makes it certain.
    """
    if not recorded or recorded == UNNAMED_MODEL:
        return table.get(DEFAULT_MODEL), "default", []
    found = table.find(recorded)
    if found is not None:
        return found, "transcript", []
    family = provider or provider_of_name(recorded) or "other"
    info = assumed_model(table, recorded, family)
    words = {
        "anthropic": "an Anthropic model",
        "openai": "an OpenAI model",
        "other": "the default, as the name tells no provider",
    }
    caching = (
        "cached input at "
        f"{info.cache_read_multiplier:g}x, no cache-write charge"
        if info.provider == "openai"
        else f"cache writes at {info.cache_write_5m_multiplier:g}x, reads at "
        f"{info.cache_read_multiplier:g}x"
    )
    note = (
        f"model {recorded!r} is not in the model table: planned and priced with the figures of "
        f"{ASSUMED_MODELS[family]} ({words[family]}: window {info.context_window:,}, "
        f"${info.input_per_mtok:,.2f} in / ${info.output_per_mtok:,.2f} out per Mtok, {caching}); "
        "add its row with --models-file for exact figures"
    )
    return info, "assumed", [note]
