"""Field names a pipeline uses, checked against the fields its source declares, before Spark starts.

A source on Spark declares its element's fields (``value_fields``). A pipeline names some
of them directly on the source's elements: the timestamp field of a strategy
(``with_timestamp_assigner("ts")``), the key of ``key_by("user")`` (of a window, a keyed
process function or either input of a ``connect``) and the field of a built-in aggregate
(``sum("amount")``), when only ``assign_timestamps_and_watermarks`` and ``union`` stand
between them and the source (until session 53, only a window fed straight from one source).
A name the source does not declare would make every record a dead letter, or fail the query
after Spark has started; :func:`check_field_names` says so at once, in the words of the pipeline.
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
    KeyedCoProcessTransformation,
    KeyedProcessTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)

__all__ = ["check_composite_keys", "check_field_names", "field_uses"]


def _walk(pipeline: PipelineLike) -> list[Transformation]:
    return sorted(as_pipeline(pipeline).walk(), key=lambda t: t.id)


def _sources_of(t: Transformation) -> list[SourceTransformation]:
    """The sources whose elements ``t`` receives unchanged: through watermark strategies and
    unions (a union's member with a ``map`` on its way brings changed elements, and is left out)."""
    while isinstance(t, AssignTransformation):
        t = t.input
    if isinstance(t, SourceTransformation):
        return [t]
    if isinstance(t, UnionTransformation):
        return [s for member in t.members for s in _sources_of(member)]
    return []


def _key_uses(sources: list[SourceTransformation], selector: Any) -> list[tuple[SourceTransformation, str, str]]:
    key = getattr(selector, "field_name", None)
    return [] if key is None else [(source, f'key_by("{key}")', key) for source in sources]


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
            field = _timestamp_field(t.strategy)
            if field is not None:
                uses += [(source, f'with_timestamp_assigner("{field}")', field) for source in _sources_of(t.input)]
        elif isinstance(t, WindowTransformation):
            sources = _sources_of(t.input)
            uses += _key_uses(sources, t.key_selector)
            agg = t.contents.function if isinstance(t.contents, AggregatingContents) else None
            if isinstance(agg, BuiltinAggregate) and agg.field is not None:
                uses += [(source, f'{agg.name}("{agg.field}")', agg.field) for source in sources]
        elif isinstance(t, KeyedProcessTransformation):
            uses += _key_uses(_sources_of(t.input), t.key_selector)
        elif isinstance(t, KeyedCoProcessTransformation):
            uses += _key_uses(_sources_of(t.first), t.key_selector1) + _key_uses(_sources_of(t.second), t.key_selector2)
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
            _check_type(source.source, what, field)
            _check_key_type(source.source, what, field)
            continue
        close = difflib.get_close_matches(field, declared, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else "."
        raise ConfigurationError(
            "fields", f"{what} names a field that {type(source.source).__name__} does not declare; "
            f"its fields are {', '.join(declared) or '(none)'}{hint} Fix the name, or {_how_to_declare(source.source)}")


_NOT_A_NUMBER = {"STRING": "text", "BOOLEAN": "true or false", "BOOL": "true or false"}


def _check_type(source: object, what: str, field: str) -> None:
    """A timestamp or a ``sum``/``avg`` of a field the source's ``value_fields`` declare as text (or
    a boolean; a timestamp as a DECIMAL) made every record a dead letter (``missing or non-numeric
    timestamp``, ``non-numeric value``), and the run succeeded with no result: refused, as a
    misspelt name is. (A ``DataFrameSource``'s columns are typed by the user's DataFrame, whose
    rows are dead-lettered one by one, docs/reliability.md.)"""
    timestamp = what.startswith("with_timestamp_assigner(")
    if not (timestamp or what.startswith(("sum(", "avg("))):
        return
    kind = next((str(t).strip().upper() for n, t in getattr(source, "value_fields", None) or () if n == field), None)
    if kind is None:
        return
    said = _NOT_A_NUMBER.get(kind)
    if said is None and timestamp and kind.startswith(("DECIMAL", "NUMERIC", "DEC")):
        said = "a decimal, which a timestamp assigner does not take"
    if said is None:
        return
    wanted = "an epoch-millisecond number (BIGINT) or a TIMESTAMP" if timestamp else "a number"
    raise ConfigurationError(
        "fields", f"{what} reads {field!r}, which {type(source).__name__} declares as {kind} "
        f"({said}): every record would be a dead letter. It needs {wanted}. Hint: declare the field with its "
        f"type, or convert it in a map")


def _declared_type(source: object, field: str) -> str | None:
    """``field``'s type as ``source`` declares it (``value_fields``, or a ``DataFrameSource``'s
    columns), upper case without spaces; ``None`` where it says none."""
    declared = getattr(source, "value_fields", None)
    typed = getattr(source, "field_types", None)
    if not declared and callable(typed):
        declared = typed()
    return next(("".join(str(t).upper().split()) for n, t in declared or () if n == field), None)


_KEY_HINT = ("key by a column made from it in the DataFrame (F.to_json(...), or F.concat_ws over its parts), "
             "or by several scalar fields joined in a key selector")


def _check_key_type(source: object, what: str, field: str) -> None:
    """A MAP key column: Spark's grouping (the native path's) takes a map holding a null for the same
    key as one holding 0, so two keys' windows were summed as one, with the accounting balanced,
    and the keyed and general paths failed at the first record (``unhashable type: 'dict'``, blamed
    on a user function; a user probe, session 56). Refused before the run on every path."""
    kind = _declared_type(source, field) if what.startswith("key_by(") else None
    if kind is None or not kind.startswith("MAP<"):
        return
    raise ConfigurationError(
        "fields", f"{what} keys by {field!r}, a {kind} column: Spark groups maps "
        f"with a null value and with 0 as one key, and a map is no key Python can hash. Hint: {_KEY_HINT}")


def check_composite_keys(pipeline: PipelineLike, path: str) -> None:
    """Refuse a ``key_by("field")`` whose field a source declares as an ARRAY or a STRUCT, for a
    pipeline on ``path``, a path that keys in Python (keyed, general), where such a value (a list,
    a dict) is no key. The native path groups them as Spark does. Until session 56 the query
    started and failed at the first record, blaming a user function (a user probe)."""
    for source, what, field in field_uses(pipeline):
        kind = _declared_type(source.source, field) if what.startswith("key_by(") else None
        if kind is not None and kind.startswith(("ARRAY<", "STRUCT<")):
            raise ConfigurationError(
                "fields", f"{what} keys by {field!r}, a {kind} column, and this pipeline takes the {path} "
                f"path, which keys in Python, where an array or a struct is no key (the native path, for "
                f"windows of built-in aggregates, groups them as Spark does). Hint: {_KEY_HINT}")


def _how_to_declare(source: object) -> str:
    """How a field is added to ``source``: in its ``value_fields`` (the log's, Kafka's), as a column of
    its DataFrame (a ``DataFrameSource``, whose fields are the DataFrame's columns), or by its ``fields()``."""
    if hasattr(source, "value_fields"):
        return "declare the field in the source's value_fields"
    if hasattr(source, "df"):
        return "add the column to the source's DataFrame (withColumn)"
    return "make the source declare the field (its fields())"
