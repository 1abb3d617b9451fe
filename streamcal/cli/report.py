"""`streamcal report INPUT --out DIR`: an HTML page with figures from a metric log."""

from __future__ import annotations

import argparse


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write an HTML calibration report with figures",
        description=(
            "Write DIR/report.html (self-contained) with reliability diagrams, loss over time, "
            "Venn-Abers interval width and the Corollary 1 band, plus the PNG figures and "
            "summary.json. INPUT is a metric log written by `streamcal run`, or a predictions "
            "file joined with labels: JSON lines each with p0, p1, label (0/1) and optionally "
            "score (raw model probability), p (merged probability) and category (a Mondrian "
            "category: the report then adds a band chart per category); or a multiclass "
            "predictions file (as `streamcal run --task multiclass` writes them, with the "
            "true class as y): the report then shows the top label and a band chart per "
            "class. With --labels, the labels come from a labels file joined by id. Needs "
            "matplotlib (pip install 'streamcal-va[report]')."
        ),
    )
    p.add_argument(
        "input",
        metavar="INPUT",
        nargs="+",
        help="metric log or predictions file (JSON lines); or several metric logs (the "
        "instances of a --scope partition job): totals and per-unit figures",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument(
        "--labels",
        metavar="FILE",
        default=None,
        help='labels for a predictions file: JSON lines {"id": ..., "label": ...} as on the '
        "labels topic, joined to the predictions by id (predictions without a label are "
        "left out)",
    )
    p.add_argument(
        "--format",
        choices=("auto", "metrics", "predictions"),
        default="auto",
        help="input kind (default: guessed from the first line)",
    )
    p.add_argument(
        "--window",
        type=_positive_int,
        default=1000,
        help="rolling window in labels, for predictions input (default 1000)",
    )
    p.add_argument(
        "--bins",
        type=_positive_int,
        default=10,
        help="reliability bins, for predictions input (default 10)",
    )
    p.add_argument(
        "--top-k",
        type=_positive_int,
        default=10,
        help="categories shown one by one, for predictions input with a category (default 10)",
    )
    p.add_argument("--title", default=None, help="page title")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on long inputs")
    p.set_defaults(func=_main)


def _main(args) -> int:
    from streamcal.cli import UsageError
    from streamcal.monitoring.report import write_report

    try:
        page = write_report(
            args.input,
            args.out,
            window=args.window,
            bins=args.bins,
            title=args.title,
            progress=not args.no_progress,
            input_format=args.format,
            top_k=args.top_k,
            labels=args.labels,
        )
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.filename}: no such file") from None
    except (ValueError, OSError) as exc:  # a bad input file, or an --out it cannot write
        raise UsageError(str(exc)) from None
    print(page)
    return 0
