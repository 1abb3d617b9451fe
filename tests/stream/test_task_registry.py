"""The task registry (``streamcal.stream.tasks``) and the monitoring shapes: each entry
supplies its parts, a name is looked up in one place, and no task name is compared
anywhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import streamcal
from streamcal.monitoring import MetricLogWriter, read_metric_log
from streamcal.monitoring.shapes import SHAPES, shape_of_line, shape_of_prediction
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.metrics import features_of
from streamcal.stream.tasks import NAMES, resolved_scheme, task_named
from streamcal.stream.tasks.task import Task

# What an entry must declare itself (the base class has no working version of them).
_DECLARED = ("name", "pending_type", "shape", "label_decoder", "classifier_class",
             "new_classifier", "predict", "pack", "unpack",
             "refuse", "track")  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_every_entry_declares_its_parts(name):
    entry = task_named(name)
    assert issubclass(entry, Task) and entry.name == name
    for part in _DECLARED:
        assert getattr(entry, part, None) is not getattr(Task, part, None), part
    assert entry.shape is SHAPES[name] and entry.tracker_class() is entry.shape.tracker_class
    assert {"x", "category"} <= set(entry.pending_type._fields)
    assert hasattr(entry.classifier_class(), "learn_one")


def test_an_unknown_task_is_refused_naming_the_tasks():
    names = "binary, multiclass, regression"
    for bad in ("ranking", "Binary", None, ["binary"]):
        with pytest.raises(ValueError, match=f"task must be one of {names}, got"):
            task_named(bad)
    with pytest.raises(ValueError, match=f"task must be one of {names}, got 'ranking'"):
        ProcessorConfig(task="ranking").validate()


def test_a_checkpoints_task_name_is_compared_not_trusted():
    """A fingerprint's task may be anything (another version, a damaged file): its scheme
    is None rather than an error, so that the comparison names the mismatch."""
    assert [resolved_scheme(t, None) for t in (None, "ranking", ["x"], 3)] == [None] * 4
    assert resolved_scheme("regression", None) is None
    assert resolved_scheme("multiclass", "top-label") == "top-label"
    assert resolved_scheme("binary", "top-label") is None


@pytest.mark.parametrize(
    "task, protect, alarm, features",
    [
        ("binary", True, True, ("protection", "alarm")),
        ("binary", False, True, ("alarm",)),
        ("binary", False, False, ()),
        ("multiclass", True, True, ("multiclass", "alarm")),  # no protection per class
        ("multiclass", False, False, ("multiclass",)),
        ("regression", True, True, ("regression", "alarm")),  # no protection
        ("regression", False, False, ("regression",)),
    ],
)
def test_the_metric_features_of_each_task(task, protect, alarm, features):
    model = {"multiclass": "gnb", "regression": "logreg"}.get(task, "lr")
    config = ProcessorConfig(task=task, model=model, protect=protect, alarm=alarm)
    assert features_of(config) == features


def test_shapes_are_told_by_their_markers(tmp_path):
    from streamcal.learner import VennAbersInterval, VennAbersMultiClassifier

    assert shape_of_line({"p0": 0.1, "p1": 0.2, "label": 1}) is SHAPES["binary"]
    assert shape_of_line({"p0": 0.1, "probabilities": {}}) is SHAPES["multiclass"]
    from river import naive_bayes

    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB())
    clf.learn_one({"a": 1.0}, "u")
    multi = clf.predict_interval_one({"a": 1.0})
    assert shape_of_prediction(multi) is SHAPES["multiclass"]
    binary = VennAbersInterval(p0=0.2, p1=0.5, p=0.4, score=0.5)
    assert shape_of_prediction(binary) is SHAPES["binary"]
    # A binary prediction refused for its label makes no tracker: the log may still be
    # a multiclass one.
    with MetricLogWriter(tmp_path / "m.jsonl", every=1) as log:
        with pytest.raises(ValueError, match="a binary prediction with label 'u'"):
            log.update(binary, "u")
        log.update(multi, "u")
    lines = read_metric_log(tmp_path / "m.jsonl")
    assert lines[-1]["class"] == "u" and lines[0]["classes"] == 1


def test_every_tracker_offers_the_same_protocol():
    for shape in SHAPES.values():
        tracker = shape.tracker_class(window=5, bins=2)
        assert tracker.labels == 0 and tracker.class_snapshots() == []
        assert tracker.category_snapshots() == []
        state = tracker.to_state()
        assert shape.tracker_class.from_state(state).snapshot() == tracker.snapshot()


# Comparisons of a task's name with ==, != or "in": only the registries make them. The
# learner's front door (below the stream layer) tags its own multiclass state by name.
_COMPARED = re.compile(r"""([=!]=|\bin)\s*\(?\s*["'](binary|multiclass)["']"""
                       r"""|["'](binary|multiclass)["']\s*[=!]=""")  # fmt: skip
_ALLOWED = {"stream/tasks", "monitoring/shapes.py", "learner/binary_state.py"}


def test_no_task_name_is_compared_outside_the_registries():
    root = Path(streamcal.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(a) for a in _ALLOWED):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if _COMPARED.search(code) and ">>>" not in code:
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []
