"""MetricLogWriter: a library loop's metric log, read by the report as the processor's."""

from __future__ import annotations

import random

import pytest
from river import datasets, linear_model, naive_bayes, preprocessing

from streamcal import MetricLogWriter, VennAbersClassifier, VennAbersMultiClassifier
from streamcal.monitoring import read_metric_log
from streamcal.monitoring.metric_log import split_classes, split_labelled
from streamcal.monitoring.report import summary


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def test_a_binary_loop_with_protection_and_categories(tmp_path):
    path = tmp_path / "metrics.jsonl"
    clf = VennAbersClassifier(lr(), window=100, by="https", protect=True)
    with MetricLogWriter(path, every=100) as log:
        for x, y in datasets.Phishing():
            iv = clf.predict_interval_one(x)
            clf.learn_one(x, y)
            log.update(iv, y, category=x["https"])
            log.update_protection(clf.log_martingale, clf.alarm, clf.alarm_at)
    lines = read_metric_log(path)
    whole, by_category = split_labelled(lines)
    assert [line["labels"] for line in whole] == [*range(100, 1201, 100), 1250]
    assert whole[-1]["reliability"] and whole[-1]["protected_log_loss"] > 0
    assert sorted(by_category) == sorted(str(c) for c in clf.categories)
    assert sum(r["labels"] for r in by_category.values()) == 1250
    assert summary(whole[-1])["corollary1"].startswith("holds")


def test_a_multiclass_loop_writes_class_lines(tmp_path):
    data = list(datasets.ImageSegments())
    random.Random(0).shuffle(data)
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=200)
    path = tmp_path / "metrics.jsonl"
    with MetricLogWriter(path, every=500) as log:
        for x, y in data:
            pred = clf.predict_interval_one(x)
            clf.learn_one(x, y)
            if pred is not None:
                log.update(pred, y)
    whole, by_class = split_classes(read_metric_log(path))
    assert whole[-1]["labels"] == len(data) - 1 and whole[-1]["multiclass_log_loss"] > 0
    assert sorted(by_class) == sorted(clf.classes)


def test_the_report_reads_it(tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring import write_report

    path = tmp_path / "metrics.jsonl"
    clf = VennAbersClassifier(lr(), window=100)
    with MetricLogWriter(path, every=50) as log:
        for x, y in datasets.Phishing().take(300):
            iv = clf.predict_interval_one(x)
            clf.learn_one(x, y)
            log.update(iv, y)
    page = write_report(path, tmp_path / "report")
    assert "Corollary 1" in page.read_text()


def test_bad_input_and_mixing_are_refused(tmp_path):
    from streamcal import VennAbersInterval

    with pytest.raises(ValueError, match="every must be a positive integer"):
        MetricLogWriter(tmp_path / "m.jsonl", every=0)
    log = MetricLogWriter(tmp_path / "m.jsonl")
    with pytest.raises(ValueError, match="need p0, p1, p and score in"):
        log.update(VennAbersInterval(p0=0.2, p1=1.5, p=0.5, score=0.5), 1)
    assert log.labels == 0
    log.update(VennAbersInterval(p0=0.2, p1=0.5, p=0.4, score=0.5), 1)
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB())
    clf.learn_one({"a": 1.0}, "u")
    with pytest.raises(ValueError, match="binary or of multiclass"):
        log.update(clf.predict_interval_one({"a": 1.0}), "u")
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.update(VennAbersInterval(p0=0.2, p1=0.5, p=0.4, score=0.5), 1)
    assert [line["labels"] for line in read_metric_log(tmp_path / "m.jsonl")] == [1]
