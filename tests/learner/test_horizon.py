"""label_horizon / label_default (streamcal.learner.horizon): labels learned in prediction
order once H more predictions were asked for, whatever order they came in."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import evaluate, linear_model, metrics, naive_bayes, preprocessing

from streamcal import (
    OutcomeDependentDelayWarning,
    VennAbersClassifier,
    VennAbersMultiClassifier,
)
from streamcal.learner.horizon import Horizon


def _lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def _stream(n, seed=0):
    """Distinct objects (an index feature) with a noisy linear label."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        x = {"i": float(i), "u": float(rng.normal()), "v": float(rng.normal())}
        out.append((x, bool(rng.random() < 1 / (1 + np.exp(-2 * x["u"])))))
    return out


def _sign(x):
    return x["u"] > 0


def _run_horizon(clf, data, delays, order_key):
    """Feed ``clf`` (with a horizon H) the predictions in order and each label i just
    before question i + delays[i] (None: never), the labels due together in the order of
    ``order_key``; the predictions."""
    due: dict[int, list[int]] = {}
    for i, d in enumerate(delays):
        if d is not None:
            due.setdefault(i + d, []).append(i)
    out = []
    for j, (x, _) in enumerate(data):
        for i in sorted(due.pop(j, []), key=order_key):
            clf.learn_one(dict(data[i][0]), data[i][1])
        out.append(clf.predict_interval_one(dict(x)))
    return out


def _run_matured(clf, data, horizon, labelled, default):
    """The oracle: a plain classifier learning label i just before question i + H, in
    prediction order (the default, or nothing, for a label that never comes in time)."""
    out = []
    for j, (x, _) in enumerate(data):
        i = j - horizon
        if i >= 0:
            if labelled[i]:
                clf.learn_one(data[i][0], data[i][1])
            elif default is not None:
                clf.learn_one(data[i][0], default)
        out.append(clf.predict_interval_one(dict(x)))
    return out


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 12),
    st.lists(st.one_of(st.none(), st.integers(0, 14)), min_size=60, max_size=60),
    st.sampled_from([None, False, True]),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_any_arrival_order_learns_the_matured_stream_in_prediction_order(
    H, raw, default, protect, rnd
):
    data = _stream(60)
    # a delay of 0 or 1: before the next question; above H: late
    delays = [None if d is None else max(d, 1) for d in raw]
    keys = {i: rnd.random() for i in range(60)}
    hz = VennAbersClassifier(linear_model.LogisticRegression(), window=5, label_horizon=H,
                             label_default=default, protect=protect)  # fmt: skip
    got = _run_horizon(hz, data, delays, keys.get)
    labelled = [d is not None and d <= H for d in delays]
    plain = VennAbersClassifier(linear_model.LogisticRegression(), window=5, protect=protect)
    assert got == _run_matured(plain, data, H, labelled, default)  # p_protected too
    assert hz.log_martingale == plain.log_martingale
    late = sum(d is not None and d > H and i + d < 60 for i, d in enumerate(delays))
    assert hz.late_labels == late
    assert hz.waiting == min(H, 60)


def test_progressive_val_score_delay_of_h_matches_a_fixed_delay_of_h():
    """With river's delays (answer i just before question i + d), every label delayed by
    at most H is in time: outcome-dependent delays then give what a fixed delay of H
    gives, exactly."""
    data = _stream(1500, seed=1)
    H = 120
    hz = VennAbersClassifier(_lr(), window=100, label_horizon=H, protect=True)
    fixed = VennAbersClassifier(_lr(), window=100, protect=True)
    a = evaluate.progressive_val_score(data, hz, metrics.LogLoss(),
                                       delay=lambda x, y: 3 if y else H)  # fmt: skip
    b = evaluate.progressive_val_score(data, fixed, metrics.LogLoss(), delay=H)
    assert a.get() == pytest.approx(b.get(), rel=1e-12)  # the metric sums in arrival order
    # (the last H labels, given after the last question, wait in the horizon only)
    assert hz.late_labels == 0 and hz.waiting == H


def test_a_late_label_is_counted_and_not_learned():
    clf = VennAbersClassifier(linear_model.LogisticRegression(), window=3, label_horizon=2)
    xs = [{"a": float(i)} for i in range(5)]
    for x in xs:
        clf.predict_proba_one(x)
    assert clf.waiting == 2 and clf.calibration_size == 0  # 0, 1, 2 matured unlabelled
    clf.learn_one(xs[0], True)  # matured: late
    clf.learn_one({"a": 99.0}, True)  # never predicted: late
    clf.learn_one(xs[4], True)
    clf.learn_one(xs[4], False)  # its prediction has a label already: late
    assert clf.late_labels == 3
    for i in range(5, 7):
        clf.predict_proba_one({"a": float(i)})
    assert clf.calibration_size == 1  # only xs[4]'s label was learned


def test_the_default_labels_what_matured_without_one():
    hz = Horizon(2, default=0)
    hz.wait({"a": 1}, {})
    hz.wait({"a": 2}, {})
    # before prediction 2: prediction 0 matured, 1 waits
    assert hz.release() == [({"a": 1}, 0, {})] and hz.defaulted == 1 and len(hz) == 1
    hz = Horizon(2)
    hz.wait({"a": 1}, {})
    hz.wait({"a": 2}, {})
    assert hz.release() == [] and hz.unlabelled == 1


def test_the_lookup_finds_the_prediction_by_its_features_oldest_first():
    hz = Horizon(3)
    hz.wait({"a": 1, "b": 2}, {})
    hz.wait({"a": 1, "b": 2}, {"category": "c"})
    hz.wait({"a": 1, "b": 2}, {})
    assert hz.label({"b": 2, "a": 1}, "first", {})  # key order does not matter
    assert hz.label({"a": 1, "b": 2}, "third", {})
    assert hz.label({"a": 1, "b": 2}, "in c", {"category": "c"})
    assert not hz.label({"a": 1, "b": 2}, "late", {}) and hz.late == 1
    hz.wait({"z": 0}, {})
    hz.wait({"z": 0}, {})
    hz.wait({"z": 0}, {})
    assert [y for _, y, _ in hz.release()] == ["first", "in c", "third"]


def test_unhashable_features_are_looked_up_one_by_one():
    hz = Horizon(1)
    hz.wait({"a": [1, 2]}, {})
    assert hz.label({"a": [1, 2]}, True, {}) and not hz.label({"a": [1, 2]}, True, {})
    hz.wait({"a": 0}, {})
    assert hz.release() == [({"a": [1, 2]}, True, {})]


def test_a_waiting_prediction_keeps_a_copy_of_its_features():
    hz = Horizon(1)
    x = {"a": 1.0}
    hz.wait(x, {})
    x["a"] = 2.0
    assert hz.label({"a": 1.0}, True, {})


@pytest.mark.parametrize("protect", [False, True])
def test_state_and_pickle_keep_the_waiting_predictions(protect):
    data = _stream(400, seed=2)
    clf = VennAbersClassifier(_lr(), window=30, label_horizon=25, label_default=False,
                              protect=protect, by=_sign)  # fmt: skip
    for j, (x, y) in enumerate(data[:200]):
        clf.predict_proba_one(x)
        if y and j >= 5:
            clf.learn_one(*data[j - 5])
    clf.learn_one({"no": 1.0}, True)
    copies = [VennAbersClassifier.from_state(clf.to_state(), by=clf.by), pickle.loads(
        pickle.dumps(clf))]  # fmt: skip
    assert all(c.waiting == 25 and c.late_labels == 1 for c in copies)
    for j, (x, y) in enumerate(data[200:], start=200):
        outs = {repr(c.predict_interval_one(x)) for c in (clf, *copies)}
        assert len(outs) == 1
        if y:
            for c in (clf, *copies):
                c.learn_one(*data[j - 5])
    assert clf.to_state()["horizon"] == copies[0].to_state()["horizon"]


def test_a_classifier_without_a_horizon_has_the_state_it_had():
    clf = VennAbersClassifier(linear_model.LogisticRegression())
    clf.learn_one({"a": 1.0}, True)
    assert "horizon" not in clf.to_state() and clf.late_labels == 0 and clf.waiting == 0


def test_multiclass_with_a_horizon_learns_the_matured_stream():
    rng = np.random.default_rng(3)
    data = [({"i": float(i), "u": float(rng.normal())}, "abc"[int(rng.integers(3))])
            for i in range(300)]  # fmt: skip
    H = 10
    hz = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=20, label_horizon=H)
    delays = [1 + (i * 7) % H for i in range(300)]
    got = _run_horizon(hz, data, delays, lambda i: -i)
    plain = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=20)
    assert got == _run_matured(plain, data, H, [True] * 300, None)
    copy = VennAbersMultiClassifier.from_state(hz.to_state())
    assert copy.waiting == hz.waiting == H and copy.calibration_size == hz.calibration_size


def test_the_front_door_hands_its_waiting_labels_to_the_multiclass_side():
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=5, label_horizon=3)
    xs = [{"a": float(i)} for i in range(20)]
    clf.predict_proba_one(xs[0])
    clf.learn_one(xs[0], "spam")
    assert clf.task == "multiclass" and clf.waiting == 1
    for i in range(1, 20):
        clf.predict_proba_one(xs[i])
        clf.learn_one(xs[i], "ham" if i % 3 else "spam")
    assert clf._multi._state.n_seen == 17 and clf.late_labels == 0 and clf.waiting == 3
    assert sorted(clf.classes) == ["ham", "spam"]
    copy = VennAbersClassifier.from_state(clf.to_state())
    assert copy.waiting == 3 and copy.label_horizon == 3


def test_learn_many_with_a_horizon_waits_for_the_predictions():
    X = pd.DataFrame({"a": np.arange(10.0)})
    clf = VennAbersClassifier(linear_model.LogisticRegression(), window=20, label_horizon=4)
    clf.predict_proba_many(X)
    clf.learn_many(X, pd.Series([i % 2 for i in range(10)]))
    assert clf._state.n_seen == 0 and clf.waiting == 10  # a batch waits as a whole
    clf.predict_proba_one({"a": 10.0})
    assert clf._state.n_seen == 7 and clf.waiting == 4


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"label_horizon": 0}, "label_horizon must be a positive integer"),
        ({"label_horizon": 1.5}, "label_horizon must be a positive integer"),
        ({"label_default": 0}, "label_default=0 needs label_horizon"),
        ({"label_horizon": 3, "label_default": "spam"}, "label_default must be a binary"),
    ],
)
def test_bad_horizon_settings_are_refused_naming_them(kwargs, error):
    with pytest.raises(ValueError, match=error):
        VennAbersClassifier(linear_model.LogisticRegression(), **kwargs)


def test_outcome_dependent_delays_warn_once_without_a_horizon():
    data = _stream(3000, seed=4)
    clf = VennAbersClassifier(_lr(), window=100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate.progressive_val_score(data, clf, metrics.LogLoss(),
                                       delay=lambda x, y: 20 if y else 600)  # fmt: skip
    said = [w for w in caught if issubclass(w.category, OutcomeDependentDelayWarning)]
    assert len(said) == 1 and "label_horizon" in str(said[0].message)
    for quiet in (VennAbersClassifier(_lr(), window=100),
                  VennAbersClassifier(_lr(), window=100, label_horizon=600)):  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluate.progressive_val_score(data, quiet, metrics.LogLoss(),
                                           delay=lambda x, y: 300 + 4 * (x["i"] % 50))  # fmt: skip
        assert not [w for w in caught if issubclass(w.category, OutcomeDependentDelayWarning)]


def test_integer_classes_turn_multiclass_with_their_waiting_labels():
    """0 and 1 first, 2 later: the switch carries the binary state and the waiting labels
    over; from then on the answers are those of VennAbersMultiClassifier with the binary
    refresh period and the same horizon, fed the same stream from the start."""
    rng = np.random.default_rng(5)
    data = [({"i": float(i), "u": float(rng.normal())}, int(rng.integers(2 if i < 80 else 3)))
            for i in range(300)]  # fmt: skip
    H, delays = 12, [1 + (i * 5) % 12 for i in range(300)]
    front = VennAbersClassifier(naive_bayes.GaussianNB(), window=20, label_horizon=H)
    multi = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=20, refresh_every=20,
                                     label_horizon=H)  # fmt: skip
    a = _run_horizon(front, data, delays, lambda i: i)
    b = _run_horizon(multi, data, delays, lambda i: i)
    assert front.task == "multiclass" and front.classes == [0, 1, 2]
    turned = next(j for j, out in enumerate(a) if not hasattr(out, "p_protected"))
    assert 80 < turned < 100 and a[turned:] == b[turned:]
    assert front.waiting == multi.waiting == H and front.late_labels == 0
