"""VennAbersMultiClassifier: river's contract, exact stores, state, and validity on
shuffled (exchangeable) streams: mean p0 <= frequency <= mean p1 within 3 standard
errors, for the top-label pair and for each class's one-vs-rest pair."""

from __future__ import annotations

import itertools
import math
import pickle
import random

import numpy as np
import pytest
from river import checks, datasets, linear_model, naive_bayes, preprocessing, tree

from streamcal import VennAbersMultiClassifier
from streamcal.core import venn_abers_bruteforce
from streamcal.core.multiclass import pair_score

Z = 3.0
SCHEMES = ["top-label", "one-vs-rest", "one-vs-one"]


def softmax():
    return preprocessing.StandardScaler() | linear_model.SoftmaxRegression()


MODELS = {"gnb": naive_bayes.GaussianNB, "softmax": softmax, "ht": tree.HoeffdingTreeClassifier}


def shuffled_segments(n=None, seed=0):
    data = list(datasets.ImageSegments())
    random.Random(seed).shuffle(data)
    return data[:n]


def blobs(n=1500, k=4, seed=3):
    """Gaussian classes with string labels, overlapping so that calibration matters."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=1.5, size=(k, 3))
    y = rng.integers(0, k, n)
    X = centres[y] + rng.normal(size=(n, 3))
    return [
        ({f"x{j}": float(v) for j, v in enumerate(r)}, f"c{c}") for r, c in zip(X, y, strict=True)
    ]


def _estimator_cases():
    # river's checks take 4-5 s per case: the full run checks every scheme with and
    # without by= (the inner loop checks the binary classifier's, tests/learner/
    # test_classifier.py, and the multiclass front door, tests/learner/test_front_door.py).
    for by in (None, "x0_bin"):
        for scheme in SCHEMES:
            yield pytest.param(scheme, by, id=f"{by}-{scheme}", marks=[pytest.mark.slow])


@pytest.mark.parametrize(("scheme", "by"), list(_estimator_cases()))
# river's checks drop features, the by one included: the warning is expected
@pytest.mark.filterwarnings("ignore::streamcal.learner.mondrian.MissingCategoryWarning")
def test_check_estimator(scheme, by):
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), scheme=scheme, window=50, by=by)
    checks.check_estimator(clf)


def test_refused_settings():
    with pytest.raises(ValueError, match="mode 'va' is not offered"):
        VennAbersMultiClassifier(naive_bayes.GaussianNB(), mode="va")
    with pytest.raises(ValueError, match="scheme must be one of"):
        VennAbersMultiClassifier(naive_bayes.GaussianNB(), scheme="ecoc")
    with pytest.raises(TypeError, match="hashable"):
        VennAbersMultiClassifier(naive_bayes.GaussianNB()).learn_one({"a": 1.0}, ["list"])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_class_seen_gets_a_probability_and_they_sum_to_one(scheme):
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), scheme=scheme, window=20)
    assert clf.predict_proba_one({"a": 1.0}) == {}
    assert clf.predict_one({"a": 1.0}) is None
    labels = ["a", 7, ("t", 1), frozenset("z")]  # any hashable; classes arrive one by one
    seen = []
    for i in range(200):
        n_known = min(i // 50, 3) + 1  # a new class every 50 events
        y = labels[n_known - 1] if i % 2 else labels[(i // 2) % n_known]
        x = {"u": float(i % 5) + 0.1 * i, "v": float(labels.index(y))}
        if y not in seen:
            seen.append(y)
        clf.learn_one(x, y)
        proba = clf.predict_proba_one(x)
        assert list(proba) == seen
        assert math.isclose(sum(proba.values()), 1.0)
        assert all(0.0 <= p <= 1.0 for p in proba.values())
        pred = clf.predict_interval_one(x)
        assert clf.predict_one(x) == max(proba, key=proba.get) and pred.proba == proba
        assert pred.p == proba[pred.label] and pred.p0 <= pred.p <= pred.p1
    assert seen == labels


def test_the_stores_are_exact_on_the_calibration_set():
    """The per-class and per-pair pairs the learner reports equal the brute-force oracle
    on the calibration set it holds (a class that arrived late included)."""
    data = blobs(400)
    data[350] = (data[350][0], "late")
    for scheme in ("one-vs-rest", "one-vs-one"):
        clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), scheme=scheme, window=60)
        for x, y in data[:360]:
            clf.learn_one(x, y)
        cal = list(clf._state.calibration)
        labels = clf.classes
        k = len(labels)
        S = [list(c[2]) + [0.0] * (k - len(c[2])) for c in cal]
        y = [c[1] for c in cal]
        for x, _ in data[360:370]:
            pred = clf.predict_interval_one(x)
            s = [pred.scores[c] for c in labels]
            top = int(np.argmax(s))
            assert (pred.p0, pred.p1) == venn_abers_bruteforce(
                [r[int(np.argmax(r))] for r in S],
                [int(int(np.argmax(r)) == v) for r, v in zip(S, y, strict=True)],
                s[top],
            )
            for key, pair in pred.intervals.items():
                if scheme == "one-vs-rest":
                    c = labels.index(key)
                    want = venn_abers_bruteforce([r[c] for r in S], [int(v == c) for v in y], s[c])
                else:
                    i, j = labels.index(key[0]), labels.index(key[1])
                    rows = [(r, v) for r, v in zip(S, y, strict=True) if v in (i, j)]
                    want = venn_abers_bruteforce(
                        [pair_score(r[i], r[j]) for r, _ in rows],
                        [int(v == j) for _, v in rows],
                        pair_score(s[i], s[j]),
                    )
                assert pair == want


@pytest.mark.parametrize("by", [None, "x2_bin"])
def test_state_and_pickle_round_trips_continue_identically(by):
    data = blobs(500)
    for x, _ in data:
        x["x2_bin"] = x["x2"] > 0
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=40, refresh_every=15, by=by)
    for x, y in data[:250]:
        clf.learn_one(x, y)
    copies = [VennAbersMultiClassifier.from_state(clf.to_state()), pickle.loads(pickle.dumps(clf))]
    for x, y in data[250:]:
        want = clf.predict_interval_one(x)
        for c in copies:
            assert c.predict_interval_one(x) == want
            c.learn_one(x, y)
        clf.learn_one(x, y)


def test_refresh_every_defaults_to_two_windows():
    data = blobs(400)
    default = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=30)
    explicit = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=30, refresh_every=60)
    one_window = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=30, refresh_every=30)
    differ = 0
    for x, y in data:
        pred = default.predict_interval_one(x)
        assert pred == explicit.predict_interval_one(x)
        differ += pred != one_window.predict_interval_one(x)
        for clf in (default, explicit, one_window):
            clf.learn_one(x, y)
    assert differ > 0


def test_classes_the_model_knows_before_any_label_are_included():
    model = naive_bayes.GaussianNB()
    for i in range(30):
        model.learn_one({"a": float(i % 3)}, "abc"[i % 3])
    clf = VennAbersMultiClassifier(model, window=10)
    assert sorted(clf.predict_proba_one({"a": 1.0})) == ["a", "b", "c"]
    clf.learn_one({"a": 1.0}, "d")
    assert sorted(clf.predict_proba_one({"a": 1.0})) == ["a", "b", "c", "d"]


def run(clf, stream):
    """Per prediction: top-label (p0, p1, right?) and each class's one-vs-rest pair (or,
    one-vs-one, each pair's, over the objects labelled with one of its two classes)."""
    top, per_class = [], {}
    for x, y in stream:
        pred = clf.predict_interval_one(x)
        if pred is not None:
            top.append((pred.p0, pred.p1, float(pred.label == y)))
            for c, (p0, p1) in pred.intervals.items():
                if isinstance(c, tuple):  # one-vs-one: "y is c[1]", among objects of c[0] or c[1]
                    if y in c:
                        per_class.setdefault(c, []).append((p0, p1, float(y == c[1])))
                else:
                    per_class.setdefault(c, []).append((p0, p1, float(c == y)))
        clf.learn_one(x, y)
    return np.array(top), {c: np.array(v) for c, v in per_class.items()}


def assert_band(rows, what):
    p0, p1, hit = rows.T
    for d, side in ((hit - p0, "mean p0 <= frequency"), (p1 - hit, "frequency <= mean p1")):
        allowance = Z * d.std(ddof=1) / math.sqrt(len(d))
        assert d.mean() >= -allowance, f"{what}: {side} fails ({d.mean():.4f} < -{allowance:.4f})"


@pytest.mark.parametrize("model", ["gnb", "softmax"])
def test_top_label_and_per_class_bands_hold_on_shuffled_segments(model):
    top, per_class = run(
        VennAbersMultiClassifier(MODELS[model](), window=300), shuffled_segments(1200)
    )
    assert_band(top, "top-label")
    for c, rows in per_class.items():
        assert_band(rows, f"class {c}")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("data", ["segments", "blobs"])
def test_bands_hold_for_every_model_scheme_and_data_set(data, model, scheme):
    stream = shuffled_segments() if data == "segments" else blobs(3000)
    top, per_class = run(VennAbersMultiClassifier(MODELS[model](), scheme=scheme), stream)
    assert_band(top, "top-label")
    for c, rows in per_class.items():
        assert_band(rows, f"class {c}")


def test_binary_classifier_is_untouched_by_a_multiclass_one():
    """The binary classifier that has learned binary labels refuses a class that is not an
    integer, naming the multiclass one (tests/learner/test_front_door.py has the rest)."""
    from streamcal import VennAbersClassifier

    clf = VennAbersClassifier(naive_bayes.GaussianNB())
    clf.learn_one({"a": 1.0}, True)
    with pytest.raises(ValueError, match="'sky' is not an integer.*VennAbersMultiClassifier"):
        clf.learn_one({"a": 1.0}, "sky")
    both = list(itertools.islice(datasets.Phishing(), 50))
    multi = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=20)
    for x, y in both:
        multi.learn_one(x, y)
    assert sorted(multi.predict_proba_one(both[0][0])) == [False, True]


@pytest.mark.slow
def test_benchmark_quick_run_prints_its_tables():
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "multiclass.py"), "--quick"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert "### Prequential quality" in out and "### Cost per event at K = 7" in out
    assert "### Batch anchor" in out
    quality = [line for line in out.splitlines() if line.startswith("| segments | shuffled")]
    assert len(quality) == len(MODELS) * len(SCHEMES)
    assert all("| yes |" in line for line in quality)  # the top-label band holds


@pytest.mark.parametrize(
    "proba, ok",
    [
        ({"a": 0.5, "b": float("nan")}, False),
        ({"a": float("inf"), "b": 0.5}, False),
        ({"a": float("inf"), "b": -float("inf")}, False),
        ({"a": 1e308, "b": 1e308}, True),  # their sum overflows; each is finite
    ],
)
def test_score_vector_refuses_a_probability_that_is_not_finite(proba, ok):
    from streamcal.learner.multiclass import Classes, score_vector

    class Fixed(naive_bayes.GaussianNB):
        def predict_proba_one(self, x):
            return dict(proba)

    if ok:
        assert score_vector(Fixed(), {"u": 1.0}, Classes()) == tuple(proba.values())
    else:
        with pytest.raises(ValueError, match="not finite"):
            score_vector(Fixed(), {"u": 1.0}, Classes())
