"""The layers, enforced by reading the imports of every module in streamcal/.

core < learner < monitoring < stream < demo < cli: a layer imports only those below it
(docs/contracts.md). Imports inside functions count too (streamcal imports heavy
dependencies lazily), and so do relative ones. The root package (``streamcal``, for
``__version__``), ``streamcal._lazy`` and ``streamcal.errors`` (the errors' tree) are
outside the layers: every layer may import the two modules, which import nothing of
streamcal, and nothing else sits beside them. Sub-packages of a layer
(``stream/state``, ``stream/kafka``) belong to it, with rules of their own inside
(``INNER``), and no module of streamcal is part of an import cycle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "streamcal"
LAYERS = ("core", "learner", "monitoring", "stream", "demo", "cli")
# Third-party packages a layer must not import, with the layers below which they are
# forbidden: core is numbers only; Kafka starts at the stream processor.
THIRD_PARTY = {"river": "learner", "kafka": "stream", "confluent_kafka": "stream"}
# Kafka clients are imported by their adapters only, behind the port (stream/kafka/port.py):
# client package -> the one module that may import it.
ADAPTERS = {
    "kafka": "streamcal.stream.kafka.kafka_python",
    "confluent_kafka": "streamcal.stream.kafka.librdkafka",
}
KAFKA_CLIENTS = ("kafka", "confluent_kafka")


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


def client_violations(path: Path, source: str | None = None) -> list[str]:
    """Imports of a Kafka client outside ``streamcal/stream/kafka/``, or there outside the
    client's adapter module."""
    module = module_name(path)
    source = path.read_text() if source is None else source
    bad, seen = [], set()
    for line, name in imports(source, module, path.name == "__init__.py"):
        top = name.split(".")[0]
        if top in KAFKA_CLIENTS and module != ADAPTERS.get(top) and line not in seen:
            seen.add(line)  # once per statement (``from kafka.x import y`` is read twice)
            bad.append(f"{module}:{line} imports {name} (only its adapter in stream/kafka may)")
    return bad


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_adapters_in_stream_kafka_import_a_kafka_client(path):
    assert client_violations(path) == []


def test_the_client_rule_catches_lazy_imports_anywhere_but_the_adapter():
    source = "def f():\n    from kafka.errors import KafkaError\n    import confluent_kafka\n"
    for where in (PACKAGE / "stream" / "processor.py", PACKAGE / "stream" / "kafka" / "sink.py",
                  PACKAGE / "demo" / "run.py"):  # fmt: skip
        found = client_violations(where, source)
        assert [v.split(" ")[2] for v in found] == ["kafka.errors", "confluent_kafka"]
    adapter = client_violations(PACKAGE / "stream" / "kafka" / "kafka_python.py", source)
    assert [v.split(" ")[2] for v in adapter] == ["confluent_kafka"]


def test_every_layer_is_a_folder_and_every_folder_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS)


# Beside the layers, at the top: modules every layer may import (they import no layer).
BESIDE = ("streamcal._lazy", "streamcal.errors")


def test_beside_the_layers_only_the_root_its_main_and_modules_every_layer_may_import():
    top = {module_name(p) for p in PACKAGE.glob("*.py")}
    assert top == {"streamcal", "streamcal.__main__", *BESIDE}
    for module in BESIDE:
        path = PACKAGE / (module.split(".")[1] + ".py")
        assert [n for _, n in imports(path.read_text(), module, False)
                if n.split(".")[0] == "streamcal"] == []  # fmt: skip


def test_every_layer_may_import_what_sits_beside_the_layers():
    source = "from streamcal.errors import InputError\nfrom streamcal import errors\n"
    for layer in LAYERS:
        assert violations(PACKAGE / layer / "x.py", source) == []


def test_the_readme_and_contracts_list_the_layers_in_order():
    import re

    root = PACKAGE.parent
    readme = (root / "README.md").read_text().split("## Layout", 1)[1]
    chain = re.search(r"`\w+`(?: < `\w+`)+", readme)  # `core` < `learner` < ...
    assert chain and re.findall(r"`(\w+)`", chain.group()) == list(LAYERS)
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


def test_every_folder_of_the_package_is_a_regular_package():
    # A folder without __init__.py would be a namespace package: its modules are still
    # read above, but nothing documents them.
    folders = {p.parent for p in MODULES}
    assert {PACKAGE / "stream" / "state", PACKAGE / "stream" / "kafka"} <= folders
    assert [f for f in folders if not (f / "__init__.py").is_file()] == []


# Inside stream: the Kafka side knows nothing of calibration, state or metric lines; the
# state package nothing of the loop or its metric lines. (module prefix -> not imported)
INNER = {
    "streamcal.stream.kafka": (
        "streamcal.stream.state",
        "streamcal.stream.unit",
        "streamcal.stream.metrics",
        "streamcal.stream.processor",
    ),
    "streamcal.stream.state": ("streamcal.stream.metrics", "streamcal.stream.processor"),
}


def inner_violations(path: Path, source: str | None = None) -> list[str]:
    module = module_name(path)
    source = path.read_text() if source is None else source
    bad = []
    for prefix, banned in INNER.items():
        if module != prefix and not module.startswith(prefix + "."):
            continue
        for line, name in imports(source, module, path.name == "__init__.py"):
            for b in banned:
                if name == b or name.startswith(b + "."):
                    bad.append(f"{module}:{line} imports {name}")
    return bad


@pytest.mark.parametrize(
    "path",
    [p for p in MODULES if p.is_relative_to(PACKAGE / "stream")],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_stream_sub_packages_keep_their_own_order(path):
    assert inner_violations(path) == []


def test_the_inner_rules_catch_a_kafka_module_reaching_up():
    source = "def f():\n    from ..state.units import UnitStates\n    from ..unit import X\n"
    found = inner_violations(PACKAGE / "stream" / "kafka" / "clients.py", source)
    assert [v.split(" ")[2] for v in found] == [
        "streamcal.stream.state.units",
        "streamcal.stream.unit",
    ]
    assert inner_violations(PACKAGE / "stream" / "processor.py", source) == []


# ---------------------------------------------------------------- import cycles
def streamcal_imports(module: str, source: str, is_package: bool, known: set) -> set:
    """The modules of streamcal that ``module`` imports, anywhere in ``source``.

    ``from X import Y`` imports the module ``X.Y`` when there is one, else ``X`` (a
    package: its ``__init__``). A module's own ancestor packages are left out: Python has
    imported them before it, so importing from them cannot make an import order.
    """
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            names = [f"{name}.{a.name}" if f"{name}.{a.name}" in known else name
                     for a in node.names]  # fmt: skip
        else:
            continue
        out.update(n for n in names if n in known and n != module)
    return {n for n in out if not module.startswith(n + ".")}


def import_cycles(graph: dict) -> list[list[str]]:
    """The cycles of ``graph`` (module -> imported modules), one per strongly connected
    component of more than one module, each sorted (Tarjan's algorithm)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    cycles = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(cycles)


def test_no_import_cycle_inside_streamcal():
    sources = {module_name(p): p for p in MODULES}
    known = set(sources)
    graph = {
        m: streamcal_imports(m, p.read_text(), p.name == "__init__.py", known)
        for m, p in sources.items()
    }
    assert import_cycles(graph) == []


def test_the_cycle_finder_sees_lazy_relative_and_package_imports():
    known = {
        "streamcal.stream",
        "streamcal.stream.state",
        "streamcal.stream.state.checkpoint",
        "streamcal.stream.state.migrations",
        "streamcal.stream.unit",
    }
    sources = {
        # a lazy, relative import of a sibling module ...
        "streamcal.stream.state.checkpoint": "def seal():\n    from . import migrations\n",
        # ... and one back through the package's name: a cycle
        "streamcal.stream.state.migrations": "from streamcal.stream.state import checkpoint\n",
        # importing a package imports its __init__, which imports unit: a second cycle
        "streamcal.stream.unit": "import streamcal.stream.state\nfrom . import x\n",
        "streamcal.stream.state": "from ..unit import GLOBAL_UNIT\nfrom . import checkpoint\n",
        # unit's `from . import x` (no module x: the package streamcal.stream) is an
        # import of its own package, no edge: no cycle through streamcal.stream
        "streamcal.stream": "from streamcal.stream import unit\n",
    }
    graph = {
        m: streamcal_imports(m, src, m in ("streamcal.stream", "streamcal.stream.state"), known)
        for m, src in sources.items()
    }
    assert graph["streamcal.stream.state.checkpoint"] == {"streamcal.stream.state.migrations"}
    assert graph["streamcal.stream.state.migrations"] == {"streamcal.stream.state.checkpoint"}
    assert graph["streamcal.stream.unit"] == {"streamcal.stream.state"}
    assert graph["streamcal.stream"] == {"streamcal.stream.unit"}
    assert import_cycles(graph) == [
        ["streamcal.stream.state", "streamcal.stream.unit"],
        ["streamcal.stream.state.checkpoint", "streamcal.stream.state.migrations"],
    ]
