"""`streamcal report` / write_report: valid PNGs, HTML numbers equal the metric log, errors."""

from __future__ import annotations

import html
import json
import re
import sys

import numpy as np
import pytest

from streamcal.cli import main
from streamcal.monitoring import CalibrationTracker, write_report
from streamcal.monitoring.report import FIGURES, MissingDependencyError
from tests._helpers import error_of

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def synthetic_metric_log(path, n=3000, every=50, seed=0):
    """What the stream processor writes: tracker snapshots plus its own counters."""
    rng = np.random.default_rng(seed)
    t = CalibrationTracker(window=500)
    lines = []
    for i in range(1, n + 1):
        s = rng.random()
        w = 2.0 / (i + 20)
        p0, p1 = max(0.0, s * s - w), min(1.0, s * s + w)
        t.update(p0, p1, int(rng.random() < s * s), score=s)
        if i % every == 0:
            extra = {
                "ts": 1.7e9 + i / 1234.5,  # the rate events_per_s says
                "events": i + 7,
                "predictions": i + 7,
                "pending": 7,
                "expired": 0,
                "dead_letters": 1,
                "events_per_s": 1234.5,
                "calibration_size": min(i, 1000),
                "version": 2,
            }
            lines.append({**t.snapshot(reliability=i == n), **extra})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def check_png(path):
    from matplotlib import image
    from PIL import Image

    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    with Image.open(path) as im:
        im.verify()
    arr = image.imread(path)
    assert arr.ndim == 3 and arr.shape[0] > 100 and arr.shape[1] > 100
    assert arr.std() > 0  # not a blank canvas


def html_values(page):
    """{key: value} from the data-key/data-value cells of the report page."""
    out = {}
    for key, value in re.findall(r'data-key="([^"]+)" data-value="([^"]*)"', page):
        value = html.unescape(value)
        out[key] = (
            None if value == "null" else (value.strip("'") if value[0] == "'" else float(value))
        )
    return out


def test_report_from_metric_log_matches_last_line(tmp_path):
    lines = synthetic_metric_log(tmp_path / "metrics.jsonl")
    page = write_report(tmp_path / "metrics.jsonl", tmp_path / "out")
    assert page == tmp_path / "out" / "report.html"
    for name in FIGURES:
        check_png(tmp_path / "out" / name)
    text = page.read_text()
    assert text.count("data:image/png;base64,") == len(FIGURES)
    assert "no reliability bins" not in text
    last = lines[-1]
    shown = html_values(text)
    numeric = {k: v for k, v in shown.items() if k not in ("version", "corollary1")}
    assert len(numeric) >= 20
    for key, value in numeric.items():
        # events_per_s: the run's rate from the lines' times and counts (float sums)
        assert value == pytest.approx(last[key], rel=1e-6 if key == "events_per_s" else 1e-12), key
    # The visible text agrees too (6 significant digits).
    m = re.search(r'data-key="log_loss" data-value="[^"]*">([^<]+)<', text)
    assert float(m.group(1)) == pytest.approx(last["log_loss"], rel=1e-5)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["log_loss"] == last["log_loss"] and summary["events"] == last["events"]
    assert summary["corollary1"].startswith("holds")


def test_report_without_bins_says_so(tmp_path):
    lines = synthetic_metric_log(tmp_path / "m.jsonl", n=200)
    del lines[-1]["reliability"], lines[-1]["raw_reliability"]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page = write_report(tmp_path / "m.jsonl", tmp_path / "out")
    assert "no reliability bins" in page.read_text()
    check_png(tmp_path / "out" / "reliability.png")


def test_cli_report_from_predictions(tmp_path, capsys):
    rng = np.random.default_rng(3)
    with open(tmp_path / "pred.jsonl", "w") as f:
        for _ in range(2000):
            s = rng.random()
            f.write(
                json.dumps(
                    {"p0": s * 0.9, "p1": s * 0.9 + 0.1, "label": int(rng.random() < s), "score": s}
                )
                + "\n"
            )
    out = tmp_path / "r"
    assert (
        main(
            [
                "report",
                str(tmp_path / "pred.jsonl"),
                "--out",
                str(out),
                "--bins",
                "5",
                "--window",
                "100",
                "--no-progress",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == str(out / "report.html")
    for name in FIGURES:
        check_png(out / name)
    shown = html_values((out / "report.html").read_text())
    assert shown["labels"] == 2000


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty file"),
        ('{"p0": 0.1, "p1": 0.3, "label": 1}\n{"p0": 0.1, "p1"', "line 2: truncated"),
        ('{"p0": 0.1, "p1": 0.3, "label": 1}\n{"p0": 0.1, "p1": 0.3}\n', "line 2: missing"),
        (
            '{"p0": 0.1, "p1": 0.3, "label": 1}\n{"p0": 0.1, "p1": "x", "label": 0}\n',
            "line 2: field 'p1' must be a number",
        ),
        ("hello\n", "line 1: not valid JSON"),
    ],
)
def test_cli_garbled_input_exits_2_naming_the_line(tmp_path, capsys, text, message):
    f = tmp_path / "bad.jsonl"
    f.write_text(text)
    assert main(["report", str(f), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamcal report: error: ") and message in err
    error_of(err)  # asserts two lines: the error, its what to do; nothing else
    assert not (tmp_path / "o").exists()


def test_cli_missing_file(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "nope.jsonl: no such file" in capsys.readouterr().err


def test_missing_matplotlib_gives_a_clear_error(tmp_path, monkeypatch, capsys):
    synthetic_metric_log(tmp_path / "m.jsonl", n=100)
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(MissingDependencyError, match=r"streamcal-va\[report\]"):
        write_report(tmp_path / "m.jsonl", tmp_path / "o")
    assert main(["report", str(tmp_path / "m.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "pip install" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.filterwarnings("error::UserWarning")
@pytest.mark.parametrize("labelled", [0, 300])
def test_report_of_a_run_with_few_or_no_labels(tmp_path, labelled):
    """Lines written before the first label (all statistics null) must not break figures."""
    rng = np.random.default_rng(4)
    t = CalibrationTracker()
    lines = [{**t.snapshot(), "events": 5}, {**t.snapshot(), "events": 9}]
    for i in range(labelled):
        s = rng.random()
        t.update(max(0.0, s - 0.1), min(1.0, s + 0.1), int(rng.random() < s), score=s)
        if i % 30 == 0:
            lines.append(t.snapshot())
    lines.append(t.snapshot(reliability=True))
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page = write_report(tmp_path / "m.jsonl", tmp_path / "out").read_text()
    for name in FIGURES:
        check_png(tmp_path / "out" / name)
    assert html_values(page)["labels"] == labelled
    assert ("no labels yet" in page) == (labelled == 0)
