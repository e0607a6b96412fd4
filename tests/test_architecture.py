"""``lowwater.core`` is pure Python: no module under it imports pyspark, anywhere in the file
(module level, inside functions, under ``TYPE_CHECKING``, via ``importlib``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "src" / "lowwater" / "core"


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
