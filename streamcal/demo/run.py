"""``run_demo``: the whole pipeline on one machine in under a minute.

Starts a local Kafka-compatible broker (``LocalBroker``) unless ``bootstrap_servers`` is
given, creates the topics, replays a data set as events with labels arriving late (and a
few never), runs the stream processor in this process with a progress bar and metric
lines, prints a summary table (raw model vs Venn-Abers) and writes the HTML report.
``produce_only`` just writes the demo stream into a broker for a separately running
``streamcal run``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from streamcal.demo.datasets import DATASETS
from streamcal.errors import ConfigurationError
from streamcal.stream.models import DEFAULT_MODEL

__all__ = ["DemoError", "DemoOptions", "run_demo"]


class DemoError(ConfigurationError):
    """A bad option, or a broker that does not answer: one line for the user."""


@dataclass(frozen=True)
class DemoOptions:
    """What ``streamcal demo`` does (its flags, one field each)."""

    # --- broker ---
    bootstrap_servers: str | None = None  # None: start a local broker
    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    topic_prefix: str | None = None  # None: streamcal, or a fresh one on a given broker
    partitions: int = 1
    wait_for_broker: float = 60.0
    # --- stream ---
    dataset: str = DATASETS[0]
    events: int | None = None  # None: the whole data set
    seed: int = 0
    label_delay: float = 20
    missing_labels: float = 0.02
    bad_records: int = 0
    produce_only: bool = False
    # --- processor ---
    model: str = DEFAULT_MODEL
    mode: str | None = None  # None: the learner's
    out: str = "streamcal-demo"
    report: bool = True
    state_dir: str | None = None  # None: a temporary one
    max_idle_s: float = 2.0
    quiet: bool = False


def run_demo(opts: DemoOptions) -> dict | None:
    """Run the demo; return the final metric line (None with ``produce_only``).

    Raises ``DemoError`` for bad options or an unreachable broker, and ``BrokerError``
    if the local broker cannot start.
    """
    if opts.bootstrap_servers:
        return _demo(opts, opts.bootstrap_servers, own_broker=False)

    from streamcal.demo import broker as local

    broker = local.LocalBroker()
    broker.start()
    try:
        _say(opts, f"started a local broker (tansu) on {broker.bootstrap_servers}")
        return _demo(opts, broker.bootstrap_servers, own_broker=True)
    finally:
        broker.stop()
        _say(opts, "stopped the local broker")


def _say(opts: DemoOptions, text: str) -> None:
    if not opts.quiet:
        print(text, flush=True)


def _topics(opts: DemoOptions, own_broker: bool) -> dict:
    prefix = opts.topic_prefix
    if prefix is None:
        if own_broker or opts.produce_only:
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


def _config(opts, bootstrap: str, topics: dict, state_dir, metrics_path, metrics_every: int):
    import secrets

    from streamcal.stream.config import ProcessorConfig

    settings = dict(
        bootstrap_servers=bootstrap,
        security_protocol=opts.security_protocol,
        ssl_cafile=opts.ssl_cafile,
        client_id="streamcal-demo",
        group_id=topics["events"].rsplit(".", 1)[0],
        events_topic=topics["events"],
        labels_topic=topics["labels"],
        predictions_topic=topics["predictions"],
        dead_letter_topic=topics["dead_letters"],
        model=opts.model,
        mode=opts.mode,
        metrics_file=str(metrics_path) if metrics_path else "none",
        metrics_every=metrics_every,
        state_dir=state_dir,
        # The state lives in a throwaway directory: a random key is enough.
        checkpoint_key=secrets.token_hex(16) if state_dir else None,
    )
    try:
        return ProcessorConfig.build(**{k: v for k, v in settings.items() if v is not None})
    except ValueError as exc:
        raise DemoError(str(exc)) from None


def _wait_for_broker(settings: dict, timeout: float) -> None:
    from streamcal.stream.kafka import clients
    from streamcal.stream.kafka.port import KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            clients.consumer(settings, request_timeout_ms=5000).close()
            return
        except KafkaError as exc:
            if time.monotonic() >= deadline:
                raise DemoError(
                    f"no Kafka broker answered at {settings['bootstrap_servers']} "
                    f"within {timeout:g} s ({type(exc).__name__})"
                ) from None
            time.sleep(1.0)


def _demo(opts: DemoOptions, bootstrap: str, own_broker: bool) -> dict | None:
    import tempfile
    from pathlib import Path

    from streamcal.demo.datasets import change_event
    from streamcal.demo.replay import (
        demo_records,
        ensure_topics,
        first_label_from,
        replay,
        replay_counts,
    )
    from streamcal.stream.kafka import clients

    topics = _topics(opts, own_broker)
    out_dir = None if opts.produce_only else Path(opts.out)
    metrics_path = None if out_dir is None else out_dir / "metrics.jsonl"

    with tempfile.TemporaryDirectory(prefix="streamcal-demo-state-") as tmp_state:
        state_dir = None if opts.produce_only else (opts.state_dir or tmp_state)
        shape = ("seed", "label_delay", "missing_labels", "bad_records")
        try:
            records = demo_records(
                opts.dataset, opts.events, **{k: getattr(opts, k) for k in shape}
            )
        except ValueError as exc:
            raise DemoError(str(exc)) from None
        counts = replay_counts(records)
        event = change_event(opts.dataset, counts["event"])
        label = None if event is None else first_label_from(records, event)
        change = None if label is None else (event, label)
        # About a hundred lines in the metric log (smooth report curves); about ten of
        # them are printed.
        every = max(10, counts["label"] // 100)
        config = _config(
            opts,
            bootstrap,
            topics=topics,
            state_dir=state_dir,
            metrics_path=metrics_path,
            metrics_every=every,
        )
        client = config.kafka_client_settings()
        if not own_broker:
            _wait_for_broker(client, opts.wait_for_broker)
        ensure_topics(client, topics.values(), partitions=opts.partitions)
        t0 = time.monotonic()
        producer = clients.producer({**client, "linger_ms": 20, "acks": "all"})
        try:
            replay(producer, records, topics)
        finally:
            producer.close()
        bad = counts["bad-event"] + counts["bad-label"]
        _say(
            opts,
            f"produced {counts['event']} events and {counts['label']} labels "
            f"({counts['event'] - counts['label']} missing, {bad} malformed) to "
            f"{topics['events']} / {topics['labels']} in {time.monotonic() - t0:.1f} s",
        )
        if opts.produce_only:
            return None
        out_dir.mkdir(parents=True, exist_ok=True)
        metrics_path.unlink(missing_ok=True)  # the processor appends: start a fresh log

        final, elapsed, steady = _process(opts, config, counts["event"])

    _print_summary(
        opts, final, counts=counts, elapsed=elapsed, topics=topics, client=client, steady=steady,
        change=change,
    )  # fmt: skip
    if not opts.report:
        print(f"metric log: {metrics_path}")
    else:
        _write_report(opts, metrics_path, out_dir)
    return final


def _process(opts: DemoOptions, config, n_events: int):
    from tqdm import tqdm

    from streamcal.demo.text import Throughput, metric_text
    from streamcal.stream.processor import Processor
    from streamcal.stream.state.checkpoint import CheckpointError

    try:
        processor = Processor(config)
    except (ValueError, CheckpointError) as exc:
        raise DemoError(str(exc)) from None
    bar = tqdm(
        total=n_events, unit="ev", desc="processing", disable=opts.quiet, file=sys.stderr,
        leave=False,
    )  # fmt: skip

    print_every = max(50, n_events // 10)
    printed = [0]  # labels at the last printed line
    throughput = Throughput()

    def on_metrics(line: dict) -> None:
        throughput.mark(line.get("events", 0))
        if opts.quiet:
            return
        progress(line.get("events", 0))
        labels = line.get("labels", 0)
        if labels - printed[0] >= print_every or labels >= n_events:
            printed[0] = labels
            bar.write(metric_text(line), file=sys.stdout)

    def progress(n: int) -> None:
        throughput.mark(n)
        bar.update(max(0, min(n, n_events) - bar.n))

    t0 = time.monotonic()
    try:
        final = processor.run(max_idle_s=opts.max_idle_s, on_metrics=on_metrics, progress=progress)
    finally:
        bar.close()
    return final, time.monotonic() - t0 - opts.max_idle_s, throughput.steady()


def _print_summary(opts, line: dict, counts, elapsed: float, topics: dict, client, steady,
                   change=None) -> None:  # fmt: skip
    from streamcal.demo.text import dead_letters_text, summary_text

    missing = counts["event"] - counts["label"]
    text = summary_text(
        line, opts.dataset, opts.model, missing=missing, elapsed=elapsed, topics=topics,
        steady=steady, change=change,
    )
    print(text)
    n = line.get("dead_letters")
    if n and not opts.quiet:
        from streamcal.demo.dead_letters import read_dead_letters

        letters = read_dead_letters(client, topics["dead_letters"], n)
        print(dead_letters_text(letters, n, topics["dead_letters"]))


def _write_report(opts: DemoOptions, metrics_path, out_dir) -> None:
    from pathlib import Path

    try:
        from streamcal.monitoring import write_report
    except ImportError:
        print(f"metric log: {metrics_path}")
        return
    try:
        path = write_report(metrics_path, out_dir, title=f"streamcal demo ({opts.dataset})")
    except ImportError as exc:  # matplotlib missing
        print(f"metric log: {metrics_path} (no report: {exc})")
        return
    print(f"report: {Path(path).resolve()}")
