"""Learner: river-compatible Venn-Abers classifiers built on the core.

The names are loaded on first use (PEP 562), so that ``streamcal.learner.modes`` can be
imported without river (the command line's settings list the modes).
"""

from importlib import import_module

_PUBLIC = {
    "MODES": "streamcal.learner.modes",
    "VennAbersClassifier": "streamcal.learner.classifier",
    "VennAbersInterval": "streamcal.learner.interval",
}


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'streamcal.learner' has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = ["MODES", "VennAbersClassifier", "VennAbersInterval"]
