"""The layers, enforced by reading the imports of every module in streamcal/.

core < learner < monitoring < stream < demo < cli: a layer imports only those below it
(docs/contracts.md). Imports inside functions count too (streamcal imports heavy
dependencies lazily), and so do relative ones. The root package (``streamcal``, for
``__version__``) and ``streamcal._lazy`` are outside the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "streamcal"
LAYERS = ("core", "learner", "monitoring", "stream", "demo", "cli")
# Third-party packages a layer must not import, with the layers below which they are
# forbidden: core is numbers only; Kafka starts at the stream processor.
THIRD_PARTY = {"river": "learner", "kafka": "stream"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, imported module)`` for every import statement anywhere in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.append((node.lineno, name))
            if layer_of(name) is None:  # `from streamcal import demo`: the submodule
                out.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names)
    return out


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    if parts[0] != "streamcal" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def violations(path: Path, source: str | None = None) -> list[str]:
    module = module_name(path)
    own = layer_of(module)
    if own is None:
        return []
    source = path.read_text() if source is None else source
    bad = []
    for line, name in imports(source, module, path.name == "__init__.py"):
        top = name.split(".")[0]
        if top == "streamcal":
            other = layer_of(name)  # None: the root or streamcal._lazy, outside the layers
            if other is not None and other > own:
                bad.append(f"{module}:{line} imports {name} ({LAYERS[other]} is above)")
        elif top in THIRD_PARTY and own < LAYERS.index(THIRD_PARTY[top]):
            bad.append(f"{module}:{line} imports {name} (not in {LAYERS[own]})")
    return bad


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_layer_is_a_folder_and_every_folder_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS)


def test_the_readme_and_contracts_list_the_layers_in_order():
    import re

    root = PACKAGE.parent
    readme = (root / "README.md").read_text().split("## Layout", 1)[1]
    assert re.findall(r"^\| `streamcal/(\w+)` \|", readme, re.M) == list(LAYERS)
    contracts = (root / "docs" / "contracts.md").read_text()
    assert re.findall(r"^\| \d \| `streamcal/(\w+)` \|", contracts, re.M) == list(LAYERS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_layers(path):
    assert violations(path) == []


def test_the_reader_catches_lazy_relative_and_third_party_imports():
    source = (
        "import numpy\n"
        "from . import merge\n"
        "def f():\n"
        "    from streamcal.stream.config import ProcessorConfig\n"
        "    import river\n"
        "class C:\n"
        "    def g(self):\n"
        "        from ..monitoring import tracker\n"
        "        from streamcal import cli\n"
    )
    found = violations(PACKAGE / "core" / "store.py", source)
    assert [v.split(" ")[2] for v in found] == [
        "streamcal.stream.config",
        "river",
        "streamcal.monitoring",
        "streamcal.cli",
    ]
    # The same imports one layer up the chain are allowed where the layer permits them.
    assert violations(PACKAGE / "cli" / "demo.py", source) == []
