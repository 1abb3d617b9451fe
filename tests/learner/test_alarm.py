"""The classifier's alarm (``streamcal.learner.alarm``): what it is fed, per mode, and its
promise by simulation: on exchangeable streams the false-alarm rate of every mode stays
within the binomial bound of its level (at least 2,000 null runs each in the full run)."""

from __future__ import annotations

import math
import pickle
import random

import numpy as np
import pytest
from river import base, naive_bayes
from scipy import stats

from streamcal import FieldScore, VennAbersClassifier, VennAbersMultiClassifier
from streamcal.core import ConformalAlarm
from streamcal.core._conformal_alarm_kernels import COMPILED
from streamcal.learner.alarm import conformity


class Recording(base.Classifier):
    """Gaussian naive Bayes on one feature that records every object it learns."""

    def __init__(self):
        self.nb = naive_bayes.GaussianNB()
        self.learned: set = set()

    def learn_one(self, x, y):
        self.learned.add(x["id"])
        self.nb.learn_one({"a": x["a"]}, y)

    def predict_proba_one(self, x):
        return self.nb.predict_proba_one({"a": x["a"]})


class Centroids(base.Classifier):
    """A fast learning scorer for the simulations: P(class | a) from each class's count and
    mean of the feature ``a`` (unit-variance Gaussians). river's naive Bayes spends 150 µs
    a score in scipy; this spends 2."""

    def __init__(self):
        self.stats: dict = {}  # class -> [count, sum]

    @property
    def _multiclass(self):
        return True

    def learn_one(self, x, y):
        st = self.stats.setdefault(y, [0, 0.0])
        st[0] += 1
        st[1] += x["a"]

    def predict_proba_one(self, x):
        if not self.stats:
            return {}
        a = x["a"]
        logits = {c: math.log(n) - 0.5 * (a - s / n) ** 2 for c, (n, s) in self.stats.items()}
        top = max(logits.values())
        w = {c: math.exp(v - top) for c, v in logits.items()}
        z = sum(w.values())
        return {c: v / z for c, v in w.items()}


def null_stream(rng, n, k=2, categories=1):
    prior = rng.dirichlet(np.ones(k) * 3)
    ys = rng.choice(k, size=n, p=prior)
    a = rng.normal(0.8 * ys, 1.0).tolist()
    g = rng.integers(categories, size=n).tolist()
    for i, y in enumerate(ys.tolist()):
        yield {"a": a[i], "id": i, "g": g[i]}, (bool(y) if k == 2 else y)


def test_the_bag_of_a_new_segment_is_set_aside_objects_the_new_scorer_never_learned():
    """The precondition of the alarm's validity, checked at every restart: each object of
    the new bag was set aside (never ranked) and not learned by the model that scores it,
    and its score is that model's."""
    rng = np.random.default_rng(0)
    model = Recording()
    clf = VennAbersClassifier(model, window=40, refresh_every=30, protect={"recalibrate": False})
    restarts, checked = [], 0
    feed_alarm = None
    original = ConformalAlarm.restart

    def spy(self, scores=(), labels=()):
        restarts.append((list(scores), list(labels)))
        return original(self, scores, labels)

    ConformalAlarm.restart = spy
    try:
        aside, stream = set(), list(null_stream(rng, 1500))
        for x, y in stream:
            before = len(restarts)
            clf.learn_one(x, y)
            feed_alarm = clf._protection.alarm.feeds[None].alarm
            if len(restarts) > before:  # a refresh: the bag just passed
                scores, labels = restarts[-1]
                cal = {item[0]["id"]: item for item in clf._state.calibration}
                ids = [i for i in aside if i in cal and i != x["id"]]
                assert not any(i in model.learned for i in ids)
                want = sorted(conformity(cal[i][2], cal[i][1]) for i in ids)
                assert sorted(scores) == want and len(labels) == len(want)
                checked += len(want)
                aside = set()
            if feed_alarm.set_aside:
                aside.add(x["id"])
    finally:
        ConformalAlarm.restart = original
    assert len(restarts) > 30 and checked > 200


def test_the_alarm_alone_leaves_p_as_it_is():
    data = list(null_stream(np.random.default_rng(1), 1500))
    plain = VennAbersClassifier(naive_bayes.GaussianNB(), window=200)
    alone = VennAbersClassifier(naive_bayes.GaussianNB(), window=200,
                                protect={"recalibrate": False, "alpha": 0.05})  # fmt: skip
    for x, y in data:
        x = {"a": x["a"]}
        assert alone.predict_proba_one(x) == plain.predict_proba_one(x)
        assert alone.predict_interval_one(x).p_protected == plain.predict_interval_one(x).p
        plain.learn_one(x, y)
        alone.learn_one(x, y)
    assert alone.protection_gain == 0.0 and len(alone.protectors) == 0
    assert alone.log_martingale is not None and alone.alarm_onset is None
    again = VennAbersClassifier.from_state(alone.to_state())
    assert again._protection.alarm.to_state() == alone._protection.alarm.to_state()


class Refusing(naive_bayes.GaussianNB):
    """Gaussian naive Bayes that refuses to learn an object with ``a`` beyond 100."""

    def learn_one(self, x, y):
        if x["a"] > 100:
            raise ValueError("a too large")
        super().learn_one(x, y)


def test_a_label_the_model_refuses_leaves_the_alarm_as_it_was():
    """sva / va score with a frozen copy of the model taken before it learns: the alarm
    learns the label only once the model has, so a refused label changes nothing (the
    stream processor dead-letters it and relies on that)."""
    rng = random.Random(2)
    clf = VennAbersClassifier(Refusing(), mode="sva", window=4, protect=True)
    ref = VennAbersClassifier(Refusing(), mode="sva", window=4, protect=True)
    for i in range(40):  # the refused labels fall on snapshot points (0, 1, 2, 4, 8, ...)
        if i in (0, 1, 4, 8, 9, 16):
            with pytest.raises(ValueError, match="a too large"):
                clf.learn_one({"a": 1000.0}, True)
        x, y = {"a": rng.gauss(0, 1)}, rng.random() < 0.5
        clf.learn_one(x, y)
        ref.learn_one(x, y)
    got, want = (c._protection.alarm.to_state() for c in (clf, ref))
    (_, feed), (_, ref_feed) = got.pop("feeds")[0], want.pop("feeds")[0]
    assert got == want and feed["alarm"] == ref_feed["alarm"]  # the martingale, its bags
    assert feed["waiting"][1:] == ref_feed["waiting"][1:]  # the next bag's scores, labels
    for k in ("seen", "segment", "low_n"):
        assert feed[k] == ref_feed[k], k
    # the snapshots: the same model (as river objects; their pickles may order keys apart)
    snap, ref_snap = (pickle.loads(f["snapshot"]) for f in (feed, ref_feed))
    assert repr(snap.gaussians) == repr(ref_snap.gaussians)
    assert snap.class_counts == ref_snap.class_counts


@pytest.mark.parametrize("mode", ["pretrained", "sva", "va"])
def test_every_mode_alarms_after_a_label_shift_and_says_where_it_began(mode):
    rng = random.Random(4)
    window = 30 if mode == "va" else 200
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), mode=mode, window=window,
                              protect={"recalibrate": False})  # fmt: skip
    for i in range(1600):
        y = rng.random() < (0.15 if i < 800 else 0.75)
        clf.learn_one({"a": rng.gauss(0.8 * y, 1.0)}, y)
        if i < 800:
            assert not clf.alarm
    assert clf.alarm and 800 < clf.alarm_at < 1000
    assert 700 <= clf.alarm_onset <= 900
    copy = pickle.loads(pickle.dumps(clf))
    assert copy.alarm_at == clf.alarm_at and copy.alarm_onset == clf.alarm_onset


def test_multiclass_alarm_off_by_default_on_with_alarm_alpha():
    rng = np.random.default_rng(2)
    off = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=100)
    on = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=100, alarm_alpha=0.01)
    for i in range(2000):
        y = int(rng.choice(3, p=[0.6, 0.3, 0.1] if i < 1000 else [0.1, 0.3, 0.6]))
        x = {"a": float(rng.normal(y, 1.0))}
        assert on.predict_proba_one(x) == off.predict_proba_one(x)
        off.learn_one(x, "xyz"[y])
        on.learn_one(x, "xyz"[y])
        if i < 1000:
            assert not on.alarm
    assert (off.alarm, off.alarm_at, off.log_martingale) == (False, None, None)
    assert on.alarm and 1000 < on.alarm_at < 1100 and 900 <= on.alarm_onset <= 1050
    again = VennAbersMultiClassifier.from_state(on.to_state())
    assert (again.alarm_at, again.alarm_alpha) == (on.alarm_at, 0.01)
    with pytest.raises(ValueError, match="alarm_alpha"):
        VennAbersMultiClassifier(naive_bayes.GaussianNB(), alarm_alpha=2.0)


# --- the false-alarm rate by simulation, per mode --------------------------------------


def _classifier(mode: str, alpha: float):
    protect = {"alpha": alpha, "recalibrate": False}
    if mode == "multiclass":
        return VennAbersMultiClassifier(Centroids(), window=20, refresh_every=20,
                                        alarm_alpha=alpha)  # fmt: skip
    if mode == "field score":
        return VennAbersClassifier(FieldScore("s"), window=20, protect=protect)
    if mode == "mondrian":
        return VennAbersClassifier(Centroids(), window=20, by="g", protect=protect)
    window = 10 if mode == "va" else 20
    return VennAbersClassifier(Centroids(), mode=mode, window=window, protect=protect)


def _null_run(mode: str, seed: int, n: int, alpha: float):
    """One exchangeable stream through a fresh classifier: (alarm, per category alarms)."""
    rng = np.random.default_rng(seed)
    k = 3 if mode == "multiclass" else 2
    clf = _classifier(mode, alpha)
    for x, y in null_stream(rng, n, k=k, categories=2 if mode == "mondrian" else 1):
        if mode == "field score":
            x = {"s": 1.0 / (1.0 + math.exp(-x["a"]))}
        elif mode != "mondrian":
            x = {"a": x["a"]}
        clf.learn_one(x, y)
    feeds = (clf._alarm if mode == "multiclass" else clf._protection.alarm).feeds
    return clf.alarm, {c: f.alarm.alarm for c, f in feeds.items()}


MODES = ["pretrained", "sva", "va", "mondrian", "field score", "multiclass"]


@pytest.mark.parametrize("mode", MODES)
def test_few_null_runs_raise_few_alarms(mode):
    runs = 40
    alarms = sum(_null_run(mode, s, 200, 0.1)[0] for s in range(runs))
    assert alarms <= stats.binom.ppf(0.99, runs, 0.2 if mode == "mondrian" else 0.1)


@pytest.mark.slow
@pytest.mark.skipif(not COMPILED, reason="tens of minutes uncompiled")
@pytest.mark.parametrize("mode", MODES)
def test_false_alarm_rate_per_mode_within_its_binomial_bound(mode):
    """2,000 exchangeable streams of 300 labels (15 refreshes of the scorer or snapshots)
    per mode at alpha 0.1; with ``by`` each of the 2 categories' alarms has level alpha
    (the classifier's: 2 alpha)."""
    runs, alpha = 2000, 0.1
    results = [_null_run(mode, 10_000 + s, 300, alpha) for s in range(runs)]
    bound = stats.binom.ppf(0.99, runs, alpha)
    if mode == "mondrian":
        for c in (0, 1):
            per = sum(cats.get(c, False) for _, cats in results)
            assert per <= bound, f"category {c}: {per} false alarms in {runs} runs"
        assert sum(a for a, _ in results) <= stats.binom.ppf(0.99, runs, 2 * alpha)
    else:
        alarms = sum(a for a, _ in results)
        assert alarms <= bound, f"{mode}: {alarms} false alarms in {runs} runs"
