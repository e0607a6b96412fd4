"""The pipeline as a value: transformations, sources, sinks, and :class:`Pipeline`.

Below the builder (:mod:`lowwater.api`) and every runtime: the API makes a
:class:`Pipeline`, a runtime receives one (see ``tests/test_architecture.py``).
"""

from lowwater.graph.pipeline import HasPipeline, Pipeline, PipelineLike, as_pipeline

__all__ = ["HasPipeline", "Pipeline", "PipelineLike", "as_pipeline"]
