"""The `unbounded` command: the Typer application and its shared error handling."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandFunctionType

from unbounded.cli.text import markup_safe
from unbounded.errors import UnboundedError

P = ParamSpec("P")
R = TypeVar("R")

class Command(TyperCommand):
    """A command whose help reads as usual: `PATH...` in the usage line (not `{paths}...`), no
    `<bool>` after a flag (a flag takes no value), and its summary in the command list one
    line however its docstring is wrapped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.short_help is None and self.help:
            # Rich help keeps a docstring's line breaks; the summary is its first paragraph.
            first = inspect.cleandoc(self.help).split("\n\n")[0]
            self.short_help = " ".join(first.split())

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's pieces, without the braces Typer puts around required arguments."""
        pieces = super().collect_usage_pieces(ctx)
        return [piece.replace("{", "").replace("}", "") for piece in pieces]

    def get_params(self, ctx: Any) -> list[Any]:
        """The parameters, flags marked as taking no value."""
        return _flags_take_no_value(super().get_params(ctx))


def _flags_take_no_value(params: list[Any]) -> list[Any]:
    """The parameters, flags marked as taking no value (no `<bool>` in the help)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class Group(TyperGroup):
    """The command group (`unbounded --help`): its flags shown as commands show theirs."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The group's parameters, flags marked as taking no value."""
        return _flags_take_no_value(super().get_params(ctx))


class Application(typer.Typer):
    """The Typer application, every command built as a `Command`."""

    def command(
        self, *args: Any, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        """Register a command (see `typer.Typer.command`)."""
        return super().command(*args, cls=cls or Command, **kwargs)


app = Application(
    name="unbounded",
    cls=Group,
    help="Context management for long-running LLM agents: inspect, replay, evaluate and "
    "compact their sessions, tune a policy for them, and keep them in PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    """`--version`: the installed version, then exit (before any command runs)."""
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            shown = version("unbounded")
        except PackageNotFoundError:  # run from a source tree that is not installed
            from unbounded import __version__ as shown
        typer.echo(f"unbounded {shown}")
        raise typer.Exit()


@app.callback()
def root(
    show_version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print unbounded's version and exit.",
    ),
) -> None:
    """Inspect, compact and replay agent sessions under a context-management policy."""


# No `:name:` emoji codes: rich would turn `:smile:` in a prompt, a path or a model name into
# an emoji, even in text printed with markup off; none of the commands' own text uses one.
console = Console(emoji=False)
error_console = Console(stderr=True, emoji=False)


def exits_cleanly(command: Callable[P, R]) -> Callable[P, R]:
    """Turn unbounded's errors into one line on stderr and exit status 2, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except UnboundedError as exc:
            error_console.print(
                f"[bold red]error:[/] {markup_safe(str(exc))}",
                markup=True,
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(code=2) from None
        except OSError as exc:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            error_console.print(
                f"[bold red]error:[/] {markup_safe(f'{where}{exc.strerror or exc}')}",
                highlight=False,
            )
            raise typer.Exit(code=2) from None

    return wrapper


def main() -> None:
    """Entry point of the `unbounded` console script."""
    # The commands are on `app` already: importing this module first imports the
    # `unbounded.cli` package, whose `__init__` imports every command module.
    app(prog_name="unbounded")


if __name__ == "__main__":  # pragma: no cover
    main()
