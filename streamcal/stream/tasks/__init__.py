"""The task registry: what each ``--task`` supplies to a unit's one flow, one entry a task.

A unit of calibration (``streamcal.stream.unit``) runs the same steps for every task:
decode, predict, send, wait, join, learn, track. The task is looked up once from the
settings (``task_of(config)``); nothing outside this package compares a task's name.

========== ============================================ ==============================
``--task``  learner                                      tracker (monitoring shape)
========== ============================================ ==============================
binary     ``VennAbersClassifier`` (protection, alarm)  ``CalibrationTracker``
multiclass ``VennAbersMultiClassifier`` (alarm)          ``MulticlassTracker``
regression ``ConformalPredictiveRegressor`` (alarm)      ``RegressionTracker``
========== ============================================ ==============================

**What an entry supplies.** A task is a subclass of ``streamcal.stream.tasks.task.Task``
in a module of its own here, named in ``_ENTRIES`` below (loaded when first looked up, so
that the settings and ``--help`` stay cheap). The base class holds what every task shares
(the features that wait, the alarm's reports, the metric features) and defaults marked
(d); an entry declares:

* ``name``: the ``--task`` value, and ``pending_type``: the ``NamedTuple`` of what waits
  for a label;
* ``label_decoder`` (``event_decoder`` (d) if events differ): bytes and ``Fields`` to a
  message, or ``BadInput`` (its reason goes to the dead letter);
* ``shape``: its part of the monitoring layer (``streamcal.monitoring.shapes``: the
  tracker class, the schema feature of the tracker's own fields, how a predictions file
  and a library prediction are read), so that reports read its predictions files;
* the settings: ``check_settings(config)`` (d), the rules that belong to the task
  (``ValueError`` naming the flag, the value and the fix); ``default_label(text)`` (d),
  ``--label-default`` as one of its labels; ``resolve_scheme(given)`` (d), the
  multiclass scheme in effect (None for the others); ``protects`` (d, False): whether
  ``--protect`` applies (then the predictions carry p_protected and the metric lines the
  protection fields); ``fingerprint(values)`` (d): the shared settings a checkpoint is
  bound to, and ``own_fingerprint(config)`` (d, none): the task's own (a restart with
  another value of any is refused);
* ``classifier_class()`` and ``new_classifier()``: the learner, new (from a checkpoint:
  ``classifier_from_state(state)`` (d));
* per record: ``predict(clf, ev)`` (the prediction message and what waits), ``pack`` /
  ``unpack`` (what waits as bytes, exactly restored), ``refuse(clf, pred, y, eid)`` (a
  reason to dead-letter a label before anything learns), ``learn`` (d) and ``track``.

A new task is a module here with its ``Task`` subclass, a line in
``_ENTRIES``, a ``Shape`` in ``streamcal.monitoring.shapes``, its fields in the metric
schema under the shape's feature and its name in ``--task``'s help; with the pretrained
mode's default refresh, its name in ``streamcal.learner.settings.REFRESH_WINDOWS`` too
(the unit sizes what it keeps for the learner's reports by it). The unit, the processor,
the metric lines and the checkpoints take it from there.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["NAMES", "resolved_scheme", "task_named", "task_of"]

# name -> the module holding its entry (the module's ``TASK``)
_ENTRIES = {
    "binary": "streamcal.stream.tasks.binary",
    "multiclass": "streamcal.stream.tasks.multiclass",
    "regression": "streamcal.stream.tasks.regression",
}
NAMES = tuple(_ENTRIES)


def task_named(name):
    """The entry (a ``Task`` subclass) of the task ``name``; ``ValueError`` naming the tasks.

    >>> task_named("multiclass").name, task_named("binary").protects
    ('multiclass', True)
    >>> task_named("ranking")
    Traceback (most recent call last):
    ...
    ValueError: task must be one of binary, multiclass, regression, got 'ranking'
    """
    module = _ENTRIES.get(name) if isinstance(name, str) else None
    if module is None:
        raise ValueError(f"task must be one of {', '.join(NAMES)}, got {name!r}")
    return import_module(module).TASK


def task_of(config):
    """The entry of ``config``'s task (``--task``)."""
    return task_named(config.task)


def resolved_scheme(task, scheme):
    """The multiclass scheme in effect for ``task`` and ``scheme`` as given (None for a task
    without schemes, or a name that is no task: a checkpoint's, compared, not trusted).

    >>> resolved_scheme("multiclass", None), resolved_scheme(None, None)
    ('one-vs-rest', None)
    """
    if not isinstance(task, str) or task not in _ENTRIES:
        return None
    return task_named(task).resolve_scheme(scheme)
