"""The ``streamcal`` command: one module per subcommand, each with ``register(subparsers)``.

Subcommand modules import their heavy dependencies inside the command function, so
``streamcal --help`` stays fast. An error of streamcal's tree (``streamcal.errors``) that
stops a command ends it here, in one place: one line on stderr saying what failed, one
saying what to do (its branch's), and its branch's exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import streamcal
from streamcal.errors import BRANCHES, ConfigurationError, StreamcalError

SUBCOMMANDS = ("demo", "run", "report")


class UsageError(ConfigurationError):
    """Bad input or configuration: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamcal",
        description="Online Venn-Abers calibration for event streams.",
        epilog=exit_statuses(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"streamcal {streamcal.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"streamcal.cli.{name}").register(sub)
    return parser


def command(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """The parser of the subcommand ``name``: ``help`` is its line in ``streamcal --help``,
    ``description`` the text of its own help, kept as written (paragraphs, lists)."""
    return sub.add_parser(name, help=help, description=description,
                          formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip


def exit_statuses() -> str:
    """What each exit status means and what to do, from the branches of the tree.

    >>> print(exit_statuses().splitlines()[-2])
      5  SupersededError: leave the successor running, or stop it before starting this one again
    """
    lines = ["exit statuses:", "  0  done"]
    for branch in sorted((StreamcalError, *BRANCHES), key=lambda b: b.exit_status):
        lines.append(f"  {branch.exit_status}  {branch.__name__}: {branch.what_to_do}")
    return "\n".join([*lines, "  130  interrupted (Ctrl-C)"])


def ending(exc: StreamcalError, command: str = "COMMAND") -> tuple[int, str]:
    """The exit status and the two lines ``streamcal command`` ends with on ``exc``: what
    failed, and its branch's what to do.

    >>> print(ending(UsageError("--events: bad value 0"))[1])
    --events: bad value 0
      what to do: fix the setting the message names (see `streamcal COMMAND --help`)
    >>> from streamcal.errors import BrokerError
    >>> ending(BrokerError("no broker answered"))[1].splitlines()[0]
    "BrokerError('no broker answered')"
    """
    # A Kafka client's own words: their type says what failed.
    line = repr(exc) if getattr(exc, "client_words", False) else str(exc)
    todo = exc.what_to_do.replace("streamcal COMMAND", f"streamcal {command}")
    return exc.exit_status, f"{line}\n  what to do: {todo}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except StreamcalError as exc:
        status, lines = ending(exc, args.command)
        print(f"streamcal {args.command}: error: {lines}", file=sys.stderr)
        return status
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
