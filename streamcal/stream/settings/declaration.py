"""A setting declared once: its field, with its help, group and constraint.

``setting(default, help, group, check)`` declares one field of a settings dataclass;
``declared(cls)`` reads them back as ``Setting``s, each with everything the rest derives
from it: the flag (``--events-topic``), the environment variable
(``STREAMCAL_EVENTS_TOPIC``), the TOML key (``events_topic``), the type, the help text
and the constraint. The command line (``streamcal.cli.run``), the sources
(``streamcal.stream.settings.sources``) and the checker (``check_each``) read only these.

>>> from dataclasses import dataclass
>>> from streamcal.stream.settings.constraints import AtLeast
>>> @dataclass(frozen=True)
... class Demo:
...     batch_size: int = setting(10, "events per batch", "demo", AtLeast(1))
>>> (s,) = declared(Demo)
>>> s.flag, s.env, s.help_text()
('--batch-size', 'STREAMCAL_BATCH_SIZE', 'events per batch (default: 10; $STREAMCAL_BATCH_SIZE)')
>>> check_each(Demo(batch_size=0))
Traceback (most recent call last):
...
ValueError: batch_size must be >= 1, got 0 (--batch-size)
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from streamcal.stream.settings.constraints import Constraint, Text

__all__ = ["ENV_PREFIX", "Setting", "check_each", "check_types", "declared", "setting"]

ENV_PREFIX = "STREAMCAL_"
_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class _Declared:
    help: str
    group: str
    check: Constraint | None
    secret: bool  # hidden in repr
    flag: bool  # False: no flag (a secret: environment only)
    none_word: bool  # whether "none" (or "") read from text means None


def setting(default, help: str, group: str, check: Constraint | None = None, *,
            secret: bool = False, flag: bool = True, none_word: bool = True):  # fmt: skip
    """The field of one setting: its default, help text, help group and constraint.

    A string without a declared constraint must not be blank (``Text``); a bool needs
    none; any other setting without one is checked for its type only (a test asks that
    every one has a constraint). ``secret`` settings are hidden in ``repr``;
    ``flag=False`` leaves a setting out of the command line (the environment only). An
    optional setting (``T | None``) reads ``none`` as None unless ``none_word=False``.
    """
    declared_ = _Declared(help, group, check, secret, flag, none_word)
    return field(default=default, metadata={"setting": declared_})


@dataclass(frozen=True)
class Setting:
    """One declared setting, as the command line, the sources and the checker see it."""

    name: str
    type: type  # str, int, float or bool
    optional: bool  # None allowed (not given, or off)
    default: object
    help: str
    group: str
    constraint: Constraint | None
    secret: bool
    on_command_line: bool
    none_word: bool

    @property
    def flag(self) -> str | None:
        """``--name-with-dashes``, or None for a setting of the environment only."""
        return "--" + self.name.replace("_", "-") if self.on_command_line else None

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def where(self) -> str:
        """Where a user sets it, for messages: the flag, else the variable."""
        return self.flag or "$" + self.env

    @property
    def parse(self):
        """How text becomes a value: the constraint's reader (sizes, durations) or the
        type."""
        return getattr(self.constraint, "parse", None) or self.type

    def help_text(self) -> str:
        """The help line: what it does, its default and its environment variable."""
        # None ("not given") is never asked about, as in the checks
        shown = (self.constraint.show(self.default) if self.constraint and self.default is not None
                 else self.default)  # fmt: skip
        return f"{self.help} (default: {shown}; ${self.env})"

    def check_type(self, value) -> None:
        """ValueError (one line naming the setting and its flag) unless ``value`` has the
        setting's type (or is None, where allowed)."""
        if value is None:
            if not self.optional:
                raise ValueError(f"{self.name} must be set ({self.where})")
            return
        want = self.type
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            return  # an int is a float here
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ValueError(f"{self.name} must be a {want.__name__}, got {value!r} ({self.where})")

    def check(self, value) -> None:
        """``check_type``, then the constraint (not asked about None)."""
        self.check_type(value)
        if value is not None and self.constraint is not None:
            self.constraint.check(self.name, value, self.where)


@functools.cache
def declared(cls) -> tuple[Setting, ...]:
    """The settings ``cls`` declares with ``setting``, in order."""
    out = []
    for f in dataclasses.fields(cls):
        kinds = [t.strip() for t in str(f.type).split("|")]
        d = f.metadata["setting"]
        check = Text() if d.check is None and kinds[0] == "str" else d.check  # not blank
        out.append(Setting(f.name, _TYPES[kinds[0]], "None" in kinds, f.default, d.help,
                           d.group, check, d.secret, d.flag, d.none_word))  # fmt: skip
    return tuple(out)


def check_types(config) -> None:
    """ValueError for the first setting of ``config`` whose value is not of its type
    (nor None where allowed)."""
    for s in declared(type(config)):
        s.check_type(getattr(config, s.name))


def check_each(config) -> None:
    """ValueError for the first setting of ``config`` that its type or its constraint
    refuses."""
    for s in declared(type(config)):
        s.check(getattr(config, s.name))
