"""`streamcal run` (not built yet)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("run", help="(coming) run")
    p.set_defaults(func=_main)


def _main(args) -> int:
    print("streamcal run: coming soon — the stream processor is not built yet.")
    return 0
