"""The `tfguard` command: one library call per subcommand, no logic here.

`main(argv)` parses, calls the library, renders with rich, and maps typed
exceptions to one red `ERROR` line plus a hint and an exit code.

Example:

>>> from tfguard.cli import main
>>> main(["--version"])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rich.console import Console

from tfguard import __version__
from tfguard.errors import TfguardError


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def cmd_replay(args) -> int:
    from tfguard.forensics import replay

    report = replay(args.path)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _console().print(report.summary())
    return 0


COMMANDS = {"replay": cmd_replay}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfguard",
        description="Trustworthy, observable TensorFlow / Keras 3 training.",
    )
    parser.add_argument("--version", action="version", version=f"tfguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("replay", help="re-run a quarantined batch and name the first bad layer/op")
    p.add_argument("path", help="a quarantine folder, e.g. tfguard-quarantine/<model>/step-N")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    for register in _EXTENSIONS:
        register(sub)
    return parser


_EXTENSIONS: list = []


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the `tfguard` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    handler = getattr(args, "handler", None) or COMMANDS[args.command]
    try:
        return int(handler(args) or 0)
    except TfguardError as error:
        console = _console(stderr=True)
        console.print(f"[bold red]ERROR[/] {error.message}", markup=True)
        if error.hint:
            console.print(f"[yellow]hint:[/] {error.hint}", markup=True)
        return error.exit_code
    except KeyboardInterrupt:
        _console(stderr=True).print("[bold red]ERROR[/] interrupted", markup=True)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
