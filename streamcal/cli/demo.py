"""`streamcal demo`: the whole pipeline on one machine in under a minute.

Starts a local Kafka-compatible broker (tansu, from the ``demo`` extra) unless
``--bootstrap-servers`` is given, creates the topics, replays a data set as events with
labels arriving late (and a few never), runs the stream processor in this process with a
progress bar and metric lines, prints a summary table (raw model vs Venn-Abers) and
writes the HTML report. ``--produce-only`` just writes the demo stream into a broker for
a separately running ``streamcal run`` (see docker-compose.yml).

The demo itself is ``streamcal.demo.run.run_demo``; this module is its command line.
"""

from __future__ import annotations

import dataclasses

from streamcal.cli import command
from streamcal.demo.datasets import DATASETS, DESCRIPTIONS
from streamcal.demo.run import DemoOptions
from streamcal.learner.modes import MODES
from streamcal.stream.models import PRESETS

_DESCRIPTION = __doc__.split("\n\n")[1]
_D = DemoOptions()  # the defaults


def register(sub) -> None:
    p = command(sub, "demo", "run the whole pipeline on a local broker and print a summary",
                _DESCRIPTION)  # fmt: skip
    _broker_arguments(p.add_argument_group("broker"))
    _stream_arguments(p.add_argument_group("stream"))
    _processor_arguments(p.add_argument_group("processor"))
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.set_defaults(func=_main)


def _broker_arguments(g) -> None:
    """Where the demo's topics live: a local broker, or a cluster of the user's."""
    g.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="use this Kafka cluster instead of starting a local broker",
    )
    g.add_argument(
        "--security-protocol",
        default=_D.security_protocol,
        choices=("PLAINTEXT", "SSL"),
        help=f"how to reach --bootstrap-servers (default: {_D.security_protocol})",
    )
    g.add_argument("--ssl-cafile", metavar="FILE", help="CA certificate (PEM) for SSL")
    g.add_argument(
        "--topic-prefix",
        metavar="NAME",
        help="topics are NAME.events, NAME.labels, NAME.predictions, NAME.dead-letters "
        "(default: streamcal on a fresh local broker and with --produce-only, else a "
        "fresh streamcal.demo-XXXXXX so reruns do not mix)",
    )
    _number(g, "--partitions", int, "partitions of topics created")
    _number(g, "--wait-for-broker", float, "wait up to S seconds for --bootstrap-servers to "
            "answer", metavar="S")  # fmt: skip


def _stream_arguments(g) -> None:
    """The stream the demo writes: its data set, size, label delays and bad records."""
    g.add_argument(
        "--dataset",
        default=_D.dataset,
        choices=DATASETS,
        help="; ".join(f"{name}: {what}" for name, what in DESCRIPTIONS.items())
        + f" (default: {_D.dataset})",
    )
    g.add_argument("--events", type=int, metavar="N", help="number of events (default: all)")
    _number(g, "--seed", int, "random seed")
    _number(g, "--label-delay", float, "a label arrives K events after its event on average "
            "(uniform 0..2K)", metavar="K")  # fmt: skip
    _number(g, "--missing-labels", float, "fraction of labels never sent", metavar="F")
    _number(g, "--bad-records", int, "mix in N malformed messages, to see them in the "
            "dead-letter topic", metavar="N")  # fmt: skip
    g.add_argument(
        "--produce-only",
        action="store_true",
        help="only create the topics and write the stream (needs --bootstrap-servers)",
    )


def _processor_arguments(g) -> None:
    """How the demo's processor runs, and where its metric log and report go."""
    g.add_argument(
        "--model",
        default=_D.model,
        help=f"{', '.join(PRESETS)} or module:function (default: {_D.model})",
    )
    g.add_argument("--mode", choices=MODES, help="Venn-Abers mode (default: the learner's)")
    g.add_argument(
        "--out",
        default=_D.out,
        metavar="DIR",
        help=f"metric log and HTML report go here (default: ./{_D.out})",
    )
    g.add_argument(
        "--no-report", action="store_true", help="keep the metric log, skip the HTML report"
    )
    g.add_argument(
        "--state-dir", metavar="DIR", help="checkpoint directory (default: a temporary one)"
    )
    _number(g, "--max-idle-s", float, "stop when no record arrived for S seconds", metavar="S")


def _number(g, flag: str, kind, text: str, metavar: str | None = None) -> None:
    """A numeric flag whose default is the demo's (``DemoOptions``), said after ``text``."""
    default = getattr(_D, flag[2:].replace("-", "_"))
    g.add_argument(flag, type=kind, default=default, metavar=metavar,
                   help=f"{text} (default: {default:g})")  # fmt: skip


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _main(args) -> int:
    import signal
    import threading

    # SIGTERM (docker stop, kill) unwinds like Ctrl-C: the processor closes its clients
    # and the broker this command started is stopped.
    if threading.current_thread() is not threading.main_thread():
        return _run(args)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _options(args) -> DemoOptions:
    """The demo's options from the arguments; UsageError naming the flag if one is bad."""
    from streamcal.cli import UsageError

    if args.produce_only and not args.bootstrap_servers:
        raise UsageError("--produce-only needs --bootstrap-servers (the broker to write to)")
    for name, ok in (
        ("--events", args.events is None or args.events >= 1),
        ("--partitions", args.partitions >= 1),
        ("--label-delay", args.label_delay >= 0),
        ("--missing-labels", 0 <= args.missing_labels < 1),
        ("--bad-records", args.bad_records >= 0),
        ("--max-idle-s", args.max_idle_s > 0),
    ):
        if not ok:
            raise UsageError(f"{name}: bad value {getattr(args, name[2:].replace('-', '_'))!r}")
    if args.security_protocol == "SSL" and not args.bootstrap_servers:
        raise UsageError("--security-protocol SSL applies to --bootstrap-servers only")
    names = {f.name for f in dataclasses.fields(DemoOptions)} - {"report"}
    return DemoOptions(**{k: getattr(args, k) for k in names}, report=not args.no_report)


def _run(args) -> int:
    from streamcal.cli import UsageError
    from streamcal.demo.broker import BrokerError
    from streamcal.demo.run import run_demo

    options = _options(args)
    try:
        run_demo(options)
    except BrokerError as exc:  # the local broker did not start: a broker can be given
        raise UsageError(f"{exc} (or pass --bootstrap-servers HOST:PORT)") from None
    return 0
