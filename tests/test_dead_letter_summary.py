"""What run and status say about a batch's dead letters: reasons grouped by kind, and an example."""

from __future__ import annotations

import io

from lowwater.core.errors import BadRecordError
from lowwater.metrics.dead_letters import summarize_dead
from lowwater.observe.progress import print_progress


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
    assert summary["dead_letter_reasons"] == {"record does not parse (field 'ts' is not a BIGINT)": 2,
                                              "record does not parse (invalid JSON)": 1, "invalid JSON": 1}
    err = io.StringIO()
    print_progress({"batch_id": 6, "rows_in": 4, "rows_dead_lettered": 4, **summary}, out=io.StringIO(), err=err)
    assert ("e.g. partition 2 offset 0: record does not parse: \"field 'ts': 'oops' is not a BIGINT\"; hint: "
            "check the data") in err.getvalue()
