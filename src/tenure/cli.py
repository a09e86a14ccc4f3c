"""The `tenure` command: list the live leases of a store, or break one.

`--store` falls back to the TENURE_STORE environment variable. Every error is one line on
stderr, starting with "tenure: error: ", with exit code 2 for bad usage or input and 1 when the
store fails. Secrets in store URLs are never printed.

Example::

    $ tenure locks --store sqlite:////var/lib/app/locks.db
     name             holder                         token   expires in
    ────────────────────────────────────────────────────────────────────
     nightly-report   web-1:4121:3fa2c1   1795312747745980       29.8 s
    $ tenure locks --json --prefix nightly --store sqlite:////var/lib/app/locks.db
    $ TENURE_STORE=file:///var/lib/app/locks tenure locks break nightly-report
    broke 1 lease on 'nightly-report'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import NoReturn
from urllib.parse import urlsplit

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

import tenure
from tenure._urls import parse_store_url, redact

ENV_VAR = "TENURE_STORE"
USAGE_ERROR = 2
STORE_ERROR = 1


class _UsageError(Exception):
    """Bad command-line input (exit 2)."""


class _StoreError(Exception):
    """The store cannot be used (exit 1)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line like every other error, instead of argparse's usage block.
        raise _UsageError(f"{message}; see '{self.prog} --help'")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `tenure` command with `argv` (default: sys.argv[1:]); return the exit code.

    Example::

        >>> main(["locks", "--store", "memory://"])
        no live leases in memory://
        0
    """
    url: str | None = None
    try:
        args = _parser().parse_args(argv)
        url = getattr(args, "store", None)
        if url is None:
            url = os.environ.get(ENV_VAR)
        if not url:
            raise _UsageError(
                f"no store given: pass --store URL or set {ENV_VAR} "
                "(e.g. sqlite:////var/lib/app/locks.db)"
            )
        with _connect(url) as store:
            args.run(store, args)
        return 0
    except (_UsageError, tenure.InvalidArgument, tenure.InvalidArgumentType) as exc:
        return _fail(str(exc), USAGE_ERROR, url)
    except (_StoreError, tenure.TenureError) as exc:
        return _fail(str(exc), STORE_ERROR, url)
    except OSError as exc:
        return _fail(f"{_safe_url(url)}: {exc}" if url else str(exc), STORE_ERROR, url)
    except KeyboardInterrupt:
        return _fail("interrupted", 130, url)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tenure", description="Inspect and break the leases of a tenure store.")
    parser.add_argument("--version", action="version", version=f"tenure {tenure.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store = _Parser(add_help=False)
    store.add_argument(
        "--store", metavar="URL", default=argparse.SUPPRESS,
        help=f"store URL, e.g. sqlite:////var/lib/app/locks.db (default: ${ENV_VAR})",
    )
    locks = commands.add_parser(
        "locks", parents=[store], help="list live leases ('locks break NAME' frees one)",
        usage="tenure locks [--store URL] [--prefix PREFIX] [--json]\n"
              "       tenure locks break NAME [--store URL]",
        description="List the live leases of a store, or break one with 'locks break NAME'.",
    )
    locks.add_argument("--prefix", default="", help="only names starting with PREFIX")
    locks.add_argument("--json", action="store_true", help="print a JSON list, not a table")
    locks.set_defaults(run=_list)
    actions = locks.add_subparsers(dest="action", metavar="ACTION")
    breaker = actions.add_parser(
        "break", parents=[store], help="free NAME now, whoever holds it",
        description="Free every live lease of NAME now; its holder learns at its next check.",
    )
    breaker.add_argument("name", metavar="NAME")
    breaker.set_defaults(run=_break)
    return parser


def _connect(url: str) -> tenure.Store:
    parsed = parse_store_url(url)
    # Connecting creates a missing file or directory: an admin typo should not.
    local = parsed.scheme in ("sqlite", "file")
    if local and parsed.location and not os.path.exists(parsed.location):
        raise _StoreError(
            f"{_safe_url(url)}: {parsed.location} does not exist; check the path "
            "(a store is created by the applications that use it)"
        )
    return tenure.connect(url)


def _list(store: tenure.Store, args: argparse.Namespace) -> None:
    leases = store.leases(args.prefix)
    if args.json:
        print(json.dumps([_as_json(info) for info in leases], indent=2))
        return
    if not leases:
        where = f" with prefix {args.prefix!r}" if args.prefix else ""
        print(f"no live leases{where} in {store.url}")
        return
    now = datetime.now(timezone.utc)
    show_slot = any(info.slot > 0 for info in leases)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("name")
    if show_slot:
        table.add_column("slot", justify="right")
    table.add_column("holder")
    table.add_column("token", justify="right")
    table.add_column("expires in", justify="right")
    for info in leases:
        slot = [str(info.slot)] if show_slot else []
        # Text(): names are data, never rich markup.
        table.add_row(Text(info.name), *slot, Text(info.holder), str(info.token),
                      _expires_in(info, now))
    console = Console(highlight=False)
    if not console.is_terminal:  # piped: the table's natural width, never wrap a name
        console.width = 100_000
    console.print(table)


def _break(store: tenure.Store, args: argparse.Namespace) -> None:
    freed = store.break_lease(args.name)
    if freed:
        print(f"broke {freed} lease{'s' if freed > 1 else ''} on {args.name!r}")
    else:
        print(f"no live lease on {args.name!r}")


def _expires_in(info: tenure.LeaseInfo, now: datetime) -> str:
    if info.expires_at is None:
        return "held until released"
    return f"{max(0.0, (info.expires_at - now).total_seconds()):.1f} s"


def _as_json(info: tenure.LeaseInfo) -> dict[str, object]:
    expires = None if info.expires_at is None else info.expires_at.isoformat()
    return {"name": info.name, "slot": info.slot, "holder": info.holder, "token": info.token,
            "expires_at": expires}


def _safe_url(url: str) -> str:
    """The URL with everything before its last '@' hidden (redact() misses '/' or '@' in a
    password), and secret query options redacted."""
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest:
        return redact(f"{scheme}://***@{rest.rpartition('@')[2]}")
    return redact(url)


def _fail(message: str, code: int, url: str | None) -> int:
    if url:
        message = message.replace(redact(url), _safe_url(url)).replace(url, _safe_url(url))
        try:
            password = urlsplit(url).password
        except ValueError:
            password = None
        if password:  # in case a message quotes part of the URL
            message = message.replace(password, "***")
    print(f"tenure: error: {' '.join(redact(message).split())}", file=sys.stderr)
    return code
