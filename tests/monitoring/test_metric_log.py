"""Metric logs and predictions files: parsing, validation, errors naming the line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamcal.monitoring import CalibrationTracker, schema
from streamcal.monitoring.metric_log import (
    detect_format,
    read_metric_log,
    read_predictions,
)
from streamcal.monitoring.shapes import log_from_predictions


def predictions(rng, n):
    out = []
    for _ in range(n):
        s = float(rng.random())
        p0 = max(0.0, s - 0.05)
        out.append(
            {
                "id": "x",
                "p0": p0,
                "p1": min(1.0, s + 0.05),
                "label": int(rng.random() < s),
                "score": s,
            }
        )
    return out


def write_lines(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def test_log_from_predictions_equals_feeding_a_tracker(tmp_path):
    rng = np.random.default_rng(0)
    recs = predictions(rng, 5000)
    recs[7]["score"] = None  # null means absent
    recs[8]["p"] = 0.5
    f = write_lines(tmp_path / "p.jsonl", recs)
    log = log_from_predictions(f, window=300, bins=8, points=100)
    t = CalibrationTracker(window=300, bins=8)
    for r in recs:
        t.update(r["p0"], r["p1"], r["label"], score=r["score"], p=r.get("p"))
    assert log[-1] == t.snapshot(reliability=True)
    labels = [line["labels"] for line in log]
    assert labels == sorted(labels) and labels[-1] == 5000
    assert 100 <= len(log) <= 201
    steps = np.diff(labels[:-1])
    assert len(set(steps.tolist())) == 1  # evenly spaced


def test_metric_log_round_trip_and_format_detection(tmp_path):
    rng = np.random.default_rng(1)
    t = CalibrationTracker()
    lines = []
    for r in predictions(rng, 50):
        t.update(r["p0"], r["p1"], r["label"], score=r["score"])
        lines.append({**t.snapshot(), "ts": 1.5, "events": 60, "version": "v1"})
    lines[-1] = {**t.snapshot(reliability=True), "ts": 2.0}
    f = write_lines(tmp_path / "m.jsonl", lines)
    assert detect_format(f) == "metrics"
    assert read_metric_log(f) == lines
    g = write_lines(tmp_path / "p.jsonl", predictions(rng, 3))
    assert detect_format(g) == "predictions"


GOOD_PRED = '{"p0": 0.1, "p1": 0.3, "label": 1}\n'


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("", None, "empty file"),
        (GOOD_PRED + '{"p0": 0.1, "p1": 0.3, "lab', 3, "truncated"),
        (GOOD_PRED + "not json\n" + GOOD_PRED, 3, "not valid JSON"),
        (GOOD_PRED + "\n" + GOOD_PRED, 3, "empty line"),
        (GOOD_PRED + "[1, 2]\n", 3, "expected a JSON object"),
        (GOOD_PRED + '{"p0": 0.1, "label": 1}\n', 3, "missing field 'p1'"),
        (GOOD_PRED + '{"p0": 0.1, "p1": 0.3}\n', 3, "missing field 'label'"),
        (GOOD_PRED + '{"p0": "0.1", "p1": 0.3, "label": 1}\n', 3, "'p0' must be a number"),
        (GOOD_PRED + '{"p0": 0.1, "p1": 0.3, "label": 1, "score": "hi"}\n', 3, "'score'"),
        (GOOD_PRED + '{"p0": 0.1, "p1": 0.3, "label": 0.5}\n', 3, "'label' must be 0/1"),
        (GOOD_PRED + '{"p0": 0.1, "p1": 0.3, "label": 1.0}\n', 3, "'label' must be 0/1"),
        (GOOD_PRED + '{"p0": 0.4, "p1": 1.3, "label": 1}\n', 3, "p1=1.3"),
        (GOOD_PRED + '{"p0": 0.1, "p1": 0.3, "label": 1, "score": 7}\n', 3, "score=7"),
        (GOOD_PRED + '{"p0": NaN, "p1": 0.3, "label": 1}\n', 3, "not valid JSON"),
    ],
)
def test_garbled_predictions_name_the_line(tmp_path, text, line, message):
    f = tmp_path / "bad.jsonl"
    # The good first line twice, so that line numbers are not all 1 or 2.
    f.write_text(GOOD_PRED + text if text else "")
    with pytest.raises(ValueError, match=message) as err:
        log_from_predictions(f)
    assert str(f) in str(err.value)
    if line is not None:
        assert f"line {line}:" in str(err.value)


def metric_line(**over):
    line = {f.key: 0.5 for f in schema.FIELDS if f.required}
    line["labels"] = 10
    line.update(over)
    return line


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"log_loss": "0.5"}, "'log_loss' must be a number or null"),
        ({"events": [1]}, "'events' must be a number or null"),
        ({"labels": -1}, "'labels' must be a count"),
        ({"labels": 2.5}, "'labels' must be a count"),
        ({"reliability": [{"lo": 0, "hi": 1, "count": 1}]}, r"reliability\[0\] is missing"),
        ({"raw_reliability": "bins"}, "raw_reliability must be"),
    ],
)
def test_garbled_metric_log_names_the_line(tmp_path, bad, message):
    f = write_lines(tmp_path / "m.jsonl", [metric_line(), metric_line(), metric_line(**bad)])
    with pytest.raises(ValueError, match=message) as err:
        read_metric_log(f)
    assert "line 3:" in str(err.value)


def test_metric_log_missing_field(tmp_path):
    line = metric_line()
    del line["mean_p1"]
    f = write_lines(tmp_path / "m.jsonl", [metric_line(), line])
    with pytest.raises(ValueError, match="line 2: missing field 'mean_p1'"):
        read_metric_log(f)


def test_unrecognised_first_line(tmp_path):
    f = write_lines(tmp_path / "x.jsonl", [{"hello": 1}])
    with pytest.raises(ValueError, match="line 1: neither a prediction"):
        detect_format(f)


def test_read_predictions_accepts_booleans_and_ignores_extra_keys(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"p0": 0, "p1": 1, "label": true, "id": 3, "ts": 9}\n')
    assert list(read_predictions(f)) == [
        (1, {"p0": 0, "p1": 1, "label": 1, "score": None, "p": None, "category": None})
    ]


def test_progress_bar_on_long_inputs_only(tmp_path, monkeypatch, capsys):
    from streamcal.monitoring import metric_log

    f = write_lines(tmp_path / "p.jsonl", predictions(np.random.default_rng(2), 200))
    log_from_predictions(f, progress=True)
    assert capsys.readouterr().err == ""  # small file: no bar
    monkeypatch.setattr(metric_log, "_PROGRESS_BYTES", 1)
    log_from_predictions(f, progress=True)
    err = capsys.readouterr().err
    assert "p.jsonl" in err and "100%" in err
