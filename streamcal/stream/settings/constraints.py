"""What a setting's value may be: one constraint per setting, declared with it.

In the manner of scikit-learn's ``_parameter_constraints``: a setting declares its
constraint once (``streamcal.stream.settings.declaration.setting``), and one checker asks
every setting's (``check_each``). A constraint also says how a value is read from text
(a flag, an environment variable, TOML) when that is more than the type's conversion
(sizes, durations), and carries ``bad``, a value it refuses (tests show that each one
does, with a message naming the setting).

A refusal names the setting, what it must be, the value, and where it is set:

>>> AtLeast(1).refuse("dedupe_window", 0, "--dedupe-window")
Traceback (most recent call last):
...
ValueError: dedupe_window must be >= 1, got 0 (--dedupe-window)
>>> OneOf(("stop", "continue")).ok("stop"), Seconds(units=True).parse("2h")
(True, 7200.0)
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path

from streamcal.stream.durations import parse_duration

__all__ = [
    "AtLeast",
    "Between",
    "Checked",
    "Constraint",
    "File",
    "OneOf",
    "Seconds",
    "Size",
    "Text",
    "parse_size",
    "show_size",
]

_SIZE_SUFFIXES = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "kib": 1 << 10, "m": 1 << 20,
                  "mb": 10**6, "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30,
                  "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}  # fmt: skip


class Constraint:
    """A rule for one setting's value (None, "not given", is never asked about).

    Subclasses say what a value must be (``what``) and whether it is (``ok``); those with
    a message of their own override ``check``. ``parse`` reads a value from text
    (None: the type's own conversion); ``show`` writes the default for the help.
    """

    what = "valid"
    bad: object = None
    parse = None  # text -> value, where the type's conversion is not enough

    def ok(self, value) -> bool:
        return True

    def check(self, name: str, value, where: str) -> None:
        """ValueError (one line) if ``value`` of setting ``name`` (set by ``where``,
        e.g. its flag) is not allowed."""
        if not self.ok(value):
            self.refuse(name, value, where)

    def refuse(self, name: str, value, where: str):
        raise ValueError(f"{name} must be {self.what}, got {value!r} ({where})")

    def show(self, default) -> str:
        return str(default)


class Text(Constraint):
    """A string that is not blank (a topic, a field name, a host list...)."""

    bad = " "

    def check(self, name: str, value, where: str) -> None:
        if not value.strip():
            raise ValueError(f"{name} must not be empty ({where})")


class AtLeast(Constraint):
    """A number at least ``low``; ``off`` says what None means, where it is allowed."""

    def __init__(self, low: int, off: str | None = None):
        self.low, self.bad = low, low - 1
        self.what = f">= {low}" + (f" (or none: {off})" if off else "")

    def ok(self, value) -> bool:
        return value >= self.low


class Between(Constraint):
    """A number in ``low..high``, or in the open interval with ``open=True``."""

    def __init__(self, low, high, open: bool = False):
        self.low, self.high, self.open = low, high, open
        self.what = f"in ({low}, {high})" if open else f"in {low}..{high}"
        self.bad = high + 1

    def ok(self, value) -> bool:
        if self.open:
            return self.low < value < self.high  # False for NaN
        return self.low <= value <= self.high


class OneOf(Constraint):
    """One of ``choices``."""

    def __init__(self, choices):
        self.choices = tuple(choices)
        self.what = "one of " + ", ".join(self.choices)
        self.bad = "no-such-choice"

    def ok(self, value) -> bool:
        return value in self.choices


class Seconds(Constraint):
    """A positive, finite number of seconds; with ``units`` also read as a duration
    (30s, 15m, 2h, 7d)."""

    what = "a positive number of seconds"
    bad = 0.0

    def __init__(self, units: bool = False):
        self.parse = parse_duration if units else None

    def ok(self, value) -> bool:
        return math.isfinite(value) and value > 0


class Size(AtLeast):
    """A number of bytes, at least 1, read with a suffix (``parse_size``) and shown
    with one in the help."""

    def __init__(self):
        super().__init__(1)

    @staticmethod
    def parse(text: str) -> int:
        try:
            return parse_size(text)
        except ValueError:
            raise ValueError(f"expected a size (e.g. 512MiB), got {text!r}") from None

    def show(self, default) -> str:
        return show_size(default)


class File(Constraint):
    """The path of an existing file."""

    bad = "/nonexistent/file.pem"

    def check(self, name: str, value, where: str) -> None:
        if not Path(value).is_file():
            raise ValueError(f"{name}: no such file {value!r} ({where})")


class Checked(Constraint):
    """A check owned elsewhere, with its owner's message: ``func(value)`` raises
    ValueError. ``func`` may be ``"module:name"``, imported on first use, so that
    declaring it costs no import (``streamcal run --help`` stays cheap). ``parse``
    reads it from text, where the type's conversion is not enough."""

    def __init__(self, func, bad, parse=None):
        self.func, self.bad, self.parse = func, bad, parse

    def check(self, name: str, value, where: str) -> None:
        if isinstance(self.func, str):
            module, _, attr = self.func.partition(":")
            self.func = getattr(importlib.import_module(module), attr)
        self.func(value)


def parse_size(text: str) -> int:
    """A number of bytes, with an optional suffix (KiB, MiB, GiB, TiB; kB, MB, ...).

    >>> parse_size("16GiB"), parse_size("512 MiB"), parse_size("1e6"), parse_size("2k")
    (17179869184, 536870912, 1000000, 2048)
    """
    body = text.strip()
    number = body.rstrip("bBkKmMgGtTiI ")
    factor = _SIZE_SUFFIXES.get(body[len(number) :].strip().lower())
    if factor is None:
        raise ValueError(f"not a size: {text!r} (use e.g. 512MiB or 16GiB)")
    value = float(number) * factor
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def show_size(n: int) -> str:
    """``n`` bytes with the largest binary suffix that divides it.

    >>> show_size(16 << 30), show_size(512 * 1024), show_size(1000)
    ('16GiB', '512KiB', '1000')
    """
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
