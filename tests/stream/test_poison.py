"""No single record stops the processor (issue 29): one event with a feature of 1e300,
1e160, inf or NaN, plus its label, costs at most that event. The model is never left
broken (the learner's guard undoes the learning), the label whose object it could not
learn is a dead letter naming the feature and its value, and every later good event gets
a prediction, in every mode and task, also after a restart from the state directory."""

from __future__ import annotations

import random

import orjson
import pytest

from streamcal.learner.guard import lookahead
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._fakes import Record
from tests._helpers import CHECKPOINT_KEY

DEAD = "streamcal.dead-letters"
PREDICTIONS = "streamcal.predictions"
N, AT = 240, 60  # events, and the poisoned one


def events(n: int = N, at: int = AT, value: bytes = b"1e300", multiclass: bool = False):
    """(event bytes, label bytes) of event i: features a and b, a = ``value`` at ``at``."""
    rng = random.Random(0)
    out = []
    for i in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        if multiclass:
            k = rng.randrange(3)
            a, label = a + 2 * k, "xyz"[k]
        else:
            label = a + 0.5 * rng.gauss(0, 1) > 0
        fa = value if i == at else orjson.dumps(a)
        ev = b'{"id": "e%d", "features": {"a": %s, "b": %s}}' % (i, fa, orjson.dumps(b))
        out.append((ev, orjson.dumps({"id": f"e{i}", "label": label})))
    return out


def processor(**settings):
    config = ProcessorConfig.build(
        events_topic="ev", labels_topic="lab", metrics_file="none", **{"window": 20, **settings}
    )
    proc = Processor(config)
    sent = []
    proc.state.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    return proc, sent


def feed(proc, records, start: int = 0) -> None:
    """Each event, then its label, at increasing record times (offsets from ``start``)."""
    unit = proc.state
    for i, (ev, lab) in enumerate(records, start):
        unit.handle(0, Record("ev", 0, i, 2000 * i, f"e{i}".encode(), ev))
        unit.handle(1, Record("lab", 0, i, 2000 * i + 1000, f"e{i}".encode(), lab))


def check(sent, value: str):
    """Every event predicted, the poisoned one too; the dead letters (if any) are about
    the poisoned event's label."""
    ids = [v["id"] for t, v in sent if t == PREDICTIONS]
    assert ids == [f"e{i}" for i in range(N)]
    dead = [v for t, v in sent if t == DEAD]
    for d in dead:
        assert value in d["reason"], d["reason"]
    return dead


@pytest.mark.parametrize("value", ["1e+300", "1e+160"])
@pytest.mark.parametrize(
    "settings",
    [{}, {"mode": "sva"}, {"mode": "va", "window": 10}, {"by": "g"}, {"model": "gnb"},
     {"task": "multiclass", "model": "softmax"}],
    ids=["pretrained", "sva", "va", "mondrian", "gnb", "multiclass"],
)  # fmt: skip
def test_a_huge_feature_costs_at_most_its_event(settings, value):
    proc, sent = processor(**settings)
    multi = settings.get("task") == "multiclass"
    feed(proc, events(value=value.replace("+", "").encode(), multiclass=multi))
    dead = check(sent, value)
    learn = [d for d in dead if d["reason"].startswith("model could not learn")]
    if settings.get("model") == "gnb":  # Gaussian naive Bayes takes 1e300 in its stride
        assert dead == []
    else:
        (d,) = learn
        assert d["source"] == {"topic": "lab", "partition": 0, "offset": AT,
                               "timestamp_ms": 2000 * AT + 1000}  # fmt: skip
        assert f"label of 'e{AT}'" in d["reason"] and "feature 'a'" in d["reason"]
    clf = proc.state.clf
    probe = {"a": 0.3, "b": 0.1}
    assert lookahead(clf.model, probe, "x" if multi else True) is None


@pytest.mark.parametrize("value", [b"1e999", b"-1e999", b"NaN"])
def test_a_feature_that_is_not_finite_is_a_dead_letter_at_decoding(value):
    proc, sent = processor()
    feed(proc, events(value=value))
    ids = [v["id"] for t, v in sent if t == PREDICTIONS]
    assert ids == [f"e{i}" for i in range(N) if i != AT]
    reasons = [v["reason"] for t, v in sent if t == DEAD]
    assert reasons[0].startswith(("feature 'a' is not finite", "malformed JSON"))
    assert len(reasons) == 2 and reasons[1].startswith("label without event")


@pytest.mark.parametrize("mode", ["pretrained", "sva", "va"])
def test_after_a_restart_every_good_event_gets_a_prediction(mode, tmp_path):
    """The checkpoint is taken right after the poisoned label: "sva" had learned it with
    a finite output (the scaler breaks at the next step), "pretrained" not yet."""
    settings = {"mode": mode, "state_dir": str(tmp_path / "state"),
                "checkpoint_key": CHECKPOINT_KEY}  # fmt: skip
    records = events()
    proc, sent = processor(**settings)
    feed(proc, records[: AT + 1])
    proc.checkpoint_all()
    proc.close()
    again, sent_again = processor(**settings)
    assert again.restored
    probe = {"a": 0.3, "b": 0.1}
    assert lookahead(again.state.clf.model, probe, True) is None  # not saved broken
    feed(again, records[AT + 1 :], start=AT + 1)
    ids = [v["id"] for t, v in sent_again if t == PREDICTIONS]
    assert ids == [f"e{i}" for i in range(AT + 1, N)]
    dead = [v for t, v in sent + sent_again if t == DEAD]
    assert len(dead) == 1 and "1e+300" in dead[0]["reason"]
    if mode == "pretrained":  # learned after the restart: its record was not kept
        assert dead[0]["source"]["offset"] == -1
        assert orjson.loads(dead[0]["value"])["features"]["a"] == 1e300
    else:
        assert dead[0]["source"]["offset"] == AT
