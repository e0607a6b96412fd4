"""Runtimes by name, imported on demand (as Beam's ``runners/runner.py`` does).

The API never imports a runtime: :meth:`StreamExecutionEnvironment.execute` hands a
:class:`~lowwater.graph.Pipeline` to a runtime object, or to one it makes from a name in
:data:`RUNTIMES`, whose module is imported only then. A runtime is anything with
``execute(pipeline, job_name)``.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, Protocol

from lowwater.core.errors import ConfigurationError
from lowwater.graph import PipelineLike

__all__ = ["RUNTIMES", "Runtime", "RuntimeName", "runtime_named"]

RuntimeName = Literal["reference", "spark"]

RUNTIMES: dict[str, str] = {
    "reference": "lowwater.runtime.reference:ReferenceRuntime",
    "spark": "lowwater.spark.engine:SparkRuntime",
}
"""Runtime name -> ``module:class``; the class is called with the options ``execute`` was given."""


class Runtime(Protocol):
    def execute(self, pipeline: PipelineLike, job_name: str = ...) -> Any: ...


def runtime_named(name: str, **options: Any) -> Runtime:
    """A new runtime of the class ``RUNTIMES[name]``, made with ``options``."""
    if name not in RUNTIMES:
        raise ConfigurationError("runtime", f"unknown runtime {name!r}; use 'reference' or 'spark'")
    module, _, cls = RUNTIMES[name].partition(":")
    runtime: Runtime = getattr(importlib.import_module(module), cls)(**options)
    return runtime
