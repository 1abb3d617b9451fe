"""`streamcal demo` (not built yet)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("demo", help="(coming) demo")
    p.set_defaults(func=_main)


def _main(args) -> int:
    print("streamcal demo: coming soon — the stream processor is not built yet.")
    return 0
