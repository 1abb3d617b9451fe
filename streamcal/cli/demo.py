"""`streamcal demo`: the whole pipeline on one machine in under a minute.

Starts a local Kafka-compatible broker (tansu, from the ``demo`` extra) unless
``--bootstrap-servers`` is given, creates the topics, replays a data set as events with
labels arriving late (and a few never), runs the stream processor in this process with a
progress bar and metric lines, prints a summary table (raw model vs Venn-Abers) and
writes the HTML report. ``--produce-only`` just writes the demo stream into a broker for
a separately running ``streamcal run`` (see docker-compose.yml).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

_DESCRIPTION = __doc__.split("\n\n", 1)[1]


def register(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole pipeline on a local broker and print a summary",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("broker")
    g.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="use this Kafka cluster instead of starting a local broker",
    )
    g.add_argument(
        "--security-protocol",
        default="PLAINTEXT",
        choices=("PLAINTEXT", "SSL"),
        help="how to reach --bootstrap-servers (default: PLAINTEXT)",
    )
    g.add_argument("--ssl-cafile", metavar="FILE", help="CA certificate (PEM) for SSL")
    g.add_argument(
        "--topic-prefix",
        metavar="NAME",
        help="topics are NAME.events, NAME.labels, NAME.predictions, NAME.dead-letters "
        "(default: streamcal on a fresh local broker and with --produce-only, else a "
        "fresh streamcal.demo-XXXXXX so reruns do not mix)",
    )
    g.add_argument(
        "--partitions", type=int, default=1, help="partitions of topics created (default: 1)"
    )
    g.add_argument(
        "--wait-for-broker",
        type=float,
        default=60.0,
        metavar="S",
        help="wait up to S seconds for --bootstrap-servers to answer (default: 60)",
    )
    g = p.add_argument_group("stream")
    g.add_argument(
        "--dataset",
        default="phishing",
        choices=("phishing", "drift"),
        help="phishing: river's bundled data set, shuffled (1250 events); drift: a "
        "synthetic stream whose concept changes halfway (default: phishing)",
    )
    g.add_argument("--events", type=int, metavar="N", help="number of events (default: all)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    g.add_argument(
        "--label-delay",
        type=float,
        default=20,
        metavar="K",
        help="a label arrives K events after its event on average (uniform 0..2K; default 20)",
    )
    g.add_argument(
        "--missing-labels",
        type=float,
        default=0.02,
        metavar="F",
        help="fraction of labels never sent (default: 0.02)",
    )
    g.add_argument(
        "--bad-records",
        type=int,
        default=0,
        metavar="N",
        help="mix in N malformed messages, to see them in the dead-letter topic (default: 0)",
    )
    g.add_argument(
        "--produce-only",
        action="store_true",
        help="only create the topics and write the stream (needs --bootstrap-servers)",
    )
    g = p.add_argument_group("processor")
    g.add_argument("--model", default="logreg", help="logreg, gnb, hoeffding or module:function")
    g.add_argument(
        "--mode",
        choices=("pretrained", "sva", "va"),
        help="Venn-Abers mode (default: the learner's)",
    )
    g.add_argument(
        "--out",
        default="streamcal-demo",
        metavar="DIR",
        help="metric log and HTML report go here (default: ./streamcal-demo)",
    )
    g.add_argument(
        "--no-report", action="store_true", help="keep the metric log, skip the HTML report"
    )
    g.add_argument(
        "--state-dir", metavar="DIR", help="checkpoint directory (default: a temporary one)"
    )
    g.add_argument(
        "--max-idle-s",
        type=float,
        default=2.0,
        metavar="S",
        help="stop when no record arrived for S seconds (default: 2)",
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.set_defaults(func=_main)


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


def _run(args) -> int:
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

    if args.bootstrap_servers:
        return _demo(args, args.bootstrap_servers, own_broker=False)

    from streamcal.stream.broker import BrokerError, LocalBroker

    broker = LocalBroker()
    try:
        broker.start()
    except BrokerError as exc:
        raise UsageError(f"{exc} (or pass --bootstrap-servers HOST:PORT)") from None
    try:
        _say(args, f"started a local broker (tansu) on {broker.bootstrap_servers}")
        return _demo(args, broker.bootstrap_servers, own_broker=True)
    finally:
        broker.stop()
        _say(args, "stopped the local broker")


def _say(args, text: str) -> None:
    if not args.quiet:
        print(text, flush=True)


def _topics(args, own_broker: bool) -> dict:
    prefix = args.topic_prefix
    if prefix is None:
        if own_broker or args.produce_only:
            prefix = "streamcal"
        else:
            import uuid

            prefix = f"streamcal.demo-{uuid.uuid4().hex[:6]}"
    return {
        "events": f"{prefix}.events",
        "labels": f"{prefix}.labels",
        "predictions": f"{prefix}.predictions",
        "dead_letters": f"{prefix}.dead-letters",
    }


def _config(args, bootstrap: str, topics: dict, state_dir, metrics_path, metrics_every: int):
    import secrets

    from streamcal.cli import UsageError
    from streamcal.stream.config import ProcessorConfig

    settings = dict(
        bootstrap_servers=bootstrap,
        security_protocol=args.security_protocol,
        ssl_cafile=args.ssl_cafile,
        client_id="streamcal-demo",
        group_id=topics["events"].rsplit(".", 1)[0],
        events_topic=topics["events"],
        labels_topic=topics["labels"],
        predictions_topic=topics["predictions"],
        dead_letter_topic=topics["dead_letters"],
        model=args.model,
        mode=args.mode,
        metrics_file=str(metrics_path) if metrics_path else "none",
        metrics_every=metrics_every,
        state_dir=state_dir,
        # The state lives in a throwaway directory: a random key is enough.
        checkpoint_key=secrets.token_hex(16) if state_dir else None,
    )
    try:
        return ProcessorConfig.build(**{k: v for k, v in settings.items() if v is not None})
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _wait_for_broker(settings: dict, timeout: float) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    from streamcal.cli import UsageError

    deadline = time.monotonic() + timeout
    while True:
        try:
            KafkaConsumer(**settings, request_timeout_ms=5000).close()
            return
        except KafkaError as exc:
            if time.monotonic() >= deadline:
                raise UsageError(
                    f"no Kafka broker answered at {settings['bootstrap_servers']} "
                    f"within {timeout:g} s ({type(exc).__name__})"
                ) from None
            time.sleep(1.0)


def _demo(args, bootstrap: str, own_broker: bool) -> int:
    import tempfile
    from pathlib import Path

    from kafka import KafkaProducer

    from streamcal.cli import UsageError
    from streamcal.stream.replay import demo_records, ensure_topics, replay, replay_counts

    topics = _topics(args, own_broker)
    out_dir = None if args.produce_only else Path(args.out)
    metrics_path = None if out_dir is None else out_dir / "metrics.jsonl"

    with tempfile.TemporaryDirectory(prefix="streamcal-demo-state-") as tmp_state:
        state_dir = None if args.produce_only else (args.state_dir or tmp_state)
        try:
            records = demo_records(
                args.dataset,
                args.events,
                seed=args.seed,
                label_delay=args.label_delay,
                missing_labels=args.missing_labels,
                bad_records=args.bad_records,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        counts = replay_counts(records)
        # About a hundred lines in the metric log (smooth report curves); about ten of
        # them are printed.
        every = max(10, counts["label"] // 100)
        config = _config(args, bootstrap, topics, state_dir, metrics_path, every)
        client = config.kafka_client_settings()
        if not own_broker:
            _wait_for_broker(client, args.wait_for_broker)
        ensure_topics(client, topics.values(), partitions=args.partitions)
        t0 = time.monotonic()
        producer = KafkaProducer(**client, linger_ms=20, acks="all")
        try:
            replay(producer, records, topics)
        finally:
            producer.close()
        bad = counts["bad-event"] + counts["bad-label"]
        _say(
            args,
            f"produced {counts['event']} events and {counts['label']} labels "
            f"({counts['event'] - counts['label']} missing, {bad} malformed) to "
            f"{topics['events']} / {topics['labels']} in {time.monotonic() - t0:.1f} s",
        )
        if args.produce_only:
            return 0
        out_dir.mkdir(parents=True, exist_ok=True)
        metrics_path.unlink(missing_ok=True)  # the processor appends: start a fresh log

        final, elapsed = _process(args, config, counts["event"])

    _print_summary(args, final, counts, elapsed, topics)
    if final.get("dead_letters") and not args.quiet:
        _show_dead_letters(client, topics["dead_letters"], final["dead_letters"])
    if args.no_report:
        print(f"metric log: {metrics_path}")
    else:
        _write_report(args, metrics_path, out_dir)
    return 0


def _process(args, config, n_events: int):
    from tqdm import tqdm

    from streamcal.cli import UsageError
    from streamcal.stream.checkpoint import CheckpointError
    from streamcal.stream.processor import Processor

    try:
        processor = Processor(config)
    except (ValueError, CheckpointError) as exc:
        raise UsageError(str(exc)) from None
    bar = tqdm(
        total=n_events, unit="ev", desc="processing", disable=args.quiet, file=sys.stderr,
        leave=False,
    )  # fmt: skip

    print_every = max(50, n_events // 10)
    printed = [0]  # labels at the last printed line

    def on_metrics(line: dict) -> None:
        if args.quiet:
            return
        progress(line.get("events", 0))
        labels = line.get("labels", 0)
        if labels - printed[0] >= print_every or labels >= n_events:
            printed[0] = labels
            bar.write(metric_text(line), file=sys.stdout)

    def progress(n: int) -> None:
        bar.update(max(0, min(n, n_events) - bar.n))

    t0 = time.monotonic()
    try:
        final = processor.run(max_idle_s=args.max_idle_s, on_metrics=on_metrics, progress=progress)
    finally:
        bar.close()
    return final, time.monotonic() - t0 - args.max_idle_s


def _f(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def metric_text(line: dict) -> str:
    """One metric line in a compact human form.

    >>> metric_text({"labels": 500, "log_loss": 0.31, "raw_log_loss": 0.345,
    ...              "ece": 0.02, "raw_ece": 0.05, "mean_width": 0.03, "mean_p0": 0.43,
    ...              "frequency": 0.45, "mean_p1": 0.46, "events": 520})
    'labels    500/520 ev | log loss 0.310 (raw 0.345) | ECE 0.020 (raw 0.050) | width 0.030 | p0 0.430 <= freq 0.450 <= p1 0.460'
    """  # noqa: E501
    return (
        f"labels {line.get('labels', 0):6d}/{line.get('events', 0)} ev"
        f" | log loss {_f(line.get('log_loss'), 3)} (raw {_f(line.get('raw_log_loss'), 3)})"
        f" | ECE {_f(line.get('ece'), 3)} (raw {_f(line.get('raw_ece'), 3)})"
        f" | width {_f(line.get('mean_width'), 3)}"
        f" | p0 {_f(line.get('mean_p0'), 3)} <= freq {_f(line.get('frequency'), 3)}"
        f" <= p1 {_f(line.get('mean_p1'), 3)}"
    )


def summary_table(line: dict) -> str:
    """The raw model against Venn-Abers, from a final metric line.

    >>> print(summary_table({"labels": 10, "log_loss": 0.3, "raw_log_loss": 0.4,
    ...     "square_loss": 0.1, "raw_square_loss": 0.12, "ece": 0.02, "raw_ece": 0.05,
    ...     "mean_width": 0.03}))
                                    raw model  Venn-Abers
    log loss                           0.4000      0.3000
    square loss                        0.1200      0.1000
    calibration error (ECE)            0.0500      0.0200
    mean interval width (p1 - p0)           -      0.0300
    """
    rows = [
        ("log loss", "raw_log_loss", "log_loss"),
        ("square loss", "raw_square_loss", "square_loss"),
        ("calibration error (ECE)", "raw_ece", "ece"),
        ("mean interval width (p1 - p0)", None, "mean_width"),
    ]
    out = [f"{'':30s}{'raw model':>11s}{'Venn-Abers':>12s}"]
    for label, raw, cal in rows:
        raw_v = _f(line.get(raw)) if raw else "-"
        out.append(f"{label:30s}{raw_v:>11s}{_f(line.get(cal)):>12s}")
    return "\n".join(out)


def _print_summary(args, line: dict, counts, elapsed: float, topics: dict) -> None:
    from streamcal.monitoring.report import corollary1_verdict

    missing = counts["event"] - counts["label"]
    print()
    print(f"summary: {args.dataset}, model {args.model}, {line.get('labels')} labelled events")
    print(summary_table(line))
    # The report's verdict, so that the summary and the report never disagree.
    note = corollary1_verdict(line)
    if args.dataset == "drift":
        note += " (the drift stream is not exchangeable: no guarantee)"
    print(
        f"Corollary 1: mean p0 {_f(line.get('mean_p0'))} <= frequency of 1s "
        f"{_f(line.get('frequency'))} <= mean p1 {_f(line.get('mean_p1'))}: {note}"
    )
    rate = line.get("events", 0) / elapsed if elapsed > 0 else float("nan")
    print(
        f"events {line.get('events')}, labels joined {line.get('labels')}, still waiting "
        f"{line.get('pending')} (labels never sent: {missing}), dead letters "
        f"{line.get('dead_letters')}, {elapsed:.1f} s ({rate:.0f} events/s)"
    )
    print(f"predictions: {topics['predictions']}, dead letters: {topics['dead_letters']}")


def read_dead_letters(client_settings: dict, topic: str, n: int, timeout: float = 10.0):
    """The first ``n`` dead-letter records of ``topic`` (decoded JSON), oldest first."""
    import orjson
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**client_settings, enable_auto_commit=False)
    try:
        parts = consumer.partitions_for_topic(topic) or ()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        found: list = []
        deadline = time.monotonic() + timeout
        while len(found) < n and time.monotonic() < deadline:
            for batch in consumer.poll(200).values():
                found.extend(orjson.loads(r.value) for r in batch)
        found.sort(key=lambda d: (d["source"]["timestamp_ms"] or 0, d["source"]["offset"]))
        return found[:n]
    finally:
        consumer.close()


def _show_dead_letters(client_settings: dict, topic: str, n: int, shown: int = 5) -> None:
    letters = read_dead_letters(client_settings, topic, n)
    print(f"dead letters ({len(letters)} of {n} read back from {topic}):")
    for d in letters[:shown]:
        original = d.get("value", d.get("value_base64"))
        print(f"  {d['source']['topic']}@{d['source']['offset']}: {d['reason']}  <- {original!r}")
    if len(letters) > shown:
        print(f"  ... and {len(letters) - shown} more")


def _write_report(args, metrics_path, out_dir) -> None:
    from pathlib import Path

    try:
        from streamcal.monitoring import write_report
    except ImportError:
        print(f"metric log: {metrics_path}")
        return
    try:
        path = write_report(metrics_path, out_dir, title=f"streamcal demo ({args.dataset})")
    except ImportError as exc:  # matplotlib missing
        print(f"metric log: {metrics_path} (no report: {exc})")
        return
    print(f"report: {Path(path).resolve()}")
