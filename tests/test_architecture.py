"""The layers of lowwater, and the arrows between them.

``lowwater.core`` is pure Python: no module under it imports pyspark, anywhere in the file
(module level, inside functions, under ``TYPE_CHECKING``, via ``importlib``). Every import
between lowwater's packages points down the layer map (:data:`LAYERS`), and no modules
import each other in a cycle.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
CORE = SRC / "lowwater" / "core"


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def pyspark_imports(source: str) -> list[str]:
    """Every place ``source`` imports pyspark (or names it for a dynamic import)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "pyspark"]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.split(".")[0] == "pyspark":
                found.append(node.module)
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = (
                fn.attr
                if isinstance(fn, ast.Attribute)
                else fn.id
                if isinstance(fn, ast.Name)
                else ""
            )
            arg = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.split(".")[0] == "pyspark"
            ):
                found.append(arg.value)
    return found


def test_core_has_modules_to_check() -> None:
    assert CORE.is_dir()
    assert len(_core_modules()) > 10


@pytest.mark.parametrize("module", _core_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_does_not_import_pyspark(module: Path) -> None:
    assert pyspark_imports(module.read_text()) == []


def lowwater_outer_imports(source: str) -> list[str]:
    """Imports of lowwater packages that sit on top of the core (api, runtime, spark, io, cli)."""
    outer = {"api", "runtime", "spark", "io", "cli", "scenario", "demo"}
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [
            n
            for n in names
            if n.split(".")[:1] == ["lowwater"] and n.split(".")[1:2] and n.split(".")[1] in outer
        ]
    return found


@pytest.mark.parametrize("module", _core_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_does_not_depend_on_the_layers_above_it(module: Path) -> None:
    assert lowwater_outer_imports(module.read_text()) == []


def test_the_layer_checker_finds_an_upward_import() -> None:
    assert lowwater_outer_imports("from lowwater.runtime.nodes import WindowNode") != []
    assert lowwater_outer_imports("import lowwater.spark.engine") != []
    assert lowwater_outer_imports("from lowwater.core.time import MIN_TIMESTAMP") == []


@pytest.mark.parametrize(
    "source",
    [
        "import pyspark",
        "import pyspark.sql as sql",
        "import os, pyspark.sql.functions",
        "from pyspark.sql import SparkSession",
        "from pyspark import SparkContext",
        "def f():\n    import pyspark\n",
        "class C:\n    def m(self):\n        from pyspark.sql import functions as F\n",
        "if TYPE_CHECKING:\n    from pyspark.sql import DataFrame\n",
        "try:\n    import pyspark\nexcept ImportError:\n    pass\n",
        "import importlib\nimportlib.import_module('pyspark.sql')\n",
        "__import__('pyspark')",
    ],
)
def test_the_checker_finds_pyspark_imports_wherever_they_are(source: str) -> None:
    assert pyspark_imports(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import pysparkling",
        "from lowwater.core import time",
        "from . import pyspark_like",
        "x = 'pyspark'",
    ],
)
def test_the_checker_ignores_names_that_are_not_pyspark(source: str) -> None:
    assert pyspark_imports(source) == []


# -- the layer map ----------------------------------------------------------------------
LAYERS: list[tuple[str, ...]] = [
    ("lowwater",),  # the root package's __init__ only (it imports nothing)
    ("lowwater.core", "lowwater.util"),
    ("lowwater.graph", "lowwater.metrics"),
    ("lowwater.api", "lowwater.runtime", "lowwater.io"),
    ("lowwater.spark",),
    ("lowwater.observe",),
    ("lowwater.scenario", "lowwater.demo"),
    ("lowwater.scenario_kafka", "lowwater.demo_kafka"),
    ("lowwater.cli",),
]
"""Bottom first. A module may import its own unit (package or module named here) and any
unit of a lower layer, never a unit of its own layer or above: ``api`` and ``runtime``
know nothing of each other, and ``api`` reaches a runtime only through the registry of
:mod:`lowwater.api.runtimes`, which names runtimes as data (``"module:Class"``) and imports
one when asked for it, as Beam's runner registry does (see the test of it below).

Every import counts: at module level, inside functions, under ``TYPE_CHECKING`` (no
exception is needed there: types follow the same arrows), relative ones, ``from package
import submodule``, the parent packages an import runs, and ``importlib.import_module``
with a constant name."""

LAYER_OF = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit_of(module: str) -> str:
    """The unit of :data:`LAYERS` a module belongs to (the longest one naming it or a parent)."""
    if module == "lowwater":
        return module
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in LAYER_OF:
            return ".".join(parts[:n])
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def lowwater_imports(
    source: str, module: str, is_package: bool = False, parents: bool = True, type_checking: bool = True,
) -> set[str]:
    """Every lowwater module that importing ``module`` (whose code is ``source``) may import;
    with ``parents``, also the packages those imports run first; without ``type_checking``,
    not those under ``if TYPE_CHECKING:``."""
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    types_only: set[int] = set()
    if not type_checking:
        for block in ast.walk(tree):
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test):
                types_only.update(id(n) for stmt in block.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in types_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if called in ("import_module", "__import__"):
                names = [node.args[0].value]
        for name in names:
            parts = name.split(".")
            if parts[0] == "lowwater":
                found.update(".".join(parts[:n]) for n in range(1 if parents else len(parts), len(parts) + 1))
    found.discard(module)
    return found


def _graph(parents: bool = True, type_checking: bool = True) -> dict[str, set[str]]:
    graph = {}
    for path in sorted((SRC / "lowwater").rglob("*.py")):
        module = _module_name(path)
        imports = lowwater_imports(path.read_text(), module, path.name == "__init__.py", parents, type_checking)
        graph[module] = {m for m in imports if _is_module(m)}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, imports in sorted(graph.items()):
        here = unit_of(module)
        for imported in sorted(imports):
            there = unit_of(imported)
            if there != here and LAYER_OF[there] >= LAYER_OF[here]:
                bad.append(f"{module} (layer {LAYER_OF[here]}, {here}) imports {imported} "
                           f"(layer {LAYER_OF[there]}, {there})")
    return bad


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_every_lowwater_module_is_in_a_layer() -> None:
    for module in _graph():
        unit_of(module)


def test_every_import_between_lowwater_packages_points_down_the_layer_map() -> None:
    assert upward_imports(_graph()) == []


def test_no_lowwater_modules_import_each_other_in_a_cycle() -> None:
    # The imports that run, as written. Not the parent packages an import runs first: a
    # submodule whose package's __init__ imports its siblings is how every package loads.
    # Not the imports under TYPE_CHECKING, which never run: a cycle of them cannot fail at
    # import time, and the layer test above still holds them to the layer map. The one such
    # pair is api.environment (makes DataStreams) and api.datastream (annotates the
    # environment it holds), as Flink's StreamExecutionEnvironment and DataStream.
    assert import_cycles(_graph(parents=False, type_checking=False)) == []


def test_the_api_reaches_a_runtime_only_through_its_registry_of_names() -> None:
    from lowwater.api.runtimes import RUNTIMES

    api_imports = set().union(*(imports for m, imports in _graph().items() if unit_of(m) == "lowwater.api"))
    for name, target in RUNTIMES.items():
        module, _, cls = target.partition(":")
        assert unit_of(module) != "lowwater.api" and module not in api_imports, name
        assert callable(getattr(getattr(importlib.import_module(module), cls), "execute", None)), name


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("lowwater.api.environment", "from lowwater.runtime.reference import ReferenceRuntime"),
        ("lowwater.api.environment", "def run():\n    from lowwater.spark.engine import SparkRuntime\n"),
        ("lowwater.runtime.job", "if TYPE_CHECKING:\n    from lowwater.api.environment import X\n"),
        ("lowwater.runtime.job", "from ..api import environment"),
        ("lowwater.runtime.job", "from lowwater.api import environment"),
        ("lowwater.metrics.log", "import lowwater.observe.status"),
        ("lowwater.core.time", "importlib.import_module('lowwater.graph.pipeline')"),
        ("lowwater.spark.engine", "from lowwater import cli"),
    ],
)
def test_the_layer_check_finds_an_upward_import_wherever_it_is(module: str, source: str) -> None:
    graph = {module: {m for m in lowwater_imports(source, module) if _is_module(m)}}
    assert upward_imports(graph) != []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("lowwater.spark.engine", "from lowwater.graph import Pipeline"),
        ("lowwater.api.environment", "from lowwater.api.runtimes import runtime_named"),
        ("lowwater.runtime.job", "from .nodes import Node"),
        ("lowwater.observe.status", "from lowwater.metrics.log import read_checkpoint"),
    ],
)
def test_the_layer_check_accepts_imports_that_point_down_or_stay_in_their_unit(module: str, source: str) -> None:
    graph = {module: {m for m in lowwater_imports(source, module) if _is_module(m)}}
    assert upward_imports(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_cycle_check_can_leave_out_imports_that_only_type_checkers_run() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lowwater.api.environment import E\n"
    assert lowwater_imports(source, "lowwater.api.datastream", type_checking=False) == set()
    assert "lowwater.api.environment" in lowwater_imports(source, "lowwater.api.datastream")
