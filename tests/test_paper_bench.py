"""Building blocks of benchmarks/paper.py on tiny synthetic data (no UCI files needed)."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"

pytest.importorskip("sklearn")
pytest.importorskip("scipy")

# benchmarks/ holds kafka.py: left on sys.path, it would stand in for kafka-python in
# every test module imported after this one. So it is there only while these import.
_saved_path = sys.path[:]
sys.path.insert(0, str(BENCH))
try:
    import _paper_data as data
    import _paper_methods as methods
    import _paper_models as models
    import paper
    from _paper_published import INF, PUBLISHED, RANKING
finally:
    sys.path[:] = _saved_path

from streamcal.core import isotonic_calibrator, venn_abers_bruteforce  # noqa: E402

PAPER_TEX = Path("/work/shared/paper/venn-abers-predictors.tex")


def _toy(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + rng.normal(scale=1.0, size=n) > 0).astype(np.int64)
    return X, y


def _va_oracle(make, X_train, y_train, x):
    """Algorithm 1 written out with the reference PAVA, independent of venn_abers()."""
    X = np.vstack([X_train, x[None, :]])
    p = []
    for label in (0, 1):
        s = make().fit(X, np.append(y_train, label)).score(X)
        g = isotonic_calibrator(s, np.append(y_train, label))
        p.append(g(float(s[-1])))
    return tuple(p)


@pytest.mark.parametrize("clf", ["J", "NB", "LR", "rLR"])
def test_va_matches_algorithm_1_oracle(clf):
    X, y = _toy()
    tr, te = slice(0, 28), slice(28, 32)

    def make():
        return models.make_scorer(clf, seed=3)

    out = methods.va_method(make, X[tr], y[tr], X[te])
    p0, p1 = out["VA_pair"]
    for k, x in enumerate(X[te]):
        o0, o1 = _va_oracle(make, X[tr], y[tr], x)
        assert (p0[k], p1[k]) == pytest.approx((o0, o1), abs=1e-12)
    assert np.allclose(out["VA"][0], p1 / (1 - p0 + p1))
    assert methods.lemma3_violations(p0, p1) == 0


def test_sva_and_dir_match_bruteforce():
    X, y = _toy(n=60, seed=1)
    tr, te = slice(0, 40), slice(40, 60)
    scorer = models.make_scorer("LR", seed=0)
    out = methods.base_methods(scorer, X[tr], y[tr], X[te])
    cal, test = scorer.score(X[tr]), scorer.score(X[te])
    p0, p1 = out["SVA_pair"]
    for k, s in enumerate(test):
        assert (p0[k], p1[k]) == pytest.approx(venn_abers_bruteforce(cal, y[tr], s), abs=1e-12)
    # DIR: the isotonic fit read at the nearest calibration score (smaller one on ties)
    g = isotonic_calibrator(cal, y[tr])
    for k, s in enumerate(test):
        i = int(np.argmin(np.abs(g.thresholds - s)))
        assert out["DIR"][0][k] == g.values[i]
    assert np.array_equal(out["W"][0], scorer.proba(X[te]))
    assert methods.lemma3_violations(p0, p1) == 0


def test_dir_can_be_infinite_where_sva_is_not():
    # separable training data: DIR outputs exactly 0 and 1, so one wrong test label -> inf
    X = np.array([[-2.0], [-1.5], [-1.0], [1.0], [1.5], [2.0]])
    y = np.array([0, 0, 0, 1, 1, 1])
    X_test, y_test = np.array([[-1.8], [1.8]]), np.array([1, 1])
    out = methods.base_methods(models.make_scorer("NB", 0), X, y, X_test)
    assert out["DIR"][0].tolist() == [0.0, 1.0]
    assert math.isinf(methods.mle(out["DIR"][0], y_test))
    assert math.isfinite(methods.mle(out["SVA"][0], y_test))
    assert methods.lemma3_violations(*out["SVA_pair"]) == 0


def test_lemma3_check_flags_extremes():
    assert methods.lemma3_violations(np.array([0.0, 0.3]), np.array([1.0, 0.4])) == 0
    assert methods.lemma3_violations(np.array([1.0, 0.3]), np.array([1.0, 0.0])) == 2


def test_split_is_two_thirds_and_streams_differ():
    tr, te = paper.split(57, seed=0, stream=paper.BASE, i=0)
    assert len(tr) == 38 and len(te) == 19
    assert sorted(np.concatenate([tr, te]).tolist()) == list(range(57))
    tr_va, _ = paper.split(57, seed=0, stream=paper.VA, i=0)
    assert not np.array_equal(tr, tr_va)


def test_encoding_of_nominal_and_missing():
    import io

    from scipy.io import arff

    text = """@relation t
@attribute a numeric
@attribute b {x,y}
@attribute class {neg,pos}
@data
1,x,neg
?,y,pos
3,?,pos
"""
    X, y, cols = data.encode(*arff.loadarff(io.StringIO(text)))
    assert cols == ["a", "b=x", "b=y", "b=?"]
    assert y.tolist() == [0, 1, 1]
    assert X[:, 0].tolist() == [1.0, 2.0, 3.0]  # missing numeric -> column mean
    assert X[:, 1:].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_missing_data_dir_says_what_to_install(tmp_path):
    with pytest.raises(data.DataMissing, match="apt-get download weka"):
        data.find_file("labor", tmp_path)


def test_tables_and_ranking_from_fake_results():
    results = [
        {
            "key": ("labor", "NB", "base", 0),
            "result": {"W": (0.5, 0.4), "SVA": (0.3, 0.3), "DIR": (INF, 0.35)},
            "lemma3": 0,
            "n_test": 19,
            "dir_extreme": 2,
            "oracle_checked": 3,
            "oracle_mismatches": 1,
            "cpu": 0.5,
        },
        {
            "key": ("labor", "NB", "va", 0),
            "result": {"VA": (0.4, 0.32)},
            "lemma3": 0,
            "n_test": 19,
        },
    ]
    per, tally = paper.aggregate(results)
    assert tally["DIR", "inf"] == 1 and tally["SVA", "objects"] == 19
    assert tally["oracle", "mismatches"] == 1 and tally["cpu", "NB", "base"] == 0.5
    lines = paper.table(per, 0, ["labor"], "NB")
    assert lines[-1] == "| Labor | 0.500 (1.854) | 0.400 (0.410) | **0.300** (0.296) | ∞ (∞) |"
    assert [m for m, _, _ in paper.ranking(per, 0, "labor", ["NB"])] == ["SVA", "VA", "W", "DIR"]


@pytest.mark.skipif(not PAPER_TEX.exists(), reason="paper source not available")
def test_published_numbers_match_the_tex():
    tex = PAPER_TEX.read_text()
    for label, loss in (("tab:log", "MLE"), ("tab:sq", "RMSE")):
        body = tex[tex.index(rf"\label{{{label}}}") :]
        body = body[: body.index(r"\end{table*}")]
        parts = body.split(r"\begin{tabular}")[1:]
        for part, group in zip(parts, [("J", "JB", "LR"), ("NB", "NN", "SVM")], strict=True):
            rows = part.split(r"\hline", 1)[1].split(r"\end{tabular}")[0].split(r"\\")
            for row in rows:
                cells = [c.strip() for c in row.split("&")]
                if cells[0] not in PUBLISHED[loss]:
                    continue
                vals = [re.sub(r"\\textbf\{|\}|\$", "", c).strip() for c in cells[1:]]
                vals = [INF if v == r"\infty" else float(v) for v in vals]
                for j, clf in enumerate(group):
                    assert PUBLISHED[loss][cells[0]][clf] == tuple(vals[4 * j : 4 * j + 4])
    for name, (log_rank, sq_rank) in RANKING.items():
        assert re.search(rf"{name}\s*& {re.escape(log_rank)}\s*& {re.escape(sq_rank)}", tex)
