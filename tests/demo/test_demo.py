"""`streamcal demo` end to end: against the session broker, and with a broker of its own."""

from __future__ import annotations

import math
import os
import re
import socket

import orjson
import pytest

from streamcal.cli import main
from streamcal.demo.replay import demo_records, replay_counts
from tests._helpers import error_of


def _metric_lines(path):
    return [orjson.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _table_value(out: str, row: str, column: int) -> float:
    """A number from the summary table: column 0 = raw model, 1 = Venn-Abers."""
    line = next(ln for ln in out.splitlines() if ln.startswith(row))
    cells = line[len(row) :].split()
    return float(cells[column])


def test_demo_summary_matches_the_metric_log(kafka_broker, unique_topics, tmp_path, capsys):
    prefix = unique_topics["group"]
    argv = ["demo", "--bootstrap-servers", kafka_broker, "--topic-prefix", prefix,
            "--dataset", "drift", "--events", "400", "--seed", "3", "--label-delay", "10",
            "--missing-labels", "0.05", "--bad-records", "3", "--max-idle-s", "1",
            "--out", str(tmp_path), "--no-report"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out

    # What was sent, recomputed independently (the stream is deterministic given the seed).
    counts = replay_counts(
        demo_records("drift", 400, seed=3, label_delay=10, missing_labels=0.05, bad_records=3)
    )
    lines = _metric_lines(tmp_path / "metrics.jsonl")
    assert len(lines) >= 3  # about ten lines over the run, plus the final one
    final = lines[-1]
    assert final["events"] == final["predictions"] == 400
    assert final["labels"] == counts["label"]  # every label sent was joined
    assert final["pending"] == 400 - counts["label"]  # the missing ones still wait
    assert final["dead_letters"] == 3
    for key in ("log_loss", "raw_log_loss", "square_loss", "raw_square_loss", "ece"):
        assert math.isfinite(final[key]), key
    # Corollary 1 band fields present and ordered as they must be (p0 <= p1 per event).
    assert 0 <= final["mean_p0"] <= final["mean_p1"] <= 1
    assert 0 <= final["frequency"] <= 1
    assert final["mean_width"] == pytest.approx(final["mean_p1"] - final["mean_p0"], abs=1e-9)
    labels_seen = [ln["labels"] for ln in lines]
    assert labels_seen == sorted(labels_seen)

    # The printed summary is the final metric line.
    assert _table_value(out, "log loss", 0) == pytest.approx(final["raw_log_loss"], abs=5e-5)
    assert _table_value(out, "log loss", 1) == pytest.approx(final["log_loss"], abs=5e-5)
    assert _table_value(out, "square loss", 1) == pytest.approx(final["square_loss"], abs=5e-5)
    assert _table_value(out, "calibration error (ECE)", 1) == pytest.approx(final["ece"], abs=5e-5)
    assert f"labels joined {final['labels']}" in out
    assert f"labels never sent: {400 - counts['label']}" in out
    assert "Corollary 1: mean p0" in out
    # Dead letters are read back and shown with their reasons.
    assert "dead letters (3 of 3 read back" in out
    assert len(re.findall(r"^  \S+@\d+: ", out, flags=re.M)) == 3


def test_produce_only_writes_the_stream_for_a_separate_processor(
    kafka_broker, unique_topics, capsys
):
    from kafka import KafkaConsumer, TopicPartition

    prefix = unique_topics["group"]
    argv = ["demo", "--produce-only", "--bootstrap-servers", kafka_broker,
            "--topic-prefix", prefix, "--dataset", "phishing", "--events", "120",
            "--partitions", "2"]  # fmt: skip
    assert main(argv) == 0
    counts = replay_counts(demo_records("phishing", 120))
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker)
    try:
        for role in ("events", "labels"):
            topic = f"{prefix}.{role}"
            parts = consumer.partitions_for_topic(topic)
            assert parts == {0, 1}  # created by the demo with --partitions
            tps = [TopicPartition(topic, p) for p in parts]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            n = 0
            for _ in range(50):
                n += sum(len(b) for b in consumer.poll(100).values())
                if n >= counts[role[:-1]]:
                    break
            assert n == counts[role[:-1]]
    finally:
        consumer.close()
    assert "produced 120 events" in capsys.readouterr().out


@pytest.mark.kafka
@pytest.mark.slow
def test_demo_stops_the_broker_it_started(tmp_path, monkeypatch, capsys):
    from streamcal.demo import broker as broker_mod

    try:
        broker_mod.find_tansu()
    except broker_mod.BrokerError as exc:
        pytest.skip(str(exc))

    started = []

    class RecordingBroker(broker_mod.LocalBroker):
        def start(self):
            started.append(self)
            out = super().start()
            self.seen_pid, self.seen_port = self.pid, self.port
            return out

    monkeypatch.setattr(broker_mod, "LocalBroker", RecordingBroker)
    argv = ["demo", "--events", "80", "--quiet", "--max-idle-s", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert len(started) == 1
    b = started[0]
    assert b.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(b.seen_pid, 0)  # the tansu process is gone (and reaped)
    with socket.socket() as s:
        s.bind((b.host, b.seen_port))  # its port is free again
    final = _metric_lines(tmp_path / "metrics.jsonl")[-1]
    assert final["events"] == 80
    out = capsys.readouterr().out
    assert "summary: phishing" in out
    # an exchangeable stream (shuffled): the alarm reports, has not fired, names no change
    assert "calibration alarm: not fired: log S = " in out and "changes at event" not in out
    report = re.search(r"^report: (.+)$", out, flags=re.M)
    assert report and os.path.isfile(report.group(1))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--produce-only"], "--produce-only needs --bootstrap-servers"),
        (["--missing-labels", "1.5"], "--missing-labels"),
        (["--events", "0"], "--events"),
        (["--bootstrap-servers", "h:1", "--model", "nope", "--wait-for-broker", "0"], "model"),
    ],
)
def test_usage_errors(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", *argv]) == 2
    assert message in error_of(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []  # no output directory left behind


# --- docker-compose.yml (no Docker engine here: check it is valid and matches the CLI) ---

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compose_text() -> str:
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        return f.read()


def _commands(text: str) -> dict:
    """service name -> its `command:` list, read without a YAML parser: each command is a
    JSON-style flow sequence (valid YAML) under a two-space-indented service name."""
    import json

    commands, service = {}, None
    for m in re.finditer(r"^  (\w[\w-]*):\s*$|^    command: (\[.*?\])", text, flags=re.M | re.S):
        if m.group(1):
            service = m.group(1)
        else:
            commands[service] = json.loads(m.group(2))
    return commands


def test_compose_commands_parse_with_the_cli():
    from streamcal.cli import build_parser

    commands = _commands(_compose_text())
    assert set(commands) == {"topics", "processor", "calibrator", "producer"}
    parser = build_parser()
    run = parser.parse_args(commands["processor"][1:])
    assert run.command == "run" and run.bootstrap_servers == "kafka:9092"
    demo = parser.parse_args(commands["producer"][1:])
    assert demo.command == "demo" and demo.produce_only and demo.bootstrap_servers == "kafka:9092"
    # The producer writes where the processor reads.
    prefix = demo.topic_prefix
    assert (run.events_topic, run.labels_topic) == (f"{prefix}.events", f"{prefix}.labels")
    assert run.dead_letter_topic == f"{prefix}.dead-letters"
    # The processor's settings are valid (the checkpoint key comes from the environment).
    from streamcal.stream.config import ProcessorConfig

    env = {"STREAMCAL_CHECKPOINT_KEY": "x" * 32}
    cfg = ProcessorConfig.from_sources(vars(run), env=env)
    assert cfg.state_dir == "/state" and cfg.metrics_port == 9464
    assert cfg.exactly_once  # it shows the setting (the broker's transaction log allows it)
    # The scaled-out replicas: --scope partition over the same input, in their own group.
    scaled = parser.parse_args(commands["calibrator"][1:])
    cfg = ProcessorConfig.from_sources(vars(scaled), env=env)
    assert cfg.scope == "partition" and cfg.group_id != run.group_id
    assert (cfg.events_topic, cfg.labels_topic) == (run.events_topic, run.labels_topic)
    assert cfg.predictions_topic != run.predictions_topic
    # The topics service makes the inputs co-partitioned and the state topic compacted.
    script = commands["topics"][-1]
    assert "streamcal.events streamcal.labels" in script and "--partitions 6" in script
    assert f"--topic {cfg.state_topic} " in script and "cleanup.policy=compact" in script


def test_compose_file_structure():
    text = _compose_text()
    assert "\t" not in text
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(text)
    services = doc["services"]
    assert set(services) == {"kafka", "topics", "processor", "calibrator", "producer",
                             "prometheus", "grafana"}  # fmt: skip
    assert services["calibrator"]["profiles"] == ["scale"]
    assert services["calibrator"]["deploy"]["replicas"] == 3
    # A bounded restart policy: unless-stopped would restart exit status 4 (input lost)
    # forever (docs/processor.md, "What a supervisor does with exit status 4").
    for name in ("processor", "calibrator"):
        assert re.fullmatch(r"on-failure:[1-9]", services[name]["restart"]), name
    assert services["kafka"]["image"].startswith("apache/kafka:")
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, one node
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    for name in ("processor", "calibrator", "producer"):
        svc = services[name]
        assert svc["build"] == "." and svc["image"] == "streamcal:local"
        assert svc["depends_on"]["topics"]["condition"] == "service_completed_successfully"
        assert svc["command"] == _commands(text)[name]  # the regex reader agrees with YAML
    assert set(doc["volumes"]) >= {"streamcal-state"}
    assert os.path.isfile(os.path.join(ROOT, "Dockerfile"))
    # Prometheus and Grafana get the shipped rules, configuration and dashboard.
    for name in ("prometheus", "grafana"):
        for mount in services[name]["volumes"]:
            source = mount.split(":")[0]
            if source.startswith("./"):
                assert os.path.exists(os.path.join(ROOT, source)), (name, source)
    prometheus_config = yaml.safe_load(
        open(os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")).read()
    )
    targets = prometheus_config["scrape_configs"][0]["static_configs"][0]["targets"]
    port = _commands(text)["processor"][_commands(text)["processor"].index("--metrics-port") + 1]
    assert targets == [f"processor:{port}"]
