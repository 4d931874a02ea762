"""The built-in demo session moved to `unbounded.cli.demo`, beside the replay command that uses
it; this module keeps the old import path working."""

from unbounded.cli.demo import (
    CACHE_TTL_SECONDS,
    CWD,
    DEMO_MODEL,
    DEMO_SEED,
    DEMO_SOURCE,
    DEMO_START,
    RECORDED_AUTOCOMPACT,
    SESSION_ID,
    SYSTEM_PROMPT_TOKENS,
    TOKEN_DENSITY,
    VERSION,
    demo_jsonl,
    demo_records,
    demo_transcript,
    write_demo_session,
)

__all__ = [
    "CACHE_TTL_SECONDS",
    "CWD",
    "DEMO_MODEL",
    "DEMO_SEED",
    "DEMO_SOURCE",
    "DEMO_START",
    "RECORDED_AUTOCOMPACT",
    "SESSION_ID",
    "SYSTEM_PROMPT_TOKENS",
    "TOKEN_DENSITY",
    "VERSION",
    "demo_jsonl",
    "demo_records",
    "demo_transcript",
    "write_demo_session",
]
