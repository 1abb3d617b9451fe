"""Names of a package loaded on first use (PEP 562), so that importing it stays cheap.

Outside the layers: any package may use it, and it imports nothing of streamcal.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(package_globals: dict, modules: dict[str, tuple[str, ...]]):
    """``(__getattr__, __dir__, __all__)`` for a package whose names, each listed once
    under the module that makes it (``modules``: submodule of the package -> its names),
    are imported when first used; assign the three in the package's ``__init__``.

    >>> getattr_, dir_, all_ = lazy_names({"__name__": "json"}, {"decoder": ("JSONDecoder",)})
    >>> all_, getattr_("JSONDecoder").__module__
    (['JSONDecoder'], 'json.decoder')
    """
    package = package_globals["__name__"]
    names = {name: module for module, given in modules.items() for name in given}

    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        package_globals[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(package_globals) | set(names))

    return __getattr__, __dir__, list(names)
