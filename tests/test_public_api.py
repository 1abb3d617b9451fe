"""The public API in ``streamcal/__init__.py``: every name listed resolves, and importing
the package alone stays cheap (the names load on first use)."""

import importlib
import subprocess
import sys

import pytest

import streamcal


def test_every_public_name_resolves_to_its_module_object():
    listed = [(f"streamcal.{package}", name)
              for package, names in streamcal._PUBLIC.items() for name in names]  # fmt: skip
    assert sorted(set(streamcal.__all__) - {"__version__"}) == sorted(n for _, n in listed)
    for package, name in listed:
        obj = getattr(streamcal, name)
        module = sys.modules[package]
        assert obj is getattr(module, name)
        assert name in module.__all__  # the top level re-exports what its package makes public
        assert name in dir(streamcal)


@pytest.mark.parametrize("package", ["streamcal.core", "streamcal.learner"])
def test_a_layers_names_resolve_to_the_module_they_are_listed_under(package):
    layer = importlib.import_module(package)
    listed = [(module, name) for module, names in layer._PUBLIC.items() for name in names]
    assert sorted(layer.__all__) == sorted(name for _, name in listed)
    for module, name in listed:
        assert getattr(layer, name) is getattr(importlib.import_module(f"{package}.{module}"), name)
        assert name in dir(layer)


def test_unknown_name_raises_attribute_error():
    try:
        streamcal.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


@pytest.mark.parametrize(
    "modules, heavy",
    [
        # The package alone and the producer process: no river, numba or kafka.
        ("streamcal, streamcal.stream.kafka.sink", ("river", "numba", "kafka")),
        # The settings and the demo's command line list the modes from learner.modes,
        # and the learner package loads lazily: `streamcal run --help` needs no river.
        ("streamcal.stream.config, streamcal.cli.demo, streamcal.learner.modes", ("river",)),
    ],
)
def test_cheap_imports(modules, heavy):
    # sys.modules.get: an import blocker (CI's run without numba) leaves None under the name.
    code = f"import sys, {modules}; print(sorted(m for m in {heavy!r} if sys.modules.get(m)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"]])
def test_the_command_lines_help_imports_neither_numba_nor_river(args):
    # -X importtime names every module the process imported (on stderr), including those
    # a lazy name would pull in: the help must not compile the store or load river.
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "streamcal", *args],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "usage:" in out.stdout
    modules = [line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
               if line.startswith("import time:")]  # fmt: skip
    assert "streamcal.cli" in modules  # the log is read right
    heavy = [m for m in modules if m.split(".")[0] in ("numba", "river")]
    assert heavy == []
