"""Names of a package loaded on first use (PEP 562), so that importing it stays cheap.

Outside the layers: any package may use it, and it imports nothing of streamcal.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(package_globals: dict, names: dict[str, str]):
    """``(__getattr__, __dir__)`` for a package whose ``names`` (name -> module) are
    imported when first used; assign them in the package's ``__init__``."""
    package = package_globals["__name__"]

    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        package_globals[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(package_globals) | set(names))

    return __getattr__, __dir__
