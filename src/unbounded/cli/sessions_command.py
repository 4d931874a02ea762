"""Sessions in PostgreSQL from the command line: `sessions`, `export`, `import` and `migrate`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.text import markup_safe, printable
from unbounded.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs (a fast --help)
    from unbounded.addresses import DatabaseAddress


def database_address(text: str, what: str) -> DatabaseAddress:
    """`text` as a database address, or a clear error saying what was expected."""
    from unbounded.addresses import DatabaseAddress, parse_address

    address = parse_address(text)
    if not isinstance(address, DatabaseAddress):
        raise ConfigError(
            f"{what} {text!r} is not a database address: expected postgresql://user@host/db"
        )
    return address


@app.command("sessions")
@exits_cleanly
def sessions_command(
    url: Annotated[str, typer.Argument(help="The database: postgresql://user@host/db.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List the sessions kept in a database (id, records, last update, size)."""
    from rich.table import Table

    from unbounded.postgres.transfer import list_sessions

    address = database_address(url, "URL")
    sessions = list_sessions(address.url)
    if as_json:
        print(json.dumps({"sessions": [s.to_dict() for s in sessions]}, indent=2))
        return
    table = Table(
        title=f"Sessions in {markup_safe(address.with_session(None).display)}",
        title_justify="left",
    )
    table.add_column("session")
    table.add_column("records", justify="right")
    table.add_column("last update (UTC)")
    table.add_column("size", justify="right")
    for info in sessions:
        table.add_row(
            markup_safe(info.session_id),  # a file name's stem by default
            f"{info.records:,}",
            info.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            _size(info.bytes),
        )
    console.print(table)
    if not sessions:
        console.print("[grey50]no sessions[/]")


@app.command("export")
@exits_cleanly
def export_command(
    url: Annotated[str, typer.Argument(help="postgresql://…/db, or …/db?session=ID.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The JSONL file to write.")],
    session: Annotated[
        str | None, typer.Option("--session", help="The session (or ?session= in the URL).")
    ] = None,
) -> None:
    """Write a database session as a JSONL transcript, each record's line as stored."""
    from unbounded.postgres.transfer import export_session

    address = database_address(url, "URL").with_session(session)
    session_id = address.require_session("--session")
    written = export_session(address.url, session_id, output)
    error_console.print(
        f"exported {printable(session_id)} ({_size(written)}) to {printable(str(output))}",
        markup=False,
        highlight=False,
    )


@app.command("import")
@exits_cleanly
def import_command(
    path: Annotated[Path, typer.Argument(help="A Claude Code JSONL transcript.")],
    url: Annotated[str, typer.Argument(help="postgresql://…/db, or …/db?session=ID.")],
    session: Annotated[
        str | None,
        typer.Option("--session", help="The new session's id (default: the file name's stem)."),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip lines that cannot be read.")
    ] = False,
    wait: Annotated[
        float, typer.Option("--wait", min=0, help="Seconds to wait for the session's lock.")
    ] = 0.0,
) -> None:
    """Store a JSONL transcript as a new database session, each record's line kept exactly."""
    from unbounded.errors import SessionLockedError
    from unbounded.postgres.transfer import import_session

    address = database_address(url, "URL").with_session(session)
    session_id = address.session or path.stem
    try:
        result = import_session(
            path, address.url, session_id, skip_invalid=skip_invalid, wait=wait or None
        )
    except SessionLockedError:
        # The store's advice names the library's wait= and lock=False; this command has --wait.
        waited = f" after waiting {wait:g} s" if wait else ""
        raise SessionLockedError(
            f"{address.with_session(session_id).display} is in use by another worker{waited}: "
            "close it there first, or pass --wait SECONDS to wait for it"
        ) from None
    for warning in result.warnings:
        error_console.print(f"[yellow]warning:[/] {markup_safe(warning)}", highlight=False)
    if result.skipped_lines:
        error_console.print(
            f"[yellow]warning:[/] skipped {result.skipped_lines} invalid line(s)", highlight=False
        )
    error_console.print(
        f"imported {result.records:,} records ({_size(result.bytes)}) as session "
        f"{printable(session_id)}",
        markup=False,
        highlight=False,
    )


@app.command("migrate")
@exits_cleanly
def migrate_command(
    url: Annotated[str, typer.Argument(help="The database: postgresql://user@host/db.")],
) -> None:
    """Create or upgrade unbounded's tables (needs CREATE on the schema)."""
    from unbounded.postgres.connect import connection_pool, get_connection
    from unbounded.postgres.migrations import LATEST_VERSION, migrate

    address = database_address(url, "URL")
    pool = connection_pool(address.url)
    connection = get_connection(pool, address.url)
    try:
        applied = migrate(connection)
    finally:
        pool.putconn(connection)
    done = f"applied {', '.join(map(str, applied))}" if applied else "nothing to apply"
    error_console.print(f"schema at version {LATEST_VERSION} ({done})", highlight=False)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    exponent = min(int(math.log(count, 1024)), 4)
    return f"{count / 1024**exponent:,.1f} {('B', 'KiB', 'MiB', 'GiB', 'TiB')[exponent]}"
