"""The `unbounded` command line: importing this package registers every command on `app`."""

from unbounded.cli import (  # noqa: F401  (each module adds its command to `app`)
    compact_command,
    eval_command,
    inspect_command,
    replay_command,
    sessions_command,
    tune_command,
)
from unbounded.cli.app import app, main

__all__ = ["app", "main"]
