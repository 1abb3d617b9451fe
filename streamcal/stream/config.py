"""Settings of the stream processor: one dataclass, filled from flags, environment and TOML.

Every setting has one name used everywhere: the field ``events_topic`` is the flag
``--events-topic``, the environment variable ``STREAMCAL_EVENTS_TOPIC`` and the TOML key
``events_topic`` (or ``events-topic``; top level or in a ``[run]`` table). Precedence:
flag > environment > TOML file > default.

>>> cfg = ProcessorConfig.from_sources({"model": "gnb"}, env={"STREAMCAL_MODE": "sva"})
>>> cfg.model, cfg.mode, cfg.events_topic
('gnb', 'sva', 'streamcal.events')
>>> ProcessorConfig.from_sources({"dedupe_window": 0})
Traceback (most recent call last):
...
ValueError: dedupe_window must be >= 1, got 0
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streamcal.learner.modes import MODES
from streamcal.learner.settings import (
    DEFAULT_ALARM_ALPHA,
    DEFAULT_MAX_CATEGORIES,
    DEFAULT_MERGE,
    MONDRIAN_SETTINGS,
    ClassifierSettings,
)
from streamcal.learner.settings import FIELDS as CLASSIFIER_SETTINGS
from streamcal.stream.durations import parse_duration
from streamcal.stream.models import (
    BINARY_ONLY,
    DEFAULT_MODEL,
    SCORE_PREFIX,
    check_model_spec,
    describe_presets,
)

__all__ = [
    "GUARANTEES",
    "LOST_INPUT_POLICIES",
    "ProcessorConfig",
    "ENV_PREFIX",
    "SETTINGS",
    "parse_duration",
    "parse_size",
    "protect_setting",
    "resolved_scheme",
    "settings_of",
]

ENV_PREFIX = "STREAMCAL_"

# Sized for days of delay: at 330 bytes per waiting prediction (20 numeric features) 16 GiB
# hold 5.2e7 predictions, one day at 600 events/s. What waits is on disk (the memory is the
# store's cache), so the bound is the disk space the operator gives it.
DEFAULT_PENDING_BYTES = 16 << 30
DEFAULT_LABEL_WAIT_BYTES = 1 << 30
# The merge's grace (docs/ordering.md, docs/performance.md: measured with benchmarks/grace.py).
DEFAULT_GRACE_MS = 100
_SIZE_SUFFIXES = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "kib": 1 << 10, "m": 1 << 20,
                  "mb": 10**6, "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30,
                  "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}  # fmt: skip

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TASKS = ("binary", "multiclass")
LOST_INPUT_POLICIES = ("stop", "continue")  # --on-lost-input (streamcal.stream.kafka.ordering)
# --processing-guarantee, the names quixstreams uses (streamcal.stream.exactly_once)
GUARANTEES = ("at-least-once", "exactly-once")


def _opt(default, help: str, group: str, secret: bool = False, flag: bool = True,
         duration: bool = False):  # fmt: skip
    return field(
        default=default,
        metadata={"help": help, "group": group, "secret": secret, "flag": flag,
                  "duration": duration},  # fmt: skip
    )


@dataclass(frozen=True)
class ProcessorConfig:
    """All settings of ``streamcal run`` (see ``streamcal run --help``)."""

    # --- Kafka ---
    bootstrap_servers: str = _opt(
        "127.0.0.1:9092", "Kafka bootstrap servers, host:port[,...]", "kafka"
    )
    group_id: str = _opt(
        "streamcal",
        "consumer group: with --scope partition the instances sharing the units; with "
        "--scope global the one instance (a second is refused); offsets are committed to it "
        "for lag monitoring (each unit resumes from its checkpoint)",
        "kafka",
    )
    client_id: str = _opt("streamcal", "Kafka client id", "kafka")
    scope: str = _opt(
        "global",
        "unit of calibration: global (one calibrator over all partitions, one instance per "
        "group) or partition (one per partition number of the co-partitioned events and "
        "labels topics; instances of a group share the partitions)",
        "kafka",
    )
    instance_id: str | None = _opt(
        None, "this instance's name in metric lines (default: host:pid)", "kafka"
    )
    session_timeout_ms: int = _opt(
        6000, "consumer-group session timeout: how soon a dead instance is noticed", "kafka"
    )
    global_lock: bool = _opt(
        True,
        "with --scope global, join the group first and refuse to run if another instance "
        "is in it (no two global calibrators)",
        "kafka",
    )
    security_protocol: str = _opt("PLAINTEXT", "one of " + ", ".join(_SECURITY_PROTOCOLS), "kafka")
    sasl_mechanism: str | None = _opt(None, "SASL mechanism, e.g. PLAIN or SCRAM-SHA-256", "kafka")
    sasl_username: str | None = _opt(None, "SASL user name", "kafka")
    sasl_password: str | None = _opt(
        None, "SASL password (prefer the environment variable)", "kafka", secret=True
    )
    ssl_cafile: str | None = _opt(None, "CA certificate file (PEM) for TLS", "kafka")
    ssl_certfile: str | None = _opt(None, "client certificate file (PEM) for TLS", "kafka")
    ssl_keyfile: str | None = _opt(None, "client private key file (PEM) for TLS", "kafka")
    ssl_check_hostname: bool = _opt(
        True, "check the broker's host name against its certificate", "kafka"
    )

    # --- topics and message fields ---
    events_topic: str = _opt("streamcal.events", "input topic of events", "topics")
    labels_topic: str = _opt("streamcal.labels", "input topic of labels", "topics")
    predictions_topic: str = _opt("streamcal.predictions", "output topic of predictions", "topics")
    dead_letter_topic: str = _opt(
        "streamcal.dead-letters", "output topic of rejected input", "topics"
    )
    metrics_topic: str | None = _opt(
        None, "output topic of metric lines (off unless set)", "topics"
    )
    id_field: str = _opt("id", "JSON field holding the event id (events and labels)", "topics")
    features_field: str = _opt("features", "JSON field holding the features object", "topics")
    label_field: str = _opt("label", "JSON field holding the label (0/1 or true/false)", "topics")
    timestamp_field: str = _opt(
        "ts", "optional JSON field holding the event time (unix s)", "topics"
    )
    max_message_bytes: int = _opt(
        1_048_576,
        "input records whose key and value exceed this many bytes are dead-lettered "
        "(Kafka's default message limit)",
        "topics",
    )
    max_features: int = _opt(1000, "events with more features are dead-lettered", "topics")
    max_string_length: int = _opt(
        1024,
        "ids and feature names (name=value for string features) longer than this many "
        "characters are dead-lettered",
        "topics",
    )
    max_future_s: float = _opt(
        86400.0,
        "records whose timestamp is more than this many seconds ahead of the wall clock "
        "are dead-lettered (they would advance the record-time clock)",
        "topics",
    )

    # --- model ---
    model: str = _opt(
        DEFAULT_MODEL,
        f"scoring model: {describe_presets()}, module:function returning a river classifier, "
        "or score:FIELD to calibrate a probability an upstream model put in the feature "
        "FIELD of each event (it must not learn from these labels; see docs/processor.md)",
        "model",
    )
    mode: str | None = _opt(
        None, f"Venn-Abers mode: {', '.join(MODES)} (default: the learner's)", "model"
    )
    window: int | None = _opt(None, "calibration window (default: the learner's)", "model")
    merge: str = _opt(DEFAULT_MERGE, "merge of (p0, p1) used as p: log, square or mean", "model")
    refresh_every: int | None = _opt(
        None,
        "rescore the calibration set every this many labels (pretrained: refresh batch; "
        "sva: rescoring period; not for va; default: the learner's)",
        "model",
    )
    by: str | None = _opt(
        None,
        "Mondrian calibration: one calibration set per value of this field of an event (a "
        "feature, or else a top-level field; missing: the category null), one shared model",
        "model",
    )
    min_category: int | None = _opt(
        None,
        "with --by (mode pretrained): categories with fewer calibration pairs are answered "
        "from the pooled set, with only the pooled guarantee (default: 100, or --window "
        "if smaller)",
        "model",
    )
    fallback: str | None = _opt(
        None,
        "with --by: 'pooled' (the default in mode pretrained: categories without a state "
        "or below --min-category are answered from all categories' pairs) or 'off'",
        "model",
    )
    max_categories: int | None = _opt(
        None,
        "with --by: at most this many categories keep a calibration set, least recently "
        f"labelled evicted (default {DEFAULT_MAX_CATEGORIES})",
        "model",
    )

    task: str = _opt(
        "binary",
        "binary (labels 0/1 or true/false) or multiclass (labels are class names: strings "
        "or integers; each prediction carries a probability per class, the predicted "
        "class with its Venn-Abers pair and, with scheme one-vs-rest, a pair per class; "
        "mode pretrained only; the alarm but no p_protected; see docs/processor.md)",
        "model",
    )
    scheme: str | None = _opt(
        None,
        "with --task multiclass: one-vs-rest, one-vs-one or top-label (default: the "
        "learner's, one-vs-rest)",
        "model",
    )
    max_classes: int = _opt(
        100,
        "with --task multiclass: a label that would be a class beyond this many is "
        "dead-lettered (one-vs-one keeps K(K-1)/2 stores)",
        "model",
    )
    protect: bool = _opt(
        True,
        "protected calibration (binary): each prediction also carries p_protected (a "
        "recalibration of p learned online, at most ln 2 worse than p in cumulative log "
        "loss, recovering from a shift in tens of labels) and the metric lines what it "
        "gained. On by default: p itself is unchanged. Runs with the alarm (--alarm); "
        "--no-protect keeps the alarm alone",
        "model",
    )
    alarm: bool = _opt(
        True,
        "the calibration alarm: a conformal test martingale against exchangeability of "
        "the labelled stream (the assumption p's guarantee rests on) in the metric lines, "
        "which fires with probability at most --alarm-alpha on an exchangeable stream, "
        "whatever the model (docs/alerts.md); every task and mode, one per unit and per "
        "category. On by default: it changes no prediction and costs a few microseconds "
        "per label (one model score more in modes sva and va). --no-alarm needs "
        "--no-protect; both give the outputs of releases before them",
        "model",
    )
    alarm_alpha: float = _opt(
        DEFAULT_ALARM_ALPHA,
        "the alarm's level: it fires when its test martingale reaches 1/alarm_alpha "
        "(false-alarm probability at most alarm_alpha, per unit and per category)",
        "model",
    )

    # --- joining events and labels (times are record times, in seconds) ---
    pending_ttl: float = _opt(
        86400.0,
        "an event waits at most this long (record time, s) for its label",
        "join",
        duration=True,
    )
    pending_max_bytes: int = _opt(
        DEFAULT_PENDING_BYTES,
        "events waiting for their labels take at most this many bytes on disk (suffixes "
        "KiB, MiB, GiB); beyond it the oldest leaves first, counted as evicted (see "
        "docs/deploy.md for sizing: label delay x event rate x bytes per prediction)",
        "join",
    )
    pending_max: int | None = _opt(
        None, "optionally, at most this many events wait for labels (off by default)", "join"
    )
    label_wait: float = _opt(
        300.0,
        "a label that arrives before its event waits this long (record time, s)",
        "join",
        duration=True,
    )
    label_wait_max_bytes: int = _opt(
        DEFAULT_LABEL_WAIT_BYTES,
        "labels waiting for their events take at most this many bytes on disk (their "
        "records are kept whole, for the dead letter); beyond it the oldest leaves first, "
        "dead-lettered and counted as lost",
        "join",
    )
    label_wait_max: int | None = _opt(
        None, "optionally, at most this many labels wait for their events (off by default)",
        "join",
    )
    label_horizon: float | None = _opt(
        None,
        "label maturity: an event's label (whenever it came) is learned and tracked only "
        "once the event is this old (record time; 30s, 15m, 2h, 7d or seconds), in event "
        "order, so that labels whose delay depends on the outcome do not bias the "
        "calibration (docs/processor.md); at most --pending-ttl. Off by default",
        "join",
        duration=True,
    )
    label_default: str | None = _opt(
        None,
        "with --label-horizon: the label of an event that has none at the horizon (binary "
        "0/1/true/false, multiclass a class name), e.g. 0 for 'no chargeback'; without it "
        "such an event expires",
        "join",
    )
    late_labels: str = _opt(
        "dead-letter",
        "with --label-horizon, a label that comes after its event matured: dead-letter "
        "(counted in labels_late; learning it would bring back the outcome-dependent order "
        "the horizon removes) or learn (an event without a label and without "
        "--label-default keeps waiting until --pending-ttl, and its label is learned when "
        "it comes, counted in labels_late)",
        "join",
    )
    dedupe_window: int = _opt(
        1_000_000, "remember this many finished ids to reject duplicate events and labels", "join"
    )
    merge_wait: float = _opt(
        5.0,
        "at most this many wall-clock seconds to wait for a partition that has unread data "
        "before processing others (the deterministic merge's bound)",
        "join",
    )
    grace_ms: int = _opt(
        DEFAULT_GRACE_MS,
        "live input: a record also waits until every partition of its unit has shown a "
        "record after it, at most this many milliseconds after it was read, so that records "
        "made readable slightly out of order across partitions still take their place (0: "
        "off; a partition that shows nothing costs each record the whole grace; see "
        "docs/ordering.md)",
        "join",
    )

    # --- metrics ---
    metrics_file: str | None = _opt(
        "-", "metric lines go here ('-' = stdout, 'none' = off)", "metrics"
    )
    metrics_every: int = _opt(1000, "write a metric line every this many labels", "metrics")
    metrics_interval: float = _opt(10.0, "... and at least every this many seconds", "metrics")
    tracker_window: int = _opt(1000, "labels in the 'recent' metrics", "metrics")
    tracker_bins: int = _opt(10, "bins of the calibration-error estimate", "metrics")
    top_k: int = _opt(
        10, "with --by: per-category metric lines for this many categories by volume", "metrics"
    )
    metrics_port: int | None = _opt(None, "serve Prometheus metrics on this port", "metrics")
    metrics_addr: str = _opt("127.0.0.1", "address of the Prometheus endpoint", "metrics")

    # --- state ---
    state_dir: str | None = _opt(
        None, "directory of checkpoints (none: no recovery, restart replays the topics)", "state"
    )
    checkpoint_interval: float = _opt(
        1.0,
        "seconds between checkpoints (sooner for a unit with 40,000 writes waiting, so that "
        "a commit stays short): outputs flushed, then one atomic commit of each changed "
        "unit's store (what changed since the last checkpoint, with the unit's small "
        "snapshot and offsets), its changes to the state topic, offsets committed",
        "state",
    )
    processing_guarantee: str = _opt(
        "at-least-once",
        "at-least-once (after a crash the outputs since the last checkpoint are produced "
        "again, with identical values) or exactly-once (each checkpoint interval's outputs, "
        "state-topic records and input offsets in one Kafka transaction, inputs read "
        "read_committed: readers must read with isolation.level=read_committed, and see "
        "outputs once their interval is committed)",
        "state",
    )
    snapshot_interval: float = _opt(
        30.0,
        "with a state topic, a unit's snapshot goes to it at most this often (its changes go "
        "at every checkpoint); a unit that moves resumes from the newest snapshot and "
        "replays the input after it",
        "state",
    )
    checkpoint_keep: int = _opt(3, "checkpoints kept in the state directory", "state")
    checkpoint_key_file: str | None = _opt(
        None,
        "file holding the checkpoint HMAC key (outside the state dir); "
        "or set STREAMCAL_CHECKPOINT_KEY",
        "state",
    )
    checkpoint_key: str | None = _opt(
        None, "checkpoint HMAC key (environment only)", "state", secret=True, flag=False
    )
    state_topic: str | None = _opt(
        "streamcal.state",
        "with --scope partition, each unit's checkpoint also goes to this topic (keyed by "
        "group and unit) and an instance without a local checkpoint restores from it "
        "('none': off)",
        "state",
    )
    state_chunk_bytes: int = _opt(
        512 * 1024, "state-topic records carry checkpoints in chunks of at most this size", "state"
    )
    state_memory_bytes: int = _opt(
        256 << 20,
        "memory of the state stores of all units together (RocksDB's block cache, with the "
        "index and filter blocks and the memtables charged to it; suffixes KiB, MiB, GiB): "
        "see docs/processor.md for what the process takes beside it",
        "state",
    )

    # --- throughput ---
    poll_max_records: int = _opt(2000, "records per consumer poll", "kafka")
    linger_ms: int = _opt(5, "producer linger (ms)", "kafka")
    compression_type: str = _opt(
        "none",
        "compression of the outputs (predictions, dead letters, metrics): " + ", ".join(_CODECS),
        "kafka",
    )
    on_lost_input: str = _opt(
        "stop",
        "when the broker's log no longer holds a partition's position (a broker that lost "
        "its data, an unclean leader election, a topic deleted and recreated, retention): "
        "stop (with an error naming it) or continue (from what the log holds, counted in "
        "lost_input and skipped_offsets, with a dead letter giving the offsets)",
        "kafka",
    )
    skip_unreadable: bool = _opt(
        False,
        "skip an input record batch that cannot be read (codec not installed, corrupt) and "
        "dead-letter its offset range; off: stop with an error naming it",
        "kafka",
    )
    producer_process: bool = _opt(
        True,
        "produce outputs from a child process that owns the Kafka producer (a second CPU "
        "core does kafka-python's per-record work); off: from the processor's own thread",
        "kafka",
    )
    kafka_client: str = _opt(
        "kafka-python",
        "the Kafka client: kafka-python, or librdkafka (confluent-kafka, the extra "
        "streamcal-va[librdkafka]: less CPU per event, its producer in the processor's "
        "process)",
        "kafka",
    )

    # ------------------------------------------------------------------
    @classmethod
    def from_sources(
        cls,
        cli_args: Mapping | None = None,
        env: Mapping[str, str] | None = None,
        toml_path: str | os.PathLike | None = None,
    ) -> ProcessorConfig:
        """Merge flag values (None = not given), ``STREAMCAL_*`` variables and a TOML file.

        ``env`` defaults to ``os.environ``. Raises ``ValueError`` (one line) for bad values.
        """
        env = os.environ if env is None else env
        values: dict = {}
        if toml_path is not None:
            values.update(_read_toml(toml_path))
        for f in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = _parse(f, raw, f"${ENV_PREFIX}{f.name.upper()}")
        for name, value in (cli_args or {}).items():
            if value is not None and name in _FIELDS:
                values[name] = value
        return cls.build(**values)

    @classmethod
    def build(cls, **values) -> ProcessorConfig:
        """Construct and validate; string values are converted to the field's type."""
        kwargs = {}
        for name, value in values.items():
            if name not in _FIELDS:
                raise ValueError(f"unknown setting {name!r}")
            f = _FIELDS[name]
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            kwargs[name] = _parse(f, value, name) if isinstance(value, str) else value
        cfg = cls(**kwargs)
        cfg.validate()
        return cfg

    def classifier_settings(self) -> ClassifierSettings:
        """The classifier's settings: those given here, its defaults for the others (None);
        ``protect`` from ``--protect``, ``--alarm`` and ``--alarm-alpha``
        (``protect_setting``)."""
        return settings_of({k: getattr(self, k)
                            for k in (*CLASSIFIER_SETTINGS, "alarm", "alarm_alpha")})  # fmt: skip

    def protect_params(self) -> dict | None:
        """The classifier's ``protect`` parameters, or None (neither protection nor the
        alarm).

        >>> ProcessorConfig().protect_params()
        {'alpha': 0.01, 'lookup': False}
        >>> ProcessorConfig(protect=False).protect_params()
        {'alpha': 0.01, 'lookup': False, 'recalibrate': False}
        >>> ProcessorConfig(protect=False, alarm=False).protect_params() is None
        True
        """
        return protect_setting(self.protect, self.alarm, self.alarm_alpha) or None

    def validate(self) -> None:
        """Raise ``ValueError`` with a one-line message naming the bad setting."""
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                if not _optional(f):
                    raise ValueError(f"{f.name} must be set")
                continue
            want = _base_type(f)
            if want is float and isinstance(v, int) and not isinstance(v, bool):
                continue
            if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                raise ValueError(f"{f.name} must be a {want.__name__}, got {v!r}")
            if want is str and f.name not in ("metrics_file",) and not v.strip():
                raise ValueError(f"{f.name} must not be empty")
        for name in ("pending_max", "label_wait_max"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (or none: off), got {getattr(self, name)}")
        for name in (
            "pending_max_bytes",
            "label_wait_max_bytes",
            "dedupe_window",
            "metrics_every",
            "tracker_window",
            "tracker_bins",
            "top_k",
            "checkpoint_keep",
            "poll_max_records",
            "session_timeout_ms",
            "state_chunk_bytes",
            "max_message_bytes",
            "max_features",
            "max_string_length",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("linger_ms", "grace_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.processing_guarantee not in GUARANTEES:
            raise ValueError(
                f"processing_guarantee must be one of {', '.join(GUARANTEES)}, "
                f"got {self.processing_guarantee!r}"
            )
        if self.on_lost_input not in LOST_INPUT_POLICIES:
            raise ValueError(
                f"on_lost_input must be one of {', '.join(LOST_INPUT_POLICIES)}, "
                f"got {self.on_lost_input!r}"
            )
        for name in (
            "pending_ttl",
            "label_wait",
            "merge_wait",
            "metrics_interval",
            "checkpoint_interval",
            "snapshot_interval",
            "max_future_s",
        ):
            v = getattr(self, name)
            if not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metrics_port must be in 0..65535, got {self.metrics_port}")
        if self.scope not in ("global", "partition"):
            raise ValueError(f"scope must be global or partition, got {self.scope!r}")
        if (
            self.scope == "partition"
            and self.state_topic
            and self.checkpoint_key is None
            and (self.checkpoint_key_file is None)
        ):
            raise ValueError(
                "scope partition with a state topic needs a checkpoint key: set "
                "STREAMCAL_CHECKPOINT_KEY or --checkpoint-key-file (or --state-topic none)"
            )
        inputs = {self.events_topic, self.labels_topic}
        if len(inputs) < 2:
            raise ValueError("events_topic and labels_topic must differ")
        outputs = [self.predictions_topic, self.dead_letter_topic, self.metrics_topic]
        if self.scope == "partition":
            outputs.append(self.state_topic)
        for out in outputs:
            if out in inputs:
                raise ValueError(f"output topic {out!r} is also an input topic")
        if self.by is None:  # given without by they would do nothing: say so
            for name in MONDRIAN_SETTINGS[1:]:
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} needs by (Mondrian calibration)")
        self.classifier_settings()  # the classifier's own rules and messages
        self._validate_task()
        from streamcal.stream.horizon import check_settings

        check_settings(self)  # --label-horizon, --label-default, --late-labels
        if not 0.0 < self.alarm_alpha < 1.0:  # also when off: a typo fails now, not later
            raise ValueError(f"alarm_alpha must be in (0, 1), got {self.alarm_alpha!r}")
        if self.protect and not self.alarm and self.task == "binary":
            raise ValueError(
                "protect runs with the alarm: --no-alarm needs --no-protect (the alarm "
                "alone is --no-protect)"
            )
        if self.compression_type not in _CODECS:
            raise ValueError(
                f"compression_type must be one of {', '.join(_CODECS)}; "
                f"got {self.compression_type!r}"
            )
        from streamcal.stream.kafka.adapters import adapter

        client = adapter(self.kafka_client)  # ValueError naming the choices
        if self.compression_type not in ("none", "gzip"):
            if not client.has_codec(self.compression_type):
                raise ValueError(
                    f"compression_type {self.compression_type}: the codec's Python package "
                    "is not installed (python-snappy, lz4 or zstandard; dependencies of "
                    "streamcal-va)"
                )
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(
                f"security_protocol must be one of {', '.join(_SECURITY_PROTOCOLS)}; "
                f"got {self.security_protocol!r}"
            )
        if "SASL" in self.security_protocol:
            if self.sasl_mechanism not in _SASL_MECHANISMS:
                raise ValueError(
                    f"sasl_mechanism must be one of {', '.join(_SASL_MECHANISMS)} with "
                    f"{self.security_protocol}; got {self.sasl_mechanism!r}"
                )
            if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
                self.sasl_username and self.sasl_password
            ):
                raise ValueError(
                    f"sasl_username and sasl_password are needed for {self.sasl_mechanism}"
                )
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{name}: no such file {path!r}")
        if self.checkpoint_key_file is not None:
            key_file = Path(self.checkpoint_key_file)
            if not key_file.is_file():
                raise ValueError(f"checkpoint_key_file: no such file {str(key_file)!r}")
            if self.state_dir is not None and _inside(key_file, Path(self.state_dir)):
                raise ValueError(
                    "checkpoint_key_file must be outside the state directory "
                    "(whoever can write checkpoints must not be able to read the key)"
                )
        if (
            self.state_dir is not None
            and self.checkpoint_key is None
            and self.checkpoint_key_file is None
        ):
            raise ValueError(
                "state_dir needs a checkpoint key: set STREAMCAL_CHECKPOINT_KEY or "
                "--checkpoint-key-file (a file outside the state directory)"
            )
        check_model_spec(self.model)

    def _validate_task(self) -> None:
        """The multiclass settings' rules (``--task``, ``--scheme``, ``--max-classes``)."""
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}")
        if self.max_classes < 2:
            raise ValueError(f"max_classes must be >= 2, got {self.max_classes}")
        if self.task == "binary":
            if self.scheme is not None:
                raise ValueError("scheme needs --task multiclass")
            return
        from streamcal.core.multiclass import scheme_class

        if self.scheme is not None:
            scheme_class(self.scheme)  # ValueError naming the schemes
        if self.mode not in (None, "pretrained"):
            raise ValueError(f"task multiclass offers mode pretrained only, got {self.mode!r}")
        if self.fallback is not None or self.min_category is not None:
            raise ValueError(
                "task multiclass takes neither --fallback nor --min-category (with --by it "
                "answers categories below the default minimum from the pooled set)"
            )
        if self.model in BINARY_ONLY or self.model.startswith(SCORE_PREFIX):
            raise ValueError(
                f"model {self.model!r} is binary only; with --task multiclass use "
                "gnb, hoeffding, softmax or module:function"
            )

    def multiclass_scheme(self) -> str | None:
        """The scheme of ``--task multiclass`` (the learner's default if not given); None
        for binary.

        >>> ProcessorConfig(task="multiclass", model="gnb").multiclass_scheme()
        'one-vs-rest'
        """
        return resolved_scheme(self.task, self.scheme)

    def key_bytes(self) -> bytes | None:
        """The checkpoint HMAC key (from the environment or the key file), or None."""
        if self.checkpoint_key is not None:
            key = self.checkpoint_key.encode()
        elif self.checkpoint_key_file is not None:
            key = Path(self.checkpoint_key_file).read_bytes().strip()
        else:
            return None
        if len(key) < 16:
            raise ValueError("the checkpoint key must be at least 16 bytes long")
        return key

    @property
    def exactly_once(self) -> bool:
        """``--processing-guarantee exactly-once``: outputs and offsets in transactions."""
        return self.processing_guarantee == "exactly-once"

    def kafka_client_settings(self) -> dict:
        """Settings shared by the consumer and the producer (kafka-python names)."""
        out = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism is not None:
            out["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_username is not None:
            out["sasl_plain_username"] = self.sasl_username
        if self.sasl_password is not None:
            out["sasl_plain_password"] = self.sasl_password
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if "SSL" in self.security_protocol:
            out["ssl_check_hostname"] = self.ssl_check_hostname
        return out

    def producer_settings(self) -> dict:
        """Options of the outputs' producer beyond ``kafka_client_settings`` (kafka-python
        names)."""
        codec = self.compression_type
        return {"compression_type": None if codec == "none" else codec}

    def __repr__(self) -> str:  # never print secrets
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.metadata.get("secret") and v is not None:
                v = "***"
            parts.append(f"{f.name}={v!r}")
        return f"ProcessorConfig({', '.join(parts)})"


SETTINGS = dataclasses.fields(ProcessorConfig)
_FIELDS = {f.name: f for f in SETTINGS}


def _optional(f) -> bool:
    return "None" in str(f.type)


def _base_type(f) -> type:
    t = str(f.type).split("|")[0].strip()
    return {"str": str, "int": int, "float": float, "bool": bool}[t]


def _parse(f, raw, where: str):
    """Convert a string (environment, TOML or flag) to the field's type."""
    if not isinstance(raw, str):
        return raw
    want = _base_type(f)
    text = raw.strip()
    if _optional(f) and text.lower() in ("", "none") and f.name != "metrics_file":
        return None
    if f.metadata.get("duration"):
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    try:
        if want is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if want is int:
            if f.name.endswith("_bytes"):
                return parse_size(text)
            return int(text)
        if want is float:
            return float(text)
    except ValueError:
        want_text = "a size (e.g. 512MiB)" if f.name.endswith("_bytes") else want.__name__
        raise ValueError(f"{where}: expected {want_text}, got {raw!r}") from None
    return raw


def parse_size(text: str) -> int:
    """A number of bytes, with an optional suffix (KiB, MiB, GiB, TiB; kB, MB, ...).

    >>> parse_size("16GiB"), parse_size("512 MiB"), parse_size("1e6"), parse_size("2k")
    (17179869184, 536870912, 1000000, 2048)
    """
    body = text.strip()
    number = body.rstrip("bBkKmMgGtTiI ")
    factor = _SIZE_SUFFIXES.get(body[len(number) :].strip().lower())
    if factor is None:
        raise ValueError(f"not a size: {text!r} (use e.g. 512MiB or 16GiB)")
    value = float(number) * factor
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def _read_toml(path) -> dict:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ValueError(f"config file not found: {str(path)!r}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config file {str(path)!r}: {exc}") from None
    if isinstance(data.get("run"), dict):
        data = {**{k: v for k, v in data.items() if k != "run"}, **data["run"]}
    out = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in _FIELDS:
            raise ValueError(f"config file {str(path)!r}: unknown setting {key!r}")
        out[name] = value
    return out


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def resolved_scheme(task, scheme):
    """The multiclass scheme in effect for ``task`` and ``scheme`` as given (None: binary).

    >>> resolved_scheme("multiclass", None), resolved_scheme(None, None)
    ('one-vs-rest', None)
    """
    if task != "multiclass":
        return None
    from streamcal.learner.multiclassifier import DEFAULT_SCHEME

    return scheme or DEFAULT_SCHEME


def protect_setting(protect: bool, alarm: bool, alarm_alpha: float) -> dict | bool:
    """The classifier's ``protect`` for ``--protect``, ``--alarm`` and ``--alarm-alpha``:
    protection and the alarm, the alarm alone (``"recalibrate": False``: p_protected is p,
    no protector runs), or neither. The library's protection always runs its alarm.

    The processor keeps every pending prediction's p and passes it back with the label,
    so the classifier need not remember them (``"lookup": False``: no feature key and no
    table entry per prediction, and no table in the checkpoint).

    >>> protect_setting(True, True, 0.05), protect_setting(False, False, 0.05)
    ({'alpha': 0.05, 'lookup': False}, False)
    >>> protect_setting(False, True, 0.05)
    {'alpha': 0.05, 'lookup': False, 'recalibrate': False}
    """
    if not (protect or alarm):
        return False
    return {"alpha": alarm_alpha, "lookup": False, **({} if protect else {"recalibrate": False})}


def settings_of(values: Mapping) -> ClassifierSettings:
    """The classifier's settings for the processor's ``values`` as given (None: not
    given), e.g. a checkpoint's fingerprint: ``protect`` and ``alarm`` are the flags,
    ``alarm_alpha`` the level; a ``protect`` of None (a state from before protection)
    means off, an ``alarm`` of None (a state from before the alarm had its own flag)
    means as ``protect``."""
    given = {k: values.get(k) for k in CLASSIFIER_SETTINGS}
    alpha = values.get("alarm_alpha")
    protect, alarm = given["protect"], values.get("alarm")
    given["protect"] = None if protect is None else protect_setting(
        protect, protect if alarm is None else alarm,
        DEFAULT_ALARM_ALPHA if alpha is None else alpha,
    )  # fmt: skip
    return ClassifierSettings.given(**given)
