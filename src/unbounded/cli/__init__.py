"""The `unbounded` command line."""

from unbounded.cli.app import app, main

__all__ = ["app", "main"]
