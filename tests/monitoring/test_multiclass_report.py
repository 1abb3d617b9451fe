"""`streamcal report` on a multiclass predictions file joined with labels.

The predictions a multiclass unit sends (the processor's code, without a broker), joined
with their labels inline (``y``) or from a labels file, give the report of the unit's own
metric log: the same numbers, per-class rows and figures of the last line. Bad input is
refused naming the line, with nothing written.
"""

from __future__ import annotations

import json
import random

import orjson
import pytest

from streamcal.cli import main
from streamcal.monitoring import schema
from streamcal.monitoring.metric_log import split_classes
from streamcal.monitoring.shapes import log_from_predictions
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.metrics import MetricEmitter
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record
from tests._helpers import error_of

pytest.importorskip("matplotlib")

CENTRES = {"red": (0, 0), "green": (2, 0), "blue": (0, 2), 7: (2, 2)}


def _run(tmp_path, n=400, by=None):
    """A multiclass unit fed ``n`` events, each labelled at once; its metric log (the last
    line after the last label), the predictions it sent and the labels."""
    settings = dict(events_topic="ev", labels_topic="lab", task="multiclass", model="gnb",
                    window=80, metrics_file=str(tmp_path / "metrics.jsonl"),
                    tracker_window=150, tracker_bins=8)  # fmt: skip
    if by is not None:
        settings["by"] = by
    config = ProcessorConfig.build(**settings)
    unit = CalibrationUnit(config)
    predictions = []
    unit.send = lambda topic, key, value: predictions.append(orjson.loads(value))
    emitter = MetricEmitter(config, "i-1")
    emitter.start({None: unit})
    rng = random.Random(5)
    labels = []
    for i in range(n):
        # the class 7 (an integer label: the class "7") first appears mid-stream
        y = rng.choice([c for c in CENTRES if c != 7 or i >= n // 3])
        x = {"x1": rng.gauss(CENTRES[y][0], 1), "x2": rng.gauss(CENTRES[y][1], 1)}
        eid = f"e{i}"
        event = {"id": eid, "features": x, "shop": "s1" if i % 3 else "s2"}
        unit.on_event(Record("ev", 0, i, 1000 + i, eid.encode(), orjson.dumps(event)))
        unit.on_label(Record("lab", 0, i, 1000 + i, eid.encode(),
                             orjson.dumps({"id": eid, "label": y})))  # fmt: skip
        labels.append({"id": eid, "label": y})
        if (i + 1) % 100 == 0:
            emitter.emit_unit(unit, {"merge_stalls": 0, "late_arrivals": 0})
    emitter.close()
    return predictions, labels


def _write(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def _joined(predictions, labels):
    return [{**p, "y": lab["label"]} for p, lab in zip(predictions, labels, strict=True)]


def _report(tmp_path, name, *args):
    out = tmp_path / name
    assert main(["report", *map(str, args), "--out", str(out), "--window", "150",
                 "--bins", "8", "--no-progress"]) == 0  # fmt: skip
    return out, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("by", [None, pytest.param("shop", marks=pytest.mark.slow)])
def test_predictions_file_gives_the_report_of_the_metric_log(tmp_path, by):
    predictions, labels = _run(tmp_path, by=by)
    assert predictions[0]["label"] is None  # before any class: not tracked
    assert set(predictions[-1]["probabilities"]) == {"red", "green", "blue", "7"}
    inline = _write(tmp_path / "joined.jsonl", _joined(predictions, labels))
    bare = _write(tmp_path / "predictions.jsonl", predictions)
    labels_file = _write(tmp_path / "labels.jsonl", labels)

    log_out, from_log = _report(tmp_path, "from-log", tmp_path / "metrics.jsonl")
    for name, args in [("inline", [inline]), ("joined", [bare, "--labels", labels_file])]:
        out, doc = _report(tmp_path, name, *args)
        # every number the tracker gives is the metric log's, exactly
        tracked = {k: v for k, v in doc.items() if k not in ("per_class", "categories")}
        assert len(tracked) >= 25 and doc["labels"] == 399 and doc["classes"] == 4
        assert doc["multiclass_log_loss"] is not None and doc["raw_multiclass_log_loss"]
        for key, value in tracked.items():
            assert from_log[key] == value, key
        strip = ("unit", "instance")
        rows = [{k: v for k, v in r.items() if k not in strip} for r in from_log["per_class"]]
        assert doc["per_class"] == rows
        assert sorted(r["class"] for r in rows) == ["7", "blue", "green", "red"]
        if by is None:
            assert "categories" not in doc
        else:
            cats = [{k: v for k, v in r.items() if k not in strip} for r in from_log["categories"]]
            # the metric log's rows also carry each category's alarm (not in a predictions file)
            assert all(set(schema.CATEGORY_ALARM_KEYS) <= set(r) for r in cats)
            alarm = set(schema.CATEGORY_ALARM_KEYS)
            assert doc["categories"] == [{k: v for k, v in r.items() if k not in alarm}
                                         for r in cats] and len(cats) >= 2  # fmt: skip
        # figures of the last line: the same pictures
        for fig in ("reliability.png", "classes.png"):
            assert (out / fig).read_bytes() == (log_out / fig).read_bytes(), fig
        page = (out / "report.html").read_text()
        assert "Per class" in page and "Multiclass: of the top label" in page
        assert "399 labelled multiclass predictions" in page


def test_labels_file_leaves_out_unlabelled_predictions(tmp_path):
    predictions, labels = _run(tmp_path, n=150)
    bare = _write(tmp_path / "p.jsonl", predictions)
    # every other label, in another order, plus one for an event never predicted
    some = labels[::2][::-1] + [{"id": "nowhere", "label": "red"}]
    log = log_from_predictions(bare, labels=_write(tmp_path / "l.jsonl", some))
    inline = [{**p, "y": lab["label"]} for p, lab in zip(predictions, labels, strict=True)]
    reference = log_from_predictions(
        _write(tmp_path / "j.jsonl", inline[::2]), window=1000
    )
    predicted = sum(p["label"] is not None for p in predictions[::2])
    whole, by_class = split_classes(log)
    assert log == reference and whole[-1]["labels"] == predicted > 40 and len(by_class) == 4


def test_binary_predictions_with_a_labels_file(tmp_path):
    preds = [{"id": f"e{i}", "p0": 0.1 + i / 200, "p1": 0.2 + i / 200, "score": i / 100}
             for i in range(60)]  # fmt: skip
    ys = [True, "1", 0, 1.0, "false", "true"]
    labels = [{"id": f"e{i}", "label": ys[i % 6]} for i in range(60)]
    got = log_from_predictions(
        _write(tmp_path / "p.jsonl", preds), labels=_write(tmp_path / "l.jsonl", labels)
    )
    joined = [{**p, "label": [1, 1, 0, 1, 0, 1][i % 6]} for i, p in enumerate(preds)]
    assert got == log_from_predictions(_write(tmp_path / "j.jsonl", joined))


MC = {"id": "e1", "label": "a", "p0": 0.5, "p1": 0.7, "p": 0.6,
      "probabilities": {"a": 0.6, "b": 0.4}, "y": "b"}  # fmt: skip
BIN = {"id": "e2", "p0": 0.2, "p1": 0.4, "label": 1}


@pytest.mark.parametrize(
    "lines, message",
    [
        ([MC, BIN], "line 2: missing field 'probabilities'"),
        ([BIN, MC], "line 2: a multiclass prediction (it has 'probabilities')"),
        ([MC, {**MC, "probabilities": None}], "line 2: missing field 'probabilities'"),
        ([MC, {**MC, "y": 2.5}], "line 2: field 'y': label is not a class"),
        ([MC, {**MC, "y": True}], "line 2: field 'y': label is not a class"),
        ([MC, {**MC, "y": ""}], "line 2: field 'y': empty label"),
        ([MC, {k: v for k, v in MC.items() if k != "y"}], "line 2: missing field 'y'"),
        ([MC, MC, {**MC, "p1": 1.5}], "line 3: need p0, p1, p and score in [0, 1]"),
        ([MC, {**MC, "probabilities": {"a": "x"}}], "line 2: field 'probabilities' must be"),
        ([MC, {**MC, "intervals": {"a": [0.1]}}], "line 2: field 'intervals' must be"),
        ([{**MC, "label": None}], "nothing to track: every 'label' (predicted class) is null"),
    ],
)
def test_cli_refuses_bad_multiclass_input_naming_the_line(tmp_path, capsys, lines, message):
    f = _write(tmp_path / "bad.jsonl", lines)
    assert main(["report", str(f), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamcal report: error: ") and message in err, err
    error_of(err)  # asserts two lines: the error, its what to do; nothing else
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "labels, message",
    [
        ([{"id": "e1", "label": 4.0}], "l.jsonl: line 1: label is not a class"),
        ([{"id": "e1", "label": "a"}, {"id": "e1", "label": "b"}],
         "l.jsonl: line 2: a second label for id 'e1' (the first is on line 1)"),
        ([{"id": "e1"}], "l.jsonl: line 1: missing field 'label'"),
        ([{"id": "zz", "label": "a"}], "no prediction of a class has a label in"),
    ],
)  # fmt: skip
def test_cli_refuses_a_bad_labels_file(tmp_path, capsys, labels, message):
    f = _write(tmp_path / "p.jsonl", [{k: v for k, v in MC.items() if k != "y"}])
    lf = _write(tmp_path / "l.jsonl", labels)
    assert main(["report", str(f), "--labels", str(lf), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "o").exists()


def test_a_labels_file_with_a_metric_log_is_refused(tmp_path, capsys):
    _run(tmp_path, n=120)
    lf = _write(tmp_path / "l.jsonl", [{"id": "e1", "label": "a"}])
    args = ["report", str(tmp_path / "metrics.jsonl"), "--labels", str(lf), "--out", "o"]
    assert main(args) == 2
    assert "a labels file goes with a predictions file" in capsys.readouterr().err
