"""The settings a unit's checkpoint is bound to, and the check that a state matches them.

A unit's state records the settings it was made with (``FINGERPRINT``, as given: None is
not given); resuming it with other ones would mix two states, so ``check_fingerprint``
refuses it with one line naming the setting, what the checkpoint holds and what the
processor is configured with. A task without protection holds ``protect`` as None.

>>> from streamcal.stream.config import ProcessorConfig
>>> state = {"fingerprint": fingerprint_of(ProcessorConfig(window=50))}
>>> check_fingerprint(state, ProcessorConfig(window=50))
>>> check_fingerprint(state, ProcessorConfig(window=60))
Traceback (most recent call last):
...
streamcal.stream.state.errors.CheckpointError: checkpoint was written with window=50 but
the processor is configured with window=60; ...
"""

from __future__ import annotations

from streamcal.learner.settings import FIELDS as CLASSIFIER_SETTINGS
from streamcal.stream.settings.learner import settings_of
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.tasks import resolved_scheme, task_of

__all__ = ["FINGERPRINT", "check_fingerprint", "fingerprint_of"]

# Settings a checkpoint is bound to: resuming with other ones would mix two states. The
# classifier's are compared as ClassifierSettings, so that a setting left to its default
# and the same value given explicitly are one setting.
_INPUT_FINGERPRINT = (
    "events_topic",
    "labels_topic",
    "model",
    "id_field",
    "features_field",
    "label_field",
)
# Protection and the alarm (``--protect``, ``--alarm``, ``--alarm-alpha``: the
# classifier's ``protect``): their state is in the checkpoint, so it is bound to them too.
# None (``protect`` of a task without protection) is not compared.
_PROTECTION_FINGERPRINT = ("protect", "alarm", "alarm_alpha")
# The task (--task) and the multiclass scheme, recorded as given; the scheme is compared
# once its default is filled in (``resolved_scheme``).
_TASK_FINGERPRINT = ("task", "scheme")
# The label horizon: what waits and when it is learned depend on it.
_HORIZON_FINGERPRINT = ("label_horizon", "label_default", "late_labels")
FINGERPRINT = (
    _INPUT_FINGERPRINT
    + tuple(k for k in CLASSIFIER_SETTINGS if k not in _PROTECTION_FINGERPRINT)
    + _PROTECTION_FINGERPRINT
    + _TASK_FINGERPRINT
    + _HORIZON_FINGERPRINT
)

def fingerprint_of(config) -> dict:
    """The fingerprint a unit's state records: ``config``'s ``FINGERPRINT`` settings as
    its task keeps them."""
    task = task_of(config)
    shared = task.fingerprint({k: getattr(config, k) for k in FINGERPRINT})
    return {**shared, **task.own_fingerprint(config)}


def check_fingerprint(state: dict, config) -> None:
    """``CheckpointError`` (one line) if ``state`` was made with other settings.

    The fingerprint holds the settings as given (None: not given); the classifier's are
    compared once their defaults are filled in (``ClassifierSettings.given``).
    """
    fingerprint = state.get("fingerprint", {})
    pairs = [(k, fingerprint.get(k), getattr(config, k)) for k in _INPUT_FINGERPRINT]
    pairs += [
        (k, fingerprint[k], getattr(config, k))
        for k in _PROTECTION_FINGERPRINT
        if fingerprint.get(k) is not None  # None: the task has no protection
    ]
    pairs += [(k, fingerprint.get(k), getattr(config, k)) for k in _HORIZON_FINGERPRINT]
    task = fingerprint.get("task")
    pairs += [
        ("task", task, config.task),
        ("scheme", resolved_scheme(task, fingerprint.get("scheme")), config.multiclass_scheme()),
    ]
    # the task's own (the same task: compared above first)
    own = task_of(config).own_fingerprint(config)
    pairs += [(k, fingerprint.get(k), v) for k, v in own.items()]
    now = config.classifier_settings()
    try:
        saved = settings_of(fingerprint)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint has invalid classifier settings: {exc}") from None
    names = [k for k in CLASSIFIER_SETTINGS if k not in _PROTECTION_FINGERPRINT]
    if fingerprint.get("protect") is not None:
        names.append("protect")  # the flags matched above: this compares what they imply
    pairs += [(k, getattr(saved, k), getattr(now, k)) for k in names]
    for k, written, configured in pairs:
        if written != configured:
            raise CheckpointError(
                f"checkpoint was written with {k}={written!r} but the "
                f"processor is configured with {k}={configured!r}; use another "
                "state directory or the same settings"
            )
