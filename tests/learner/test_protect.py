"""VennAbersClassifier(protect=...): the protected p, the alarm, late labels, categories, state."""

from __future__ import annotations

import copy
import math
import pickle
import random

import pytest
from river import checks, datasets, linear_model, preprocessing

from streamcal import Protector, VennAbersClassifier
from streamcal.learner import MODES
from streamcal.learner.modes import DEFAULT_MODE
from streamcal.learner.protection import Protection


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def make(mode="pretrained", **kw):
    if mode == "va":
        kw.setdefault("window", 20)
    return VennAbersClassifier(lr(), mode=mode, **kw)


def phishing(n=600):
    return list(datasets.Phishing().take(n))


def _estimator_cases():
    # river's checks take 1-3 s per case: the inner loop checks the default mode without
    # by= (test_classifier checks every mode unprotected), the full run every mode with
    # and without by=.
    for by in (None, "age_of_domain"):
        for mode in MODES:
            slow = by is not None or mode != DEFAULT_MODE
            marks = [pytest.mark.slow] if slow else []
            yield pytest.param(mode, by, id=f"{by}-{mode}", marks=marks)


@pytest.mark.parametrize(("mode", "by"), list(_estimator_cases()))
# river's checks drop features, the by one included: the warning is expected
@pytest.mark.filterwarnings("ignore::streamcal.learner.mondrian.MissingCategoryWarning")
def test_check_estimator(mode, by):
    checks.check_estimator(make(mode, by=by, protect=True))


def test_off_by_default_and_outputs_unchanged():
    default, protected = make(), make(protect={"burn_in": 0})
    assert default.protect is False
    assert (default.alarm, default.alarm_at, default.log_martingale) == (False, None, None)
    moved = 0
    for x, y in phishing():
        a, b = default.predict_interval_one(x), protected.predict_interval_one(x)
        assert a.p_protected is None and b.p_protected is not None
        assert (a.p0, a.p1, a.p, a.score) == (b.p0, b.p1, b.p, b.score)  # VA p untouched
        assert default.predict_proba_one(x)[True] == a.p
        assert protected.predict_proba_one(x)[True] == b.p_protected
        moved += b.p_protected != b.p
        default.learn_one(x, y)
        protected.learn_one(x, y)
    assert moved > 500  # the protected p is its own number


@pytest.mark.parametrize("mode", MODES)
def test_labels_in_order_equal_a_protector_on_the_predicted_p(mode):
    # the protector's burn-in is left out: its ln S is what it gained from the first label
    clf, prot = make(mode, protect={"burn_in": 50}), Protector(burn_in=0)
    base = protected = 0.0
    for x, y in phishing(300):
        iv = clf.predict_interval_one(x)
        assert iv.p_protected == prot.predict(iv.p)
        clf.learn_one(x, y)
        prot.learn(iv.p, y)
        q = min(max(iv.p, prot.eps), 1 - prot.eps)  # the protector's loss is of p clipped
        base -= math.log(q if y else 1 - q)
        protected -= math.log(iv.p_protected if y else 1 - iv.p_protected)
    assert clf.protectors[None] == prot
    assert clf.protection_gain == pytest.approx(prot.log_martingale, abs=1e-9)
    assert clf.protection_gain == pytest.approx(base - protected, abs=1e-9)


@pytest.mark.parametrize("route", ["lookup", "p="])
def test_late_out_of_order_and_missing_labels_learn_the_p_that_was_given(route):
    rng = random.Random(2)
    clf, prot = make(protect={"burn_in": 0}), Protector(burn_in=0)
    pending, missing = [], 0
    for i, (x, y) in enumerate(phishing(800)):
        x = {**x, "id": float(i)}  # distinct features: the look-up is exact
        pending.append((x, y, clf.predict_interval_one(x).p))
        while len(pending) > 30 or (pending and rng.random() < 0.4):
            xo, yo, p = pending.pop(rng.randrange(len(pending)))  # out of order
            if rng.random() < 0.05:
                missing += 1
                continue  # this label never comes
            clf.learn_one(xo, yo, **({"p": p} if route == "p=" else {}))
            prot.learn(p, yo)
            assert clf.protection_gain == pytest.approx(prot.log_martingale, abs=1e-9)
    assert prot.n > 600 and clf.protectors[None] == prot
    assert len(clf._protection._given) == missing + len(pending)  # labelled ones forgotten


def test_a_label_for_an_unpredicted_object_learns_the_p_it_gets_now():
    clf, prot = make(protect={"burn_in": 0}), Protector(burn_in=0)
    for x, y in phishing(200):
        p = clf.predict_interval_one(x).p
        clf._protection._given.clear()  # as if forgotten
        clf.learn_one(x, y)
        prot.learn(p, y)
    assert clf.protectors[None] == prot


@pytest.mark.parametrize("by", [None, "age_of_domain"])
def test_without_the_lookup_predictions_remember_nothing(by):
    """protect={"lookup": False} for a caller that passes every label's p: the same
    protectors as with the look-up, and no table of given p's in the state."""
    rng = random.Random(3)
    on = make(by=by, protect={"burn_in": 0})
    off = make(by=by, protect={"burn_in": 0, "lookup": False})
    pending = []
    for i, (x, y) in enumerate(phishing(600)):
        x = {**x, "id": float(i)}
        iv = on.predict_interval_one(x)
        assert off.predict_interval_one(x) == iv
        pending.append((x, y, iv.p))
        while len(pending) > 30 or (pending and rng.random() < 0.4):
            xo, yo, p = pending.pop(rng.randrange(len(pending)))
            on.learn_one(xo, yo, p=p)
            off.learn_one(xo, yo, p=p)
    assert off.protectors == on.protectors and len(off.protectors) >= 1
    assert len(on.to_state()["protection"]["given"]) == len(pending) > 0
    assert off.to_state()["protection"]["given"] == []
    for again in (VennAbersClassifier.from_state(off.to_state()), pickle.loads(pickle.dumps(off))):
        assert again.protect == {"burn_in": 0, "lookup": False}
        again.predict_interval_one(x)
        assert again.to_state()["protection"]["given"] == []
    # A state written with the look-up, loaded without it, drops its table.
    state = {**on.to_state(), "protect": {"burn_in": 0, "lookup": False}}
    moved = VennAbersClassifier.from_state(state)
    assert moved.to_state()["protection"]["given"] == [] and moved.protectors == on.protectors


def test_without_the_lookup_a_label_without_p_learns_the_p_it_gets_now():
    clf, prot = make(protect={"burn_in": 0, "lookup": False}), Protector(burn_in=0)
    for x, y in phishing(200):
        p = clf.predict_interval_one(x).p  # right after its prediction: the same p now
        clf.learn_one(x, y)
        prot.learn(p, y)
    assert clf.protectors[None] == prot


def test_protection_gain_is_the_sum_over_categories_also_after_evictions():
    rng = random.Random(5)
    prot = Protection({}, max_categories=4)
    assert prot.protection_gain == 0.0
    dropped = 0.0
    for i in range(3000):
        c = rng.randrange(7)
        p = rng.random()
        y = int(rng.random() < (p if c % 2 else 1 - p))  # odd categories calibrated
        if c not in prot.protectors and len(prot.protectors) == 4:
            dropped += next(iter(prot.protectors.values())).log_martingale
        prot.learn(c, p, y)
        want = dropped + sum(q.log_martingale for q in prot.protectors.values())
        assert prot.protection_gain == pytest.approx(want, abs=1e-8)
        if i % 500 == 499:
            prot = Protection.from_state(prot.to_state(), max_categories=4)
    assert dropped != 0.0


def test_protectors_is_a_read_only_view():
    clf = make(by="age_of_domain", protect=True)
    view = clf.protectors
    for x, y in phishing(50):
        clf.learn_one(x, y)
    assert len(view) > 1 and dict(view) == dict(clf.protectors)  # live: no copy
    with pytest.raises(TypeError):
        view["new"] = Protector()


def test_each_category_has_its_own_protector():
    clf = make(by="age_of_domain", protect={"burn_in": 10})
    twins: dict = {}
    for x, y in phishing():
        c = x["age_of_domain"]
        iv = clf.predict_interval_one(x)
        twin = twins.setdefault(c, Protector(burn_in=0))
        assert iv.p_protected == twin.predict(iv.p)
        clf.learn_one(x, y)
        twin.learn(iv.p, y)
    assert clf.protectors == twins and len(twins) > 1
    total = sum(t.log_martingale for t in twins.values())
    assert clf.protection_gain == pytest.approx(total, abs=1e-9)
    alarms = clf._protection.alarm.alarms.values()
    assert clf.log_martingale == max(a.log_martingale for a in alarms)


def test_category_given_as_an_argument():
    clf = make(by=lambda x: 0, protect=True)  # noqa: ARG005 - by is overridden below
    x = {"a": 1.0}
    clf.predict_interval_one(x, category="k")
    clf.learn_one(x, True, category="k")
    assert list(clf.protectors) == ["k"]


def test_the_alarm_fires_after_a_shift_and_stays():
    # After 1,500 labels the labels flip for every object: p is then badly miscalibrated.
    clf = make(window=300, protect={"burn_in": 300})
    data = phishing(1250)
    for i, (x, y) in enumerate(data + data[:600]):
        clf.predict_proba_one(x)
        clf.learn_one(x, (not y) if i >= 1250 else y)
        if i < 1250:
            assert not clf.alarm
    assert clf.alarm and 1250 < clf.alarm_at < 1400 and clf.log_martingale > 5
    assert 1150 <= clf.alarm_onset <= 1300  # where the change began, read back


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("by", [None, "age_of_domain"])
def test_state_pickle_and_deepcopy_resume_identically(mode, by):
    clf = make(mode, by=by, protect={"burn_in": 20, "alpha": 0.2})
    data = phishing(400)
    for x, y in data[:250]:
        clf.predict_proba_one(x)
        clf.learn_one(x, y)
    for x, _ in data[250:260]:  # predictions waiting for their labels
        clf.predict_proba_one(x)
    copies = [
        VennAbersClassifier.from_state(clf.to_state()),
        pickle.loads(pickle.dumps(clf)),
        copy.deepcopy(clf),
    ]
    for x, y in data[250:260] + data[260:]:
        want = clf.predict_interval_one(x)
        assert all(c.predict_interval_one(x) == want for c in copies)
        for c in [clf, *copies]:
            c.learn_one(x, y)
    for c in copies:
        assert c.protectors == clf.protectors
        assert (c.alarm_at, c.log_martingale) == (clf.alarm_at, clf.log_martingale)


def test_clone_keeps_the_setting_and_forgets_the_protectors():
    clf = make(protect={"alpha": 0.05})
    for x, y in phishing(50):
        clf.learn_one(x, y)
    fresh = clf.clone()
    assert fresh.protect == {"alpha": 0.05} and fresh.protectors == {}
    assert clf.protectors[None].n == 50


@pytest.mark.parametrize(
    "protect, match",
    [("yes", "protect must be"), ({"alpha": 0}, "alpha"), ({"nope": 1}, "nope"), (1, "protect")],
)
def test_bad_protect_is_refused(protect, match):
    with pytest.raises(ValueError, match=match):
        make(protect=protect)


@pytest.mark.parametrize("kw", [{"p": float("nan")}, {"p": 1.5}, {"p": "0.5"}])
def test_bad_given_p_is_refused_and_state_kept(kw):
    clf = make(protect=True)
    for x, y in phishing(20):
        clf.learn_one(x, y)
    before = pickle.dumps(clf)
    with pytest.raises(ValueError, match="p must be"):
        clf.learn_one({"a": 1.0}, True, **kw)
    assert pickle.dumps(clf) == before
