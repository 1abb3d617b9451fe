"""The public API in ``streamcal/__init__.py``: every name listed resolves, and importing
the package alone stays cheap (the names load on first use)."""

import subprocess
import sys

import streamcal


def test_every_public_name_resolves_to_its_module_object():
    names = set(streamcal.__all__) - {"__version__"}
    assert names == set(streamcal._PUBLIC)
    for name in names:
        obj = getattr(streamcal, name)
        module = sys.modules[streamcal._PUBLIC[name]]
        assert obj is getattr(module, name)
        assert name in dir(streamcal)


def test_unknown_name_raises_attribute_error():
    try:
        streamcal.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_importing_the_package_does_not_import_river_numba_or_kafka():
    code = (
        "import sys, streamcal, streamcal.stream.sink; "
        "print(sorted(m for m in ('river', 'numba', 'kafka') if sys.modules.get(m)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
