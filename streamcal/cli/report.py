"""`streamcal report` (not built yet)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("report", help="(coming) report")
    p.set_defaults(func=_main)


def _main(args) -> int:
    print("streamcal report: coming soon — the stream processor is not built yet.")
    return 0
