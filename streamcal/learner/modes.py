"""The names of the Venn-Abers modes, for everything that offers a choice of them.

Kept apart from ``VennAbersClassifier`` (which imports river) so that settings and
command lines can list and check the modes cheaply.

>>> MODES
('pretrained', 'sva', 'va')
>>> check_mode("ivap")
Traceback (most recent call last):
...
ValueError: mode must be one of pretrained, sva, va; got 'ivap'
"""

from __future__ import annotations

__all__ = ["DEFAULT_MODE", "MODES", "check_mode"]

MODES = ("pretrained", "sva", "va")
DEFAULT_MODE = "pretrained"  # the only mode that is both valid and cheap (see the classifier)


def check_mode(mode) -> str:
    """``mode`` if it names a mode, else ValueError listing them."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode
