"""FieldScore: a score carried by the event, calibrated (and protected) like a model's."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from river import base

from streamcal import FieldScore, VennAbersClassifier, venn_abers


def test_is_a_river_binary_classifier_that_never_learns():
    scorer = FieldScore("s")
    assert isinstance(scorer, base.Classifier) and not scorer._multiclass
    before = pickle.dumps(scorer)
    scorer.learn_one({"s": 0.3}, True)
    assert pickle.dumps(scorer) == before
    assert scorer.clone().field == "s" and pickle.loads(before).kind == "probability"
    assert scorer.predict_one({"s": 0.7}) is True and scorer.predict_one({"s": 0.2}) is False


@pytest.mark.parametrize(
    "x, match",
    [
        ({}, "no field 's'"),
        ({"s": float("nan")}, "nan"),
        ({"s": "0.5"}, "'0.5'"),
        ({"s": True}, "True"),
        ({"s": -0.1}, "probability"),
        ({"s": 1.5}, "probability"),
    ],
)
def test_bad_scores_are_named(x, match):
    with pytest.raises(ValueError, match=match):
        FieldScore("s").predict_proba_one(x)


def test_bad_settings():
    with pytest.raises(ValueError, match="kind"):
        FieldScore("s", kind="margin")
    with pytest.raises(ValueError, match="field"):
        FieldScore(["s"])


def test_real_scores_go_through_the_logistic_without_overflow():
    scorer = FieldScore("m", kind="real")
    assert scorer.score_one({"m": 2.0}) == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert scorer.score_one({"m": -800.0}) == 0.0 and scorer.score_one({"m": 800.0}) == 1.0
    with pytest.raises(ValueError, match="inf"):
        scorer.score_one({"m": float("inf")})


@pytest.mark.parametrize("kind", ["probability", "real"])
def test_calibration_equals_batch_venn_abers_on_the_raw_scores(kind):
    # The scorer never changes, so SVA over all history is the batch predictor on the past
    # pairs; VA depends only on the order of scores, so real scores give the same answers.
    rng = np.random.default_rng(0)
    raw = rng.normal(0, 3, 400) if kind == "real" else rng.random(400)
    labels = rng.random(400) < 1 / (1 + np.exp(-raw))
    clf = VennAbersClassifier(FieldScore("s", kind=kind), mode="sva", window=None)
    for i, (s, y) in enumerate(zip(raw.tolist(), labels.tolist(), strict=True)):
        iv = clf.predict_interval_one({"s": s})
        p0, p1 = venn_abers(raw[:i], labels[:i], [s])
        assert (iv.p0, iv.p1) == (p0[0], p1[0])
        clf.learn_one({"s": s}, y)


def test_pretrained_mode_calibrates_and_protects_an_upstream_score():
    # An upstream model whose world shifts at label 2,000: positives become more frequent
    # (P(1) for its scores 0.1 / 0.9: first 0.1 / 0.9, then 0.5 / 0.97).
    rng = np.random.default_rng(1)
    clf = VennAbersClassifier(FieldScore(), window=500, protect={"burn_in": 500})
    loss_p = loss_protected = 0.0
    for i in range(3000):
        s = float(rng.choice([0.1, 0.9]))
        truth = s if i < 2000 else {0.1: 0.5, 0.9: 0.97}[s]
        y = bool(rng.random() < truth)
        iv = clf.predict_interval_one({"score": s})
        assert iv.score == s
        clf.learn_one({"score": s}, y)
        if i < 2000:
            assert not clf.alarm
        elif i < 2300:
            loss_p -= math.log(iv.p if y else 1 - iv.p)
            loss_protected -= math.log(iv.p_protected if y else 1 - iv.p_protected)
    assert clf.alarm and 2000 < clf.alarm_at < 2400
    assert loss_protected < 0.9 * loss_p
