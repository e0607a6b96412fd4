"""What run and status say about a batch's dead letters: reasons grouped by kind, and an example."""

from __future__ import annotations

import io

from lowwater.core.errors import BadRecordError
from lowwater.metrics.dead_letters import sample_place, summarize_dead
from lowwater.observe.progress import print_progress
from lowwater.observe.status import render_status


def test_reasons_group_by_kind_and_a_line_that_does_not_parse_says_why() -> None:
    """A field of the wrong type and a line that is no JSON were one kind, ``record does not parse``;
    the reference runtime's ``invalid JSON (Expecting value`` was cut inside its parentheses; and the
    warning's example for a line with no record printed nothing after the offset."""
    rows = [
        {"reason": BadRecordError.unparsed("field 'ts': 'oops' is not a BIGINT"), "partition": 2, "offset": 0,
         "record": None},
        {"reason": BadRecordError.unparsed("field 'ts': 1e999 (read as DOUBLE) is not a BIGINT"), "partition": 2,
         "offset": 1, "record": None},
        {"reason": BadRecordError.unparsed("invalid JSON (Expecting value: line 1 column 1 (char 0)): 'not json'"),
         "partition": 2, "offset": 6, "record": ""},
        {"reason": "invalid JSON (Expecting value: line 1 column 1 (char 0)): 'x'", "partition": 2, "offset": 7},
    ]
    summary = summarize_dead(rows)
    assert summary["dead_letter_sample"]["record"] is None  # not the text "null", which status printed
    assert summary["dead_letter_reasons"] == {"record does not parse (field 'ts' is not a BIGINT)": 2,
                                              "record does not parse (invalid JSON)": 1, "invalid JSON": 1}
    err = io.StringIO()
    print_progress({"batch_id": 6, "rows_in": 4, "rows_dead_lettered": 4, **summary}, out=io.StringIO(), err=err)
    assert ("e.g. partition 2 offset 0: record does not parse: \"field 'ts': 'oops' is not a BIGINT\"; hint: "
            "check the data") in err.getvalue()


def test_a_sample_of_a_job_of_several_sources_says_which_source_it_was_read_from() -> None:
    """A union's dead letters carry their source's label; the example named only the partition and
    offset, which both sources have (``partition 0 offset 2``)."""
    rows = [{"reason": "missing key (key)", "partition": 0, "offset": 2, "record": "{}", "source": "orders"},
            {"reason": "missing key (key)", "partition": 1, "offset": 5, "record": "{}", "source": "clicks"}]
    summary = summarize_dead(rows)
    assert summary["dead_letter_sample"] == {**rows[0]}
    assert sample_place(summary["dead_letter_sample"]) == "partition orders:0 offset 2"
    unlabelled = summarize_dead([{**rows[0], "source": None}])["dead_letter_sample"]  # one source: none named
    assert "source" not in unlabelled and sample_place(unlabelled) == "partition 0 offset 2"
    # a DataFrameSource given no offset column: its rows have none (it said "offset None")
    assert sample_place({**unlabelled, "offset": None}) == "partition 0"
    err = io.StringIO()
    print_progress({"batch_id": 1, "rows_in": 2, "rows_dead_lettered": 2, **summary}, out=io.StringIO(), err=err)
    assert "e.g. partition orders:0 offset 2: missing key (key)" in err.getvalue()
    lines = [{"batch_id": 0, "processing_time_ms": 0, "rows_in": 2, "rows_dead_lettered": 2, **summary}]
    assert "  e.g. partition orders:0 offset 2: missing key (key): {}" in render_status("ck", lines).splitlines()

