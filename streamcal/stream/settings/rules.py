"""The rules that span several settings of ``streamcal run``, in the order they are asked.

``validate(config)`` asks ``RULES`` in turn; the first that fails raises ``ValueError``
with one line naming the flags, the value and the fix. Each setting's own constraint is
one step of the list (``check_each``), after the classifier's settings: the learner
owns those (``ClassifierSettings``), so the processor refuses them with the learner's
messages, word for word. The rules of a concern that has a module of its own live there:
the label horizon's in ``streamcal.stream.horizon``, the multiclass classifier's in
``streamcal.learner.settings.check_multiclass``; the others are here, grouped by what
they are about (the task, the alarm, topics, scope and state, the Kafka client).

>>> from streamcal.stream.config import ProcessorConfig
>>> topics(ProcessorConfig(events_topic="a", labels_topic="a"))
Traceback (most recent call last):
...
ValueError: events_topic and labels_topic must differ
"""

from __future__ import annotations

from pathlib import Path

from streamcal.learner.settings import MONDRIAN_SETTINGS
from streamcal.stream.settings.declaration import check_each, check_types

__all__ = ["RULES", "SASL_MECHANISMS", "validate"]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


# --- the model and the task ---------------------------------------------------------
def mondrian_needs_by(c) -> None:
    """Given without ``--by`` they would do nothing: say so."""
    if c.by is None:
        for name in MONDRIAN_SETTINGS[1:]:
            if getattr(c, name) is not None:
                raise ValueError(f"{name} needs by (Mondrian calibration)")


def learner_settings(c) -> None:
    """The learner's own rules and messages: the classifier's (``ClassifierSettings``),
    or those of the task's own learner (the regressor's). A task that is none is
    refused by its own constraint, after this (``check_each``)."""
    from streamcal.stream.tasks import NAMES, task_named

    if c.task in NAMES:
        task_named(c.task).check_learner(c)
    else:
        c.classifier_settings()


def task(c) -> None:
    """``--task`` and the rules that belong to it (``streamcal.stream.tasks``): ``--scheme``
    is multiclass; ``--task multiclass`` takes the multiclass classifier's settings only
    (``check_multiclass``) and no binary model."""
    from streamcal.stream.tasks import task_named

    task_named(c.task).check_settings(c)


def label_horizon(c) -> None:
    """``--label-horizon``, ``--label-default``, ``--late-labels``: the horizon's rules."""
    from streamcal.stream.horizon import check_settings

    check_settings(c)


def alarm(c) -> None:
    from streamcal.stream.tasks import task_named

    if c.protect and not c.alarm and task_named(c.task).protects:
        raise ValueError(
            "protect runs with the alarm: --no-alarm needs --no-protect (the alarm "
            "alone is --no-protect)"
        )


# --- topics, scope and state ----------------------------------------------------------
def scope(c) -> None:
    """With ``--scope partition`` a unit's checkpoint goes to the state topic, signed."""
    if (
        c.scope == "partition"
        and c.state_topic
        and c.checkpoint_key is None
        and (c.checkpoint_key_file is None)
    ):
        raise ValueError(
            "scope partition with a state topic needs a checkpoint key: set "
            "STREAMCAL_CHECKPOINT_KEY or --checkpoint-key-file (or --state-topic none)"
        )


def topics(c) -> None:
    """The inputs differ, and no output is an input."""
    inputs = {c.events_topic, c.labels_topic}
    if len(inputs) < 2:
        raise ValueError("events_topic and labels_topic must differ")
    outputs = [c.predictions_topic, c.dead_letter_topic, c.metrics_topic]
    if c.scope == "partition":
        outputs.append(c.state_topic)
    for out in outputs:
        if out in inputs:
            raise ValueError(f"output topic {out!r} is also an input topic")


def checkpoint_key(c) -> None:
    """A state directory needs a key, in a file outside it or in the environment."""
    if c.checkpoint_key_file is not None and c.state_dir is not None:
        if _inside(Path(c.checkpoint_key_file), Path(c.state_dir)):
            raise ValueError(
                "checkpoint_key_file must be outside the state directory "
                "(whoever can write checkpoints must not be able to read the key)"
            )
    if c.state_dir is not None and c.checkpoint_key is None and c.checkpoint_key_file is None:
        raise ValueError(
            "state_dir needs a checkpoint key: set STREAMCAL_CHECKPOINT_KEY or "
            "--checkpoint-key-file (a file outside the state directory)"
        )


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


# --- the Kafka client ------------------------------------------------------------------
def codec(c) -> None:
    """The client is installed, and so is the codec of ``--compression-type``."""
    from streamcal.stream.kafka.adapters import adapter

    client = adapter(c.kafka_client)  # ValueError naming the missing package
    if c.compression_type not in ("none", "gzip") and not client.has_codec(c.compression_type):
        raise ValueError(
            f"compression_type {c.compression_type}: the codec's Python package "
            "is not installed (python-snappy, lz4 or zstandard; dependencies of "
            "streamcal-va)"
        )


def sasl(c) -> None:
    """A SASL protocol needs a mechanism, and a password mechanism its credentials."""
    if "SASL" not in c.security_protocol:
        return
    if c.sasl_mechanism not in SASL_MECHANISMS:
        raise ValueError(
            f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)} with "
            f"{c.security_protocol}; got {c.sasl_mechanism!r}"
        )
    if c.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
        c.sasl_username and c.sasl_password
    ):
        raise ValueError(f"sasl_username and sasl_password are needed for {c.sasl_mechanism}")


RULES = (
    check_types,
    mondrian_needs_by,
    learner_settings,
    check_each,
    scope,
    topics,
    task,
    label_horizon,
    alarm,
    codec,
    sasl,
    checkpoint_key,
)


def validate(config) -> None:
    """Ask every rule of ``RULES`` about ``config``: ``ValueError`` (one line) from the
    first that refuses it."""
    for rule in RULES:
        rule(config)
