"""`streamcal run`: the Kafka stream processor."""

from __future__ import annotations

import argparse

from streamcal.cli import command

_GROUPS = {
    "kafka": "Kafka connection",
    "topics": "topics and message fields",
    "model": "model",
    "join": "joining events and labels",
    "metrics": "metric lines",
    "state": "checkpoints and recovery",
}

_DESCRIPTION = """\
Read events and labels from Kafka, produce a calibrated prediction (Venn-Abers p0, p1 and
their merge p) for every event before its label is read, join each label with its event's
prediction, record its loss and let the model learn. Bad input goes to the dead-letter
topic with a reason. Metric lines (JSON) go to stdout or a file and the metrics topic.

Every option can also be set in the environment as STREAMCAL_<NAME> (e.g.
STREAMCAL_BOOTSTRAP_SERVERS) or in a TOML file (--config) as <name> = value, top level or
in a [run] table. Precedence: flag > environment > file > default.

Checkpoints (--state-dir) are authenticated with HMAC-SHA256: give the key in
STREAMCAL_CHECKPOINT_KEY or --checkpoint-key-file (a file outside the state directory,
at least 16 bytes). On start the newest checkpoint is verified, restored, and reading
resumes at its offsets; without --state-dir the processor starts from the beginning of
the topics. Delivery is at least once by default: after a crash the predictions since the
last checkpoint are produced again, with identical values (dedupe by key = event id).
SIGINT/SIGTERM stop gracefully (flush, checkpoint, commit).

Records of all partitions of both input topics are processed in one deterministic order
(record timestamp, events before labels, partition, offset), so a replay gives the same
predictions; --merge-wait bounds how long a lagging partition can hold the others back.
The TTLs (--pending-ttl, --label-wait) are measured in record time, not wall-clock time.

Topics of any Kafka client and codec (none, gzip, snappy, lz4, zstd) are read. A record
batch that cannot be read (a codec package missing, a corrupt batch) stops the processor
with exit status 3 and a message naming the topic, partition, offset and the fix;
--skip-unreadable dead-letters its offset range instead and goes on. A position that the
broker's log no longer holds (a broker that lost its data, an unclean leader election, a
topic deleted and recreated, retention) stops it with exit status 4 and a message naming
the partition, the position and what the log holds; --on-lost-input continue goes on
from what the log holds instead, counted and dead-lettered.

--processing-guarantee exactly-once makes each checkpoint interval's outputs, state-topic
records and input offsets one Kafka transaction (inputs read read_committed): readers
that read with isolation.level=read_committed see every output exactly once, after a
crash too, up to one --checkpoint-interval later. An instance fenced by a successor (the
same transactional id: the same --group-id with --scope global) stops with exit status 5.
"""


def register(sub) -> None:
    from streamcal.stream.config import SETTINGS

    p = command(sub, "run", "run the Kafka stream processor", _DESCRIPTION)
    p.add_argument("--config", metavar="FILE", help="TOML file of settings")
    p.add_argument(
        "--max-idle-s",
        type=float,
        default=None,
        metavar="S",
        help="stop once caught up and without a new record for S seconds "
        "(default: run until stopped)",
    )
    p.add_argument(
        "--log-level", default="WARNING", help="logging level on stderr (default: WARNING)"
    )
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines on stderr as text, or as one JSON object per line with the "
        "record's structured fields, for log shippers (default: text)",
    )
    groups = {name: p.add_argument_group(title) for name, title in _GROUPS.items()}
    for s in SETTINGS:  # each declared once (streamcal.stream.config): its flag and help
        if s.flag is None:  # the environment only (a secret)
            continue
        group, help_text = groups[s.group], s.help_text().replace("%", "%%")
        if s.type is bool:
            group.add_argument(s.flag, dest=s.name, action=argparse.BooleanOptionalAction,
                               default=None, help=help_text)  # fmt: skip
        else:  # sizes and durations are read from text by their setting (512MiB, 2h)
            conv = s.type if s.parse is s.type else str
            group.add_argument(s.flag, dest=s.name, type=conv, default=None, help=help_text)
    p.set_defaults(func=_main)


def _main(args) -> int:
    import os
    import signal
    import threading

    from streamcal.cli import UsageError
    from streamcal.errors import StreamcalError
    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.logformat import configure
    from streamcal.stream.state.errors import StoreError

    configure(args.log_level.upper(), args.log_format)
    try:
        config = ProcessorConfig.from_sources(vars(args), os.environ, args.config)
        from streamcal.stream.processor import Processor

        processor = Processor(config)
    except (ValueError, StoreError) as exc:
        # Refused before it ran: a setting, or a --state-dir it cannot use (a disk that
        # fails while running ends with StoreError's own status, 1).
        raise UsageError(str(exc)) from None

    stop = threading.Event()

    def _stop(signum, frame):
        if stop.is_set():  # a second signal: stop now
            raise KeyboardInterrupt
        stop.set()

    # Restored on the way out: `streamcal.cli.main(["run", ...])` may be called in-process
    # (tests, notebooks), and the caller's own handlers must survive it.
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        processor.run(stop_event=stop, max_idle_s=args.max_idle_s)
    except (RuntimeError, OSError) as exc:
        if isinstance(exc, StreamcalError):  # ended by streamcal.cli.main, by its branch
            raise
        # From outside streamcal (a client, the system: the metrics port taken...): no
        # checkpoint was written after it, so a restart resumes from the last good one.
        raise StreamcalError(repr(exc)) from exc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
