"""The README's examples and commands work, and so do the library reference's.

Every fenced block is accounted for: a Python block runs (as a doctest when it shows
``>>>`` prompts, else as a script), and every shell command either is checked here
(against ``.ci/run``, the CLI's parser and the processor's config) or is listed in
``SKIPPED`` with the reason it cannot run in a test.
"""

import doctest
import pathlib
import re
import shlex
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Documents whose Python blocks are run, in order, each in its own namespace.
PYTHON_DOCS = [README, ROOT / "docs" / "library.md"]
# Documents whose shell commands are checked or skipped with a reason.
COMMAND_DOCS = [README, ROOT / "docs" / "processor.md"]

INSTALL_DEMO = 'pip install -e ".[demo]" && .venv/bin/streamcal demo'
INSTALL_TEST = 'pip install -e ".[dev]" && .venv/bin/python -m pytest -n 4'

# Commands that cannot run inside the test suite, by their start, with the reason.
SKIPPED = {
    "export STREAMCAL_CHECKPOINT_KEY=": "sets the environment for the next command; the "
    "`streamcal run` check below passes a key of the same form",
    "docker compose": "no Docker engine here; tests/test_demo.py checks docker-compose.yml "
    "and parses its command lines with the CLI",
    "curl ": "needs a running processor; the Prometheus endpoint is tested against tansu",
    'pip install "streamcal-va[fast]"': "installs from PyPI; the suite runs from the source "
    "tree, and test_the_recommended_install_is_an_extra_that_brings_numba checks the extra",
}


def blocks(path: pathlib.Path) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def commands(path: pathlib.Path) -> list[str]:
    """Each shell command of the document's bash/sh blocks: continuations joined, the
    comments and blank lines dropped."""
    found = []
    for lang, body in blocks(path):
        if lang in ("bash", "sh"):
            for line in body.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                if line and not line.startswith("#"):
                    found.append(" ".join(line.split()))
    return found


def all_commands() -> list[str]:
    return [c for path in COMMAND_DOCS for c in commands(path)]


@pytest.mark.parametrize("path", PYTHON_DOCS, ids=lambda p: p.name)
def test_python_blocks_run(path):
    python = [body for lang, body in blocks(path) if lang == "python"]
    assert python, f"{path.name} should carry at least one runnable example"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    globs: dict = {}
    for i, body in enumerate(python):
        if ">>>" in body:
            test = parser.get_doctest(body, globs, f"{path.name} block {i}", str(path), 0)
            runner.run(test)
        else:  # a script: later blocks build on its names, as a reader's session would
            exec(compile(body, f"{path.name} block {i}", "exec"), globs)
    assert runner.failures == 0, f"{runner.failures} example(s) failed; see output above"
    if path == README:
        assert runner.tries >= 5


def test_every_block_is_python_or_commands():
    for path in PYTHON_DOCS + COMMAND_DOCS:
        for lang, _ in blocks(path):
            assert lang in ("python", "bash", "sh"), f"{path.name}: an untested ```{lang} block"


def test_every_command_is_checked_or_skipped_with_a_reason():
    checked = (INSTALL_DEMO, INSTALL_TEST, ".venv/bin/python -m pytest -n 2 -m", "streamcal run ")
    for command in all_commands():
        matches = [c for c in checked if c in command]
        matches += [s for s in SKIPPED if command.startswith(s)]
        assert len(matches) == 1, f"not checked, or skipped with a reason: {command}"


def test_readme_states_the_two_commands():
    text = README.read_text()
    assert INSTALL_DEMO in text
    assert INSTALL_TEST in text
    # CI must run the README's test command
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest -n 4\n" in ci and '".[dev]"' in ci
    # ... whose workers come with the dev extra
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev = pyproject["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("pytest-xdist") for d in dev)


def test_the_recommended_install_is_an_extra_that_brings_numba():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    fast = pyproject["project"]["optional-dependencies"]["fast"]
    assert any(dep.startswith("numba") for dep in fast)
    assert 'pip install "streamcal-va[fast]"' in commands(README)


def test_the_demo_command_parses():
    from streamcal.cli import build_parser

    assert build_parser().parse_args(["demo"]).command == "demo"


def test_the_fast_loop_selects_declared_marks():
    (command,) = [c for c in commands(README) if "-m pytest -n 2 -m" in c]
    argv = shlex.split(command)
    at = argv.index("pytest")
    assert argv[at + 1 :] == ["-n", "2", "-m", "not slow and not kafka"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {m.split(":")[0] for m in pyproject["tool"]["pytest"]["ini_options"]["markers"]}
    assert {"slow", "kafka"} <= declared


def test_streamcal_run_examples_parse_and_configure():
    from streamcal.cli import build_parser
    from streamcal.stream.config import ProcessorConfig

    runs = [c for c in all_commands() if c.startswith("streamcal run ")]
    assert runs, "the README shows a `streamcal run` example"
    env = {"STREAMCAL_CHECKPOINT_KEY": "0" * 64}  # the form `openssl rand -hex 32` gives
    for command in runs:
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.command == "run"
        cfg = ProcessorConfig.from_sources(vars(args), env=env)
        assert cfg.bootstrap_servers == args.bootstrap_servers
