"""Settings of the stream processor: one dataclass, each field a declared setting.

Each setting is declared once, here (``setting``): its name, type, default, help text,
help group and constraint; the Kafka connection's come first, from ``KafkaConnection``
(``streamcal.stream.kafka.connection``). The rest comes from that declaration
(``streamcal.stream.settings``): the flag (``events_topic`` is ``--events-topic``), the
environment variable (``STREAMCAL_EVENTS_TOPIC``), the TOML key (``events_topic`` or
``events-topic``; top level or in a ``[run]`` table), the help of ``streamcal run`` and
the check of each value. Precedence: flag > environment > TOML file > default. The rules
that span several settings are in ``streamcal.stream.settings.rules``.

>>> cfg = ProcessorConfig.from_sources({"model": "gnb"}, env={"STREAMCAL_MODE": "sva"})
>>> cfg.model, cfg.mode, cfg.events_topic
('gnb', 'sva', 'streamcal.events')
>>> ProcessorConfig.from_sources({"dedupe_window": 0})
Traceback (most recent call last):
...
ValueError: dedupe_window must be >= 1, got 0 (--dedupe-window)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from streamcal.learner.modes import MODES, check_mode
from streamcal.learner.settings import (
    DEFAULT_ALARM_ALPHA,
    DEFAULT_MAX_CATEGORIES,
    DEFAULT_MERGE,
    ClassifierSettings,
    check_count,
    check_fallback,
    check_merge,
    check_min_category,
)
from streamcal.stream.durations import parse_duration
from streamcal.stream.kafka.adapters import CLIENTS
from streamcal.stream.kafka.connection import KafkaConnection
from streamcal.stream.models import DEFAULT_MODEL, check_model_spec, describe_presets
from streamcal.stream.settings import rules, sources
from streamcal.stream.settings.constraints import (
    AtLeast,
    Between,
    Checked,
    File,
    OneOf,
    Seconds,
    Size,
    parse_size,
)
from streamcal.stream.settings.declaration import ENV_PREFIX, declared, setting
from streamcal.stream.settings.learner import protect_setting, settings_of
from streamcal.stream.tasks import NAMES as TASKS
from streamcal.stream.tasks import resolved_scheme

__all__ = [
    "GUARANTEES",
    "LOST_INPUT_POLICIES",
    "ProcessorConfig",
    "ENV_PREFIX",
    "SETTINGS",
    "parse_duration",
    "parse_size",
    "protect_setting",
    "settings_of",
]

# Sized for days of delay: at 330 bytes per waiting prediction (20 numeric features) 16 GiB
# hold 5.2e7 predictions, one day at 600 events/s. What waits is on disk (the memory is the
# store's cache), so the bound is the disk space the operator gives it.
DEFAULT_PENDING_BYTES = 16 << 30
DEFAULT_LABEL_WAIT_BYTES = 1 << 30
# The merge's grace (docs/ordering.md, docs/performance.md: measured with benchmarks/grace.py).
DEFAULT_GRACE_MS = 100

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
LOST_INPUT_POLICIES = ("stop", "continue")  # --on-lost-input (streamcal.stream.kafka.ordering)
# --processing-guarantee, the names quixstreams uses (streamcal.stream.exactly_once)
GUARANTEES = ("at-least-once", "exactly-once")
_HORIZON = "streamcal.stream.horizon"  # its checks are imported when asked (a costly module)


@dataclass(frozen=True)
class ProcessorConfig(KafkaConnection):
    """All settings of ``streamcal run`` (see ``streamcal run --help``)."""

    # --- topics and message fields ---
    events_topic: str = setting("streamcal.events", "input topic of events", "topics")
    labels_topic: str = setting("streamcal.labels", "input topic of labels", "topics")
    predictions_topic: str = setting(
        "streamcal.predictions", "output topic of predictions", "topics"
    )
    dead_letter_topic: str = setting(
        "streamcal.dead-letters", "output topic of rejected input", "topics"
    )
    metrics_topic: str | None = setting(
        None, "output topic of metric lines (off unless set)", "topics"
    )
    id_field: str = setting("id", "JSON field holding the event id (events and labels)", "topics")
    features_field: str = setting("features", "JSON field holding the features object", "topics")
    label_field: str = setting(
        "label", "JSON field holding the label (0/1 or true/false)", "topics"
    )
    timestamp_field: str = setting(
        "ts", "optional JSON field holding the event time (unix s)", "topics"
    )
    max_message_bytes: int = setting(
        1_048_576,
        "input records whose key and value exceed this many bytes are dead-lettered "
        "(Kafka's default message limit)",
        "topics",
        Size(),
    )
    max_features: int = setting(
        1000, "events with more features are dead-lettered", "topics", AtLeast(1)
    )
    max_string_length: int = setting(
        1024,
        "ids and feature names (name=value for string features) longer than this many "
        "characters are dead-lettered",
        "topics",
        AtLeast(1),
    )
    max_future_s: float = setting(
        86400.0,
        "records whose timestamp is more than this many seconds ahead of the wall clock "
        "are dead-lettered (they would advance the record-time clock)",
        "topics",
        Seconds(),
    )

    # --- model ---
    model: str = setting(
        DEFAULT_MODEL,
        f"scoring model: {describe_presets()}, module:function returning a river classifier, "
        "or score:FIELD to calibrate a probability an upstream model put in the feature "
        "FIELD of each event (it must not learn from these labels; see docs/processor.md)",
        "model",
        Checked(check_model_spec, bad="forest"),
    )
    mode: str | None = setting(
        None,
        f"Venn-Abers mode: {', '.join(MODES)} (default: the learner's)",
        "model",
        Checked(check_mode, bad="ivap"),
    )
    window: int | None = setting(
        None,
        "calibration window (default: the learner's)",
        "model",
        Checked(functools.partial(check_count, "window"), bad=0),
    )
    merge: str = setting(
        DEFAULT_MERGE,
        "merge of (p0, p1) used as p: log, square or mean",
        "model",
        Checked(check_merge, bad="max"),
    )
    refresh_every: int | None = setting(
        None,
        "rescore the calibration set every this many labels (pretrained: refresh batch; "
        "sva: rescoring period; not for va; default: the learner's)",
        "model",
        Checked(functools.partial(check_count, "refresh_every"), bad=0),
    )
    by: str | None = setting(
        None,
        "Mondrian calibration: one calibration set per value of this field of an event (a "
        "feature, or else a top-level field; missing: the category null), one shared model",
        "model",
    )
    min_category: int | None = setting(
        None,
        "with --by (mode pretrained): categories with fewer calibration pairs are answered "
        "from the pooled set, with only the pooled guarantee (default: 100, or --window "
        "if smaller; regression: residuals in the bin of the model's output, default 100 "
        "or --window / 20 if smaller)",
        "model",
        Checked(check_min_category, bad=-1),
    )
    fallback: str | None = setting(
        None,
        "with --by: 'pooled' (the default in mode pretrained and for regression: "
        "categories without a state or below --min-category are answered from all "
        "categories' pairs or residuals) or 'off'",
        "model",
        Checked(check_fallback, bad="nearest"),
    )
    max_categories: int | None = setting(
        None,
        "with --by: at most this many categories keep a calibration set, least recently "
        f"labelled evicted (default {DEFAULT_MAX_CATEGORIES})",
        "model",
        Checked(functools.partial(check_count, "max_categories"), bad=0),
    )

    task: str = setting(
        "binary",
        "binary (labels 0/1 or true/false) or multiclass (labels are class names: strings "
        "or integers; each prediction carries a probability per class, the predicted "
        "class with its Venn-Abers pair and, with scheme one-vs-rest, a pair per class; "
        "mode pretrained only; the alarm but no p_protected) or regression (labels are "
        "numbers; each prediction carries a conformal predictive distribution's median, "
        "interval and quantiles; see docs/processor.md)",
        "model",
        OneOf(TASKS),
    )
    scheme: str | None = setting(
        None,
        "with --task multiclass: one-vs-rest, one-vs-one or top-label (default: the "
        "learner's, one-vs-rest)",
        "model",
        Checked("streamcal.core.multiclass:scheme_class", bad="nope"),
    )
    max_classes: int = setting(
        100,
        "with --task multiclass: a label that would be a class beyond this many is "
        "dead-lettered (one-vs-one keeps K(K-1)/2 stores)",
        "model",
        AtLeast(2),
    )
    interval_coverage: float = setting(
        0.9,
        "with --task regression: the coverage each prediction's interval [lo, hi] claims",
        "model",
        Between(0, 1, open=True),
    )
    quantiles: str = setting(
        "0.05,0.25,0.5,0.75,0.95",
        "with --task regression: the quantiles each prediction carries, comma-separated "
        "levels in (0, 1)",
        "model",
        Checked("streamcal.stream.tasks.regression:quantile_levels", bad="0.5,1.5"),
    )
    protect: bool = setting(
        True,
        "protected calibration (binary): each prediction also carries p_protected (a "
        "recalibration of p learned online, at most ln 2 worse than p in cumulative log "
        "loss, recovering from a shift in tens of labels) and the metric lines what it "
        "gained. On by default: p itself is unchanged. Runs with the alarm (--alarm); "
        "--no-protect keeps the alarm alone",
        "model",
    )
    alarm: bool = setting(
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
    alarm_alpha: float = setting(
        DEFAULT_ALARM_ALPHA,
        "the alarm's level: it fires when its test martingale reaches 1/alarm_alpha "
        "(false-alarm probability at most alarm_alpha, per unit and per category)",
        "model",
        Between(0, 1, open=True),
    )

    # --- joining events and labels (times are record times, in seconds) ---
    pending_ttl: float = setting(
        86400.0,
        "an event waits at most this long (record time, s) for its label",
        "join",
        Seconds(units=True),
    )
    pending_max_bytes: int = setting(
        DEFAULT_PENDING_BYTES,
        "events waiting for their labels take at most this many bytes on disk (suffixes "
        "KiB, MiB, GiB); beyond it the oldest leaves first, counted as evicted (see "
        "docs/deploy.md for sizing: label delay x event rate x bytes per prediction)",
        "join",
        Size(),
    )
    pending_max: int | None = setting(
        None,
        "optionally, at most this many events wait for labels (off by default)",
        "join",
        AtLeast(1, off="off"),
    )
    label_wait: float = setting(
        300.0,
        "a label that arrives before its event waits this long (record time, s)",
        "join",
        Seconds(units=True),
    )
    label_wait_max_bytes: int = setting(
        DEFAULT_LABEL_WAIT_BYTES,
        "labels waiting for their events take at most this many bytes on disk (their "
        "records are kept whole, for the dead letter); beyond it the oldest leaves first, "
        "dead-lettered and counted as lost",
        "join",
        Size(),
    )
    label_wait_max: int | None = setting(
        None,
        "optionally, at most this many labels wait for their events (off by default)",
        "join",
        AtLeast(1, off="off"),
    )
    label_horizon: float | None = setting(
        None,
        "label maturity: an event's label (whenever it came) is learned and tracked only "
        "once the event is this old (record time; 30s, 15m, 2h, 7d or seconds), in event "
        "order, so that labels whose delay depends on the outcome do not bias the "
        "calibration (docs/processor.md); at most --pending-ttl. Off by default",
        "join",
        Checked(f"{_HORIZON}:check_horizon", bad=-3.0, parse=parse_duration),
    )
    label_default: str | None = setting(
        None,
        "with --label-horizon: the label of an event that has none at the horizon (binary "
        "0/1/true/false, multiclass a class name), e.g. 0 for 'no chargeback'; without it "
        "such an event expires",
        "join",
    )
    late_labels: str = setting(
        "dead-letter",
        "with --label-horizon, a label that comes after its event matured: dead-letter "
        "(counted in labels_late; learning it would bring back the outcome-dependent order "
        "the horizon removes) or learn (an event without a label and without "
        "--label-default keeps waiting until --pending-ttl, and its label is learned when "
        "it comes, counted in labels_late)",
        "join",
        Checked(f"{_HORIZON}:check_late_labels", bad="keep"),
    )
    dedupe_window: int = setting(
        1_000_000,
        "remember this many finished ids to reject duplicate events and labels",
        "join",
        AtLeast(1),
    )
    merge_wait: float = setting(
        5.0,
        "at most this many wall-clock seconds to wait for a partition that has unread data "
        "before processing others (the deterministic merge's bound)",
        "join",
        Seconds(),
    )
    grace_ms: int = setting(
        DEFAULT_GRACE_MS,
        "live input: a record also waits until every partition of its unit has shown a "
        "record after it, at most this many milliseconds after it was read, so that records "
        "made readable slightly out of order across partitions still take their place (0: "
        "off; a partition that shows nothing costs each record the whole grace; see "
        "docs/ordering.md)",
        "join",
        AtLeast(0),
    )
    merge_buffer: int = setting(
        32 * 2**20,
        "the ordered merge's buffers hold about this many bytes of records (all partitions "
        "together): a partition past its share is paused until the merge has released half "
        "of it (see docs/ordering.md)",
        "join",
        Size(),
    )

    # --- metrics ---
    metrics_file: str | None = setting(
        "-",
        "metric lines go here ('-' = stdout, 'none' = off)",
        "metrics",
        none_word=False,
    )
    metrics_every: int = setting(
        1000, "write a metric line every this many labels", "metrics", AtLeast(1)
    )
    metrics_interval: float = setting(
        10.0, "... and at least every this many seconds", "metrics", Seconds()
    )
    tracker_window: int = setting(1000, "labels in the 'recent' metrics", "metrics", AtLeast(1))
    tracker_bins: int = setting(10, "bins of the calibration-error estimate", "metrics", AtLeast(1))
    top_k: int = setting(
        10,
        "with --by: per-category metric lines for this many categories by volume",
        "metrics",
        AtLeast(1),
    )
    metrics_port: int | None = setting(
        None, "serve Prometheus metrics on this port", "metrics", Between(0, 65535)
    )
    metrics_addr: str = setting("127.0.0.1", "address of the Prometheus endpoint", "metrics")

    # --- state ---
    state_dir: str | None = setting(
        None, "directory of checkpoints (none: no recovery, restart replays the topics)", "state"
    )
    checkpoint_interval: float = setting(
        1.0,
        "seconds between checkpoints (sooner for a unit with 40,000 writes waiting, so that "
        "a commit stays short): outputs flushed, then one atomic commit of each changed "
        "unit's store (what changed since the last checkpoint, with the unit's small "
        "snapshot and offsets), its changes to the state topic, offsets committed",
        "state",
        Seconds(),
    )
    processing_guarantee: str = setting(
        "at-least-once",
        "at-least-once (after a crash the outputs since the last checkpoint are produced "
        "again, with identical values) or exactly-once (each checkpoint interval's outputs, "
        "state-topic records and input offsets in one Kafka transaction, inputs read "
        "read_committed: readers must read with isolation.level=read_committed, and see "
        "outputs once their interval is committed)",
        "state",
        OneOf(GUARANTEES),
    )
    snapshot_interval: float = setting(
        30.0,
        "with a state topic, a unit's snapshot goes to it at most this often (its changes go "
        "at every checkpoint); a unit that moves resumes from the newest snapshot and "
        "replays the input after it",
        "state",
        Seconds(),
    )
    checkpoint_keep: int = setting(
        3, "checkpoints kept in the state directory", "state", AtLeast(1)
    )
    checkpoint_key_file: str | None = setting(
        None,
        "file holding the checkpoint HMAC key (outside the state dir); "
        "or set STREAMCAL_CHECKPOINT_KEY",
        "state",
        File(),
    )
    checkpoint_key: str | None = setting(
        None,
        "checkpoint HMAC key (environment only)",
        "state",
        secret=True,
        flag=False,
    )
    state_topic: str | None = setting(
        "streamcal.state",
        "with --scope partition, each unit's checkpoint also goes to this topic (keyed by "
        "group and unit) and an instance without a local checkpoint restores from it "
        "('none': off)",
        "state",
    )
    state_chunk_bytes: int = setting(
        512 * 1024,
        "state-topic records carry checkpoints in chunks of at most this size",
        "state",
        Size(),
    )
    state_memory: int = setting(
        256 << 20,
        "memory of the state stores of all units together (RocksDB's block cache, with the "
        "index and filter blocks and the memtables charged to it; at least 8 MiB): see "
        "docs/processor.md for what the process takes beside it",
        "state",
        Size(),
    )

    # --- throughput ---
    poll_max_records: int = setting(2000, "records per consumer poll", "kafka", AtLeast(1))
    linger_ms: int = setting(5, "producer linger (ms)", "kafka", AtLeast(0))
    compression_type: str = setting(
        "none",
        "compression of the outputs (predictions, dead letters, metrics): " + ", ".join(_CODECS),
        "kafka",
        OneOf(_CODECS),
    )
    on_lost_input: str = setting(
        "stop",
        "when the broker's log no longer holds a partition's position (a broker that lost "
        "its data, an unclean leader election, a topic deleted and recreated, retention): "
        "stop (with an error naming it) or continue (from what the log holds, counted in "
        "lost_input and skipped_offsets, with a dead letter giving the offsets)",
        "kafka",
        OneOf(LOST_INPUT_POLICIES),
    )
    skip_unreadable: bool = setting(
        False,
        "skip an input record batch that cannot be read (codec not installed, corrupt) and "
        "dead-letter its offset range; off: stop with an error naming it",
        "kafka",
    )
    producer_process: bool = setting(
        True,
        "produce outputs from a child process that owns the Kafka producer (a second CPU "
        "core does kafka-python's per-record work); off: from the processor's own thread",
        "kafka",
    )
    kafka_client: str = setting(
        "kafka-python",
        "the Kafka client: kafka-python, or librdkafka (confluent-kafka, the extra "
        "streamcal-va[librdkafka]: less CPU per event, its producer in the processor's "
        "process)",
        "kafka",
        OneOf(CLIENTS),
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
        return cls.build(**sources.gather(cls, cli_args, env, toml_path))

    @classmethod
    def build(cls, **values) -> ProcessorConfig:
        """Construct and validate; string values are converted to the field's type."""
        cfg = cls(**sources.convert(cls, values))
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise ``ValueError`` with a one-line message naming the bad setting: each
        setting's constraint and the rules across settings (``rules.RULES``)."""
        rules.validate(self)

    def classifier_settings(self) -> ClassifierSettings:
        """The classifier's settings: those given here, its defaults for the others (None);
        ``protect`` from ``--protect``, ``--alarm`` and ``--alarm-alpha``
        (``protect_setting``)."""
        return settings_of(vars(self))

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

    def multiclass_scheme(self) -> str | None:
        """The scheme of ``--task multiclass`` (the learner's default if not given); None
        for binary.

        >>> ProcessorConfig(task="multiclass", model="gnb").multiclass_scheme()
        'one-vs-rest'
        """
        return resolved_scheme(self.task, self.scheme)  # None: a task without schemes

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

    def producer_settings(self) -> dict:
        """Options of the outputs' producer beyond ``kafka_client_settings`` (kafka-python
        names)."""
        codec = self.compression_type
        return {"compression_type": None if codec == "none" else codec}

    def __repr__(self) -> str:  # never print secrets
        parts = []
        for s in declared(type(self)):
            v = getattr(self, s.name)
            parts.append(f"{s.name}={'***' if s.secret and v is not None else repr(v)}")
        return f"ProcessorConfig({', '.join(parts)})"


SETTINGS = declared(ProcessorConfig)
