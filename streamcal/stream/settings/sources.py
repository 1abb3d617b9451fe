"""Where settings come from: flags, ``STREAMCAL_*`` variables and a TOML file.

Precedence: flag > environment > TOML file > default. Every value read as text is
converted by its setting (``read``): a bool from 1/0, true/false, yes/no, on/off; a size
with a suffix (512MiB); a duration with a unit (30s, 2h, 7d); ``none`` (or nothing) is
None for an optional setting. A value that cannot be read names where it came from.

>>> from streamcal.stream.config import ProcessorConfig
>>> values = gather(ProcessorConfig, {"window": 90}, {"STREAMCAL_WINDOW": "70",
...                 "STREAMCAL_PENDING_MAX_BYTES": "1GiB"})
>>> values["window"], values["pending_max_bytes"]
(90, 1073741824)
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping

from streamcal.stream.settings.declaration import Setting, declared

__all__ = ["convert", "gather", "read", "read_toml"]

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def read(s: Setting, raw, where: str):
    """``raw`` converted to setting ``s``'s type if it is text (else as it is);
    ValueError naming ``where`` (the variable, or the setting) if it cannot be."""
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if s.optional and s.none_word and text.lower() in ("", "none"):
        return None
    if s.parse is not s.type:  # a size or a duration: its reader's message
        try:
            return s.parse(text)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    if s.type is str:
        return raw
    if s.type is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
    else:
        try:
            return s.type(text)
        except ValueError:
            pass
    raise ValueError(f"{where}: expected {s.type.__name__}, got {raw!r}")


def read_toml(path, names) -> dict:
    """The settings of TOML file ``path`` (top level, or a ``[run]`` table), by name;
    ValueError for a file that is missing, not TOML, or names no setting in ``names``."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ValueError(f"config file not found: {str(path)!r}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config file {str(path)!r}: {exc}") from None
    if isinstance(data.get("run"), dict):
        data = {**{k: v for k, v in data.items() if k != "run"}, **data["run"]}
    out = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in names:
            raise ValueError(f"config file {str(path)!r}: unknown setting {key!r}")
        out[name] = value
    return out


def gather(cls, cli_args: Mapping | None, env: Mapping[str, str],
           toml_path=None) -> dict:  # fmt: skip
    """The values of ``cls``'s settings given by the sources (a flag's None: not given),
    the higher source winning; environment values are read here, the others by
    ``convert``."""
    settings = {s.name: s for s in declared(cls)}
    values: dict = {}
    if toml_path is not None:
        values.update(read_toml(toml_path, settings))
    for s in settings.values():
        raw = env.get(s.env)
        if raw is not None:
            values[s.name] = read(s, raw, "$" + s.env)
    for name, value in (cli_args or {}).items():
        if value is not None and name in settings:
            values[name] = value
    return values


def convert(cls, values: Mapping) -> dict:
    """``values`` by setting of ``cls``, text read (``read``); ValueError for a name
    that is no setting."""
    settings = {s.name: s for s in declared(cls)}
    out = {}
    for name, value in values.items():
        if name not in settings:
            raise ValueError(f"unknown setting {name!r}")
        out[name] = read(settings[name], value, name)
    return out
