"""streamcal without numba: the pure-Python store takes over, with one warning saying why.

Each test runs Python in a subprocess with .ci/without-numba on PYTHONPATH, whose
sitecustomize makes ``import numba`` fail (as on a Python numba does not support yet).
CI runs the whole suite the same way (.ci/run's second pass); these tests check what that
pass takes for granted: numba is really blocked, and the fallback says so once, as a
warning a user can filter.
"""

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

from streamcal.core import ScoreStore

ROOT = Path(__file__).resolve().parent.parent
BLOCKER = ROOT / ".ci" / "without-numba"


def run_blocked(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BLOCKER), str(ROOT)]))
    env.pop("STREAMCAL_STORE_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_auto_falls_back_to_python_with_one_warning_and_reads_numba_pickles(tmp_path):
    store = ScoreStore.from_arrays([0.1, 0.2, 0.2, 0.8, 0.9], [0, 1, 0, 0, 1])
    path = tmp_path / "store.pkl"
    path.write_bytes(pickle.dumps(store))
    want = store.query(0.5)
    out = run_blocked(
        """
        import logging, pickle, sys
        logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
        try:
            import numba
            sys.exit("numba imported")
        except ImportError:
            pass
        from streamcal.core import ScoreStore, venn_abers
        from streamcal.learner import VennAbersClassifier
        a, b = ScoreStore(), ScoreStore()
        loaded = pickle.load(open(sys.argv[1], "rb"))
        print(a.backend, loaded.backend, repr(loaded.query(0.5)))
        p0, p1 = venn_abers([0.1, 0.2, 0.8, 0.9], [0, 1, 0, 1], [0.5])
        print(repr((float(p0[0]), float(p1[0]))))
        from river import linear_model
        clf = VennAbersClassifier(linear_model.LogisticRegression(), mode="sva")
        for i in range(300):
            x = {"a": (i % 17) / 17.0}
            clf.predict_proba_one(x)
            clf.learn_one(x, x["a"] > 0.5)
        print(clf._state.store.backend, clf.predict_proba_one({"a": 0.9})[True] > 0.5)
        """,
        str(path),
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"python python {want!r}"  # a numba store's pickle, same answer
    assert lines[1] == repr((1 / 3, 2 / 3))
    assert lines[2] == "python True"  # the learner calibrates on the python store
    said = [line for line in out.stderr.splitlines() if "score store backend" in line]
    assert len(said) == 1 and "python" in said[0] and "numba" in said[0], out.stderr
    assert "StoreBackendWarning" in said[0], out.stderr


def test_the_fallback_warning_can_be_filtered():
    out = run_blocked(
        """
        import warnings
        from streamcal.core import StoreBackendWarning
        warnings.filterwarnings("ignore", category=StoreBackendWarning)
        from streamcal.core import ScoreStore
        print(ScoreStore().backend)
        """
    )
    assert out.returncode == 0 and out.stdout.strip() == "python", out.stderr
    assert "score store backend" not in out.stderr, out.stderr


def test_asking_for_numba_without_it_is_an_import_error():
    out = run_blocked(
        """
        from streamcal.core import ScoreStore
        try:
            ScoreStore(backend="numba")
        except ImportError as exc:
            print("ImportError", exc)
        """
    )
    assert out.returncode == 0 and out.stdout.startswith("ImportError"), out.stderr


def test_the_blocked_suite_parametrizes_the_python_backend_only():
    """CI's second pass (.ci/run) runs the whole suite with numba blocked; this checks that
    it then really runs no test on the numba backend (the blocker blocks numba there)."""
    out = run_blocked("from tests._backends import BACKENDS; print(BACKENDS)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['python']"
