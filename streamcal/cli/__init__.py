"""The ``streamcal`` command: one module per subcommand, each with ``register(subparsers)``.

Subcommand modules import their heavy dependencies inside the command function, so
``streamcal --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import streamcal

SUBCOMMANDS = ("demo", "run", "report")


class UsageError(Exception):
    """Bad input or configuration: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamcal",
        description="Online Venn-Abers calibration for event streams.",
    )
    parser.add_argument("--version", action="version", version=f"streamcal {streamcal.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"streamcal.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"streamcal {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
