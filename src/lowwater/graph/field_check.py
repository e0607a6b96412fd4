"""Field names a pipeline uses, checked against the fields its source declares, before Spark starts.

A source on Spark declares its element's fields (``value_fields``). A pipeline names some
of them directly on the source's elements: the timestamp field of a strategy
(``with_timestamp_assigner("ts")``), the key of ``key_by("user")`` and the field of a
built-in aggregate (``sum("amount")``), when only ``assign_timestamps_and_watermarks``
stands between them and the source. A name the source does not declare would make every
record a dead letter, or fail the query after Spark has started; :func:`check_field_names`
says so at once, in the words of the pipeline.
"""

from __future__ import annotations

import difflib
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import FieldTimestampAssigner, WatermarkStrategy
from lowwater.core.windows import AggregatingContents, BuiltinAggregate
from lowwater.graph.pipeline import PipelineLike, as_pipeline
from lowwater.graph.transformations import (
    AssignTransformation,
    SourceTransformation,
    Transformation,
    WindowTransformation,
)

__all__ = ["check_field_names", "field_uses"]


def _walk(pipeline: PipelineLike) -> list[Transformation]:
    return sorted(as_pipeline(pipeline).walk(), key=lambda t: t.id)


def _source_of(t: Transformation) -> SourceTransformation | None:
    """The source whose elements ``t`` receives unchanged, if any."""
    while isinstance(t, AssignTransformation):
        t = t.input
    return t if isinstance(t, SourceTransformation) else None


def _timestamp_field(strategy: WatermarkStrategy[Any] | None) -> str | None:
    proto = None if strategy is None else strategy.assigner_prototype
    return proto.field if isinstance(proto, FieldTimestampAssigner) else None


def field_uses(pipeline: PipelineLike) -> list[tuple[SourceTransformation, str, str]]:
    """``(source, what, field)`` for every field name used on a source's own elements."""
    uses: list[tuple[SourceTransformation, str, str]] = []
    for t in _walk(pipeline):
        if isinstance(t, SourceTransformation):
            field = _timestamp_field(t.strategy)
            if field is not None:
                uses.append((t, f'with_timestamp_assigner("{field}")', field))
        elif isinstance(t, AssignTransformation):
            source, field = _source_of(t.input), _timestamp_field(t.strategy)
            if source is not None and field is not None:
                uses.append((source, f'with_timestamp_assigner("{field}")', field))
        elif isinstance(t, WindowTransformation):
            source = _source_of(t.input)
            if source is None:
                continue
            key = getattr(t.key_selector, "field_name", None)
            if key is not None:
                uses.append((source, f'key_by("{key}")', key))
            agg = t.contents.function if isinstance(t.contents, AggregatingContents) else None
            if isinstance(agg, BuiltinAggregate) and agg.field is not None:
                uses.append((source, f'{agg.name}("{agg.field}")', agg.field))
    return uses


def check_field_names(pipeline: PipelineLike) -> None:
    """Raise :class:`ConfigurationError` for a field name no source declares (see the module),
    or for a source whose data cannot be read as it declares (its ``check_before_run``)."""
    p = as_pipeline(pipeline)
    for t in _walk(p):
        check = getattr(t.source, "check_before_run", None) if isinstance(t, SourceTransformation) else None
        if callable(check):
            check()
    for source, what, field in field_uses(p):
        fields_of = getattr(source.source, "fields", None)
        if not callable(fields_of):
            continue
        declared = list(fields_of())
        if field in declared:
            continue
        close = difflib.get_close_matches(field, declared, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        raise ConfigurationError(
            "fields", f"{what} names a field that {type(source.source).__name__} does not declare; "
            f"its fields are {', '.join(declared) or '(none)'}{hint} Fix the name, or {_how_to_declare(source.source)}")


def _how_to_declare(source: object) -> str:
    """How a field is added to ``source``: in its ``value_fields`` (the log's, Kafka's), as a column of
    its DataFrame (a ``DataFrameSource``, whose fields are the DataFrame's columns), or by its ``fields()``."""
    if hasattr(source, "value_fields"):
        return "declare the field in the source's value_fields"
    if hasattr(source, "df"):
        return "add the column to the source's DataFrame (withColumn)"
    return "make the source declare the field (its fields())"
