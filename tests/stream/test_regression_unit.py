"""The regression unit (``--task regression``) without a broker.

Its predictions equal a bare ``ConformalPredictiveRegressor``'s fed in the unit's join
order, and its tracker equals a ``RegressionTracker`` fed each label's PIT and CRPS read
from the distribution that was predicted (labels right after their events: nothing is
learned in between, so the distribution is the one the join reads); every interval
holds its median; bad labels are dead-lettered with the state unchanged; a restart from
a checkpoint file predicts as the uninterrupted run, and a restart with a setting changed
that changes what is held or predicted is refused; the settings' rules. With ``--by``
(a top-level field, many values, few kept) the same: the bare regressor with ``by`` fed
the categories, each prediction and tracker line under its category, a restart equal to
the uninterrupted run, the Mondrian settings bound to the checkpoint.
"""

from __future__ import annotations

import math
import random

import orjson
import pytest

from streamcal.monitoring.regression_tracker import RegressionTracker
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.state.checkpoint import CheckpointError, CheckpointStore
from streamcal.stream.tasks.regression import StreamRegressor, _scaled_linear_regression
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record
from tests._helpers import assert_bad_label_dead_lettered, full_state, resume


def _config(**settings) -> ProcessorConfig:
    base = dict(events_topic="ev", labels_topic="lab", metrics_file="none", task="regression",
                window=300, quantiles="0.1,0.5,0.9", interval_coverage=0.8)  # fmt: skip
    return ProcessorConfig.build(**{**base, **settings})


def _unit(config):
    unit = CalibrationUnit(config)
    sent = []
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    return unit, sent


def _stream(n: int, seed: int):
    """Events (id, x) and labels (id, y): y = 3 x1 - x2 + noise growing with |x1|."""
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        x1, x2 = rng.uniform(-2, 2), rng.uniform(-1, 1)
        events.append((f"e{i}", {"x1": x1, "x2": x2}))
        labels.append((f"e{i}", 3 * x1 - x2 + rng.gauss(0, 0.5 + abs(x1))))
    return events, labels


def _records(items, start: int = 0):
    for t, (kind, (eid, v)) in enumerate(items, start):
        body = {"id": eid, "features": v} if kind == "e" else {"id": eid, "label": v}
        yield kind, Record("ev" if kind == "e" else "lab", 0, t, 1000 + t, eid.encode(),
                           orjson.dumps(body))  # fmt: skip


def _feed(unit, items, start: int = 0):
    for kind, rec in _records(items, start):
        (unit.on_event if kind == "e" else unit.on_label)(rec)


def _interleaved(events, labels):
    return [it for ev, lab in zip(events, labels, strict=True) for it in (("e", ev), ("l", lab))]


def _schedule(events, labels, delay: int, rng):
    at = [(i + 0.5, ("e", ev)) for i, ev in enumerate(events)]
    at += [(i + rng.randrange(0, delay + 1) + 0.75, ("l", lab)) for i, lab in enumerate(labels)]
    return [item for _, item in sorted(at, key=lambda a: a[0])]


def _predictions(sent):
    return [m for t, m in sent if t == "streamcal.predictions"]


def test_predictions_and_tracker_equal_the_bare_regressor():
    events, labels = _stream(400, seed=1)
    unit, sent = _unit(_config(alarm=False, protect=False))
    _feed(unit, _interleaved(events, labels))
    clf = StreamRegressor(_scaled_linear_regression(), window=300)
    tracker = RegressionTracker(window=1000, bins=10)
    expected = []
    for (eid, x), (_, y) in zip(events, labels, strict=True):
        dist = clf.predict_distribution_one(x)
        lo, hi = dist.interval(0.8)
        expected.append((eid, dist.median, lo, hi, dist.quantile(0.1), dist.quantile(0.9)))
        if math.isfinite(lo) and math.isfinite(hi):
            tracker.update(lo, hi, y, 0.8, pit=dist.cdf(y), crps=dist.crps(y))
        clf.learn_one(x, y)

    def finite(v):
        return v if math.isfinite(v) else None

    got = [(m["id"], m["y_hat"], m["lo"], m["hi"], m["quantiles"]["0.1"], m["quantiles"]["0.9"])
           for m in _predictions(sent)]  # fmt: skip
    assert got == [(e, yh, finite(lo), finite(hi), finite(a), finite(b))
                   for e, yh, lo, hi, a, b in expected]  # fmt: skip
    snap, ref = unit.snapshot(), tracker.snapshot(reliability=True)
    assert snap["labels"] == ref["labels"] > 350
    for key in ("coverage", "crps", "interval_width", "interval_score", "pit_histogram",
                "recent_crps", "frequency"):  # fmt: skip
        assert snap[key] == ref[key], key


def test_every_interval_holds_its_median_and_covers_as_claimed():
    events, labels = _stream(2500, seed=2)
    unit, sent = _unit(_config(interval_coverage=0.9, window=1000))
    _feed(unit, _interleaved(events, labels))
    preds = _predictions(sent)
    assert len(preds) == 2500
    bounded = [m for m in preds if m["lo"] is not None and m["hi"] is not None]
    assert len(bounded) > 2400
    for m in bounded:
        assert m["lo"] <= m["y_hat"] <= m["hi"]
        q = m["quantiles"]
        assert q["0.1"] <= q["0.5"] == m["y_hat"] <= q["0.9"]
    snap = unit.snapshot()
    assert 0.87 <= snap["coverage"] <= 0.93 and snap["interval_coverage"] == 0.9
    assert snap["crps"] > 0 and snap["log_martingale"] is not None
    counts = [b["count"] for b in snap["pit_histogram"]]
    assert sum(counts) == snap["labels"] and min(counts) > 0.7 * max(counts)


@pytest.mark.parametrize(
    "label, reason",
    [
        ("4.5", "label is not a finite number: '4.5'"),
        (True, "label is not a finite number: True"),
        (None, "label is not a finite number: None"),
        ([1], "label is not a finite number: an array of 1 items"),
    ],
)
def test_a_label_that_is_not_a_number_is_dead_lettered_with_the_state_unchanged(label, reason):
    events, labels = _stream(60, seed=4)
    unit, sent = _unit(_config())
    _feed(unit, _interleaved(events, labels))
    _feed(unit, [("e", ("bad", {"x1": 0.0, "x2": 0.0}))])
    assert_bad_label_dead_lettered(unit, sent, label, reason)


def test_a_restart_from_a_checkpoint_file_predicts_as_the_uninterrupted_run(tmp_path):
    events, labels = _stream(600, seed=5)
    items = _schedule(events, labels, delay=15, rng=random.Random(6))
    cut = len(items) // 2
    whole, sent_whole = _unit(_config())
    _feed(whole, items)
    first, _ = _unit(_config())
    _feed(first, items[:cut])
    store = CheckpointStore(tmp_path, key=b"0123456789abcdef")
    store.save(full_state(first))
    second = resume(store.load(), config=_config())
    sent = []
    second.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    _feed(second, items[cut:], start=cut)  # record times go on: the label delays too
    tail = [m for _, m in sent_whole][-len(sent) :]
    assert len(sent) > 250 and [m for _, m in sent] == tail
    assert second.snapshot() == whole.snapshot()  # the alarm's fields included
    assert second.clf.log_martingale == whole.clf.log_martingale


@pytest.mark.parametrize("changed, written, configured", [
    (dict(interval_coverage=0.9), "interval_coverage=0.8", "interval_coverage=0.9"),
    (dict(quantiles="0.1,0.9"), r"quantiles=\[0.1, 0.5, 0.9\]", r"quantiles=\[0.1, 0.9\]"),
    (dict(window=500), "window=300", "window=500"),
    (dict(alarm_alpha=0.05), "alarm_alpha=0.01", "alarm_alpha=0.05"),
    (dict(model="river.linear_model:LinearRegression"), "model='logreg'",
     "model='river.linear_model:LinearRegression'"),
])  # fmt: skip
def test_a_restart_with_changed_settings_is_refused_naming_the_setting(changed, written,
                                                                       configured):  # fmt: skip
    events, labels = _stream(50, seed=3)
    unit, _ = _unit(_config())
    _feed(unit, _interleaved(events, labels))
    state = full_state(unit)
    assert state["fingerprint"]["interval_coverage"] == 0.8
    assert state["fingerprint"]["quantiles"] == [0.1, 0.5, 0.9]
    with pytest.raises(CheckpointError, match=f"written with {written} but .* {configured}"):
        CalibrationUnit.from_state(state, config=_config(**changed))
    # the same settings written otherwise are the same settings
    again = resume(state, config=_config(quantiles=" 0.1, 0.5 ,0.9"))
    assert again.clf.calibration_size == unit.clf.calibration_size == 50


def test_the_fingerprint_binds_a_regression_state_to_its_task():
    unit, _ = _unit(_config())
    binary = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none",
                                   window=300)  # fmt: skip
    with pytest.raises(CheckpointError, match="task='regression' but .* task='binary'"):
        CalibrationUnit.from_state(full_state(unit), config=binary)
    # a binary state has no regression settings to be bound to
    assert "interval_coverage" not in CalibrationUnit(binary).to_state()["fingerprint"]


def test_config_rules():
    # --by takes the classifiers' Mondrian settings and their rules
    _config(by="shop", max_categories=5, min_category=3).validate()
    _config(by="shop", fallback="off").validate()
    with pytest.raises(ValueError, match="max_categories needs by"):
        _config(max_categories=5).validate()
    with pytest.raises(ValueError, match="min_category needs the pooled fallback"):
        _config(by="shop", fallback="off", min_category=3).validate()
    with pytest.raises(ValueError, match="model 'gnb' is a classifier"):
        _config(model="gnb").validate()
    with pytest.raises(ValueError, match="quantiles must be comma-separated levels"):
        _config(quantiles="0.5,0.5").validate()
    with pytest.raises(ValueError, match="interval_coverage must be in"):
        _config(interval_coverage=1.0).validate()
    with pytest.raises(ValueError, match="label_default .* finite number"):
        _config(label_horizon=10.0, label_default="high").validate()
    _config(model="river.linear_model:LinearRegression", protect=False).validate()
    with pytest.raises(ValueError, match="returned a classifier, not a regressor"):
        CalibrationUnit(_config(model="river.naive_bayes:GaussianNB"))


@pytest.mark.parametrize("mode", ["pretrained", "sva", "va"])
@pytest.mark.parametrize("mondrian", [{}, {"by": "shop", "fallback": "pooled"}])
def test_a_mode_is_refused_naming_the_flag_the_regressor_has_none(mode, mondrian):
    # before: --mode was silently ignored, and with --by --fallback pooled refused with the
    # classifiers' "needs by and mode 'pretrained'"
    with pytest.raises(ValueError) as exc:
        _config(mode=mode, **mondrian).validate()
    message = str(exc.value)
    assert f"got --mode {mode}" in message and "the regressor has no mode" in message
    assert "needs by and mode" not in message


def test_the_pooled_fallback_is_checked_the_regressors_way():
    # by alone is enough (no mode); without by the fallback is refused as the learner does
    _config(by="shop", fallback="pooled").validate()
    _config(by="shop", fallback="pooled", min_category=4).validate()
    with pytest.raises(ValueError, match=r"^fallback needs by \(Mondrian calibration\)$"):
        _config(fallback="pooled").validate()
    with pytest.raises(ValueError, match="min_category needs the pooled fallback"):
        _config(by="shop", fallback="off", min_category=3).validate()
    # the classifiers keep their own rule
    with pytest.raises(ValueError, match="fallback='pooled' needs by and mode 'pretrained'"):
        _config(task="binary", quantiles="0.1,0.9", interval_coverage=0.9, by="shop",
                fallback="pooled", mode="sva", window=None).validate()  # fmt: skip


def test_streamcal_run_refuses_a_regression_mode_in_two_lines(capsys, monkeypatch, tmp_path):
    from streamcal.cli import main
    from tests._helpers import CHECKPOINT_KEY, error_of

    monkeypatch.setenv("STREAMCAL_CHECKPOINT_KEY", CHECKPOINT_KEY)
    argv = ["run", "--task", "regression", "--mode", "sva", "--by", "shop", "--fallback",
            "pooled", "--bootstrap-servers", "127.0.0.1:1",
            "--state-dir", str(tmp_path)]  # fmt: skip
    assert main(argv) == 2
    err = error_of(capsys.readouterr().err)
    assert err.startswith("streamcal run: error: --mode is the classifiers'"), err


# --------------------------------------------------------------------------- --by
def _with_shops(items, shops: int, seed: int):
    """Events with a top-level field "shop" (not a feature): ``shops`` values, skewed, so
    that some are kept and answer on their own while rare ones churn."""
    rng = random.Random(seed)
    out = []
    for kind, (eid, v) in items:
        if kind == "e":
            v = {"features": v, "shop": f"s{min(int(rng.paretovariate(1.0)), shops) - 1}"}
        out.append((kind, (eid, v)))
    return out


def _feed_by(unit, items, start: int = 0):
    for t, (kind, (eid, v)) in enumerate(items, start):
        body = {"id": eid, **v} if kind == "e" else {"id": eid, "label": v}
        topic = "ev" if kind == "e" else "lab"
        rec = Record(topic, 0, t, 1000 + t, eid.encode(), orjson.dumps(body))
        (unit.on_event if kind == "e" else unit.on_label)(rec)


_BY = dict(by="shop", max_categories=6, min_category=10, window=200)


def test_by_predictions_and_tracker_equal_the_bare_regressor_fed_the_categories():
    events, labels = _stream(1500, seed=8)
    items = _with_shops(_interleaved(events, labels), shops=40, seed=9)
    unit, sent = _unit(_config(alarm=True, **_BY))
    _feed_by(unit, items)
    clf = StreamRegressor(_scaled_linear_regression(), window=200, by="shop",
                          max_categories=6, min_category=10, alarm_alpha=0.01)  # fmt: skip
    shop = {eid: v["shop"] for kind, (eid, v) in items if kind == "e"}
    expected, pooled = [], 0
    for (eid, x), (_, y) in zip(events, labels, strict=True):
        c = shop[eid]
        dist = clf.predict_distribution_one(x, category=c)
        pooled += c not in clf.categories
        expected.append((eid, c, dist.median, dist.interval(0.8)))
        clf.learn_one(x, y, category=c)

    def finite(v):
        return v if math.isfinite(v) else None

    got = [(m["id"], m["category"], m["y_hat"], m["lo"], m["hi"]) for m in _predictions(sent)]
    assert got == [(e, c, yh, finite(lo), finite(hi)) for e, c, yh, (lo, hi) in expected]
    assert unit.clf.evictions == clf.evictions > 100 and unit.clf.categories == clf.categories
    assert pooled > 100  # new or evicted shops were answered, from the pooled residuals
    # bounded once the store answering holds 9 residuals (own: 10 at least; pooled: the
    # newest 200 of the stream, over 10 bins of yhat); without the pooled answer, the many
    # new and evicted shops would have none
    late = _predictions(sent)[300:]
    bounded = [m for m in late if m["lo"] is not None and m["hi"] is not None]
    assert len(bounded) > 0.97 * len(late)
    assert all(m["lo"] <= m["y_hat"] <= m["hi"] for m in bounded)
    off, sent_off = _unit(_config(alarm=True, **{**_BY, "min_category": None}, fallback="off"))
    _feed_by(off, items)
    late_off = _predictions(sent_off)[300:]
    assert sum(m["lo"] is not None for m in late_off) < 0.8 * len(late_off)
    rows = {row["category"]: row for row in unit.category_snapshots()}
    assert "s0" in rows and rows["s0"]["labels"] > 200
    assert unit.clf.log_martingale == clf.log_martingale


def test_by_restart_from_a_checkpoint_file_predicts_as_the_uninterrupted_run(tmp_path):
    events, labels = _stream(900, seed=10)
    items = _with_shops(_schedule(events, labels, delay=15, rng=random.Random(11)), 30, 12)
    cut = len(items) // 2
    whole, sent_whole = _unit(_config(**_BY))
    _feed_by(whole, items)
    first, _ = _unit(_config(**_BY))
    _feed_by(first, items[:cut])
    assert first.clf.evictions > 0
    store = CheckpointStore(tmp_path, key=b"0123456789abcdef")
    store.save(full_state(first))
    second = resume(store.load(), config=_config(**_BY))
    sent = []
    second.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    _feed_by(second, items[cut:], start=cut)
    tail = [m for _, m in sent_whole][-len(sent) :]
    assert len(sent) > 400 and [m for _, m in sent] == tail
    assert second.snapshot() == whole.snapshot()
    assert second.category_snapshots() == whole.category_snapshots()
    assert second.clf.categories == whole.clf.categories


@pytest.mark.parametrize("changed, written, configured", [
    (dict(max_categories=7), "max_categories=6", "max_categories=7"),
    (dict(min_category=9), "min_category=10", "min_category=9"),
    (dict(fallback="off"), "fallback=None", "fallback='off'"),
    (dict(by="till"), "by='shop'", "by='till'"),
])  # fmt: skip
def test_a_by_restart_with_other_mondrian_settings_is_refused(changed, written, configured):
    events, labels = _stream(50, seed=13)
    by = {k: v for k, v in _BY.items() if k != "min_category" or "fallback" not in changed}
    unit, _ = _unit(_config(**by))
    _feed_by(unit, _with_shops(_interleaved(events, labels), 5, 14))
    state = full_state(unit)
    with pytest.raises(CheckpointError, match=f"written with {written} but .* {configured}"):
        CalibrationUnit.from_state(state, config=_config(**{**by, **changed}))
    again = resume(state, config=_config(**by))
    assert again.clf.categories == unit.clf.categories


@pytest.mark.parametrize("category", ["s1", 7, 2.5, True, None])
def test_what_waits_keeps_its_category_exactly(category):
    unit, _ = _unit(_config(**_BY))
    pred = unit.task.pending_type({"x1": 0.5, "x2": -1.0}, 1.5, 0.75, 0.3, -2.0, math.inf,
                                  category)  # fmt: skip
    for time in (None, 1234.5):
        back = unit.task.unpack(unit.task.pack(pred, time))
        assert back == pred._replace(time=time)
        assert type(back.category) is type(category)
