"""The README's interactive examples run and print what the README says they print."""

import doctest
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_doctest_blocks():
    text = README.read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if ">>>" in b]
    assert blocks, "the README should carry at least one runnable example"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    globs: dict = {}
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, globs, f"README block {i}", str(README), 0)
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} README example(s) failed; see output above"
    assert runner.tries >= 5


def test_readme_states_the_two_commands():
    text = README.read_text()
    assert 'pip install -e ".[demo]" && .venv/bin/streamcal demo' in text
    assert 'pip install -e ".[dev]" && .venv/bin/python -m pytest' in text
    # CI must run the README's test command
    ci = (README.parent / ".ci" / "run").read_text()
    assert "-m pytest" in ci and '".[dev]"' in ci
