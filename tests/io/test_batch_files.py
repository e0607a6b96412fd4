"""The batch files of BatchFilesSource: each value read by its declared type, each bad line named."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from lowwater.api import CollectSink, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.io.batch_files import BatchFileError, read_batch_file
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.spark.sources import BatchFilesSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("amount", "DECIMAL(10,2)"), ("at", "TIMESTAMP")]

LINES = [
    '{"partition": 0, "offset": 0, "seq": 0, "value": {"key": "a", "ts": 100, "amount": 10.50, '
    '"at": "1970-01-01T00:00:00.5Z"}}',
    '{"partition": 0, "offset": 1, "seq": 1, "value": {"key": 7, "ts": 200, "amount": 1}}',
    '{"partition": 0, "offset": 2, "seq": 2, "value": {"key": "a", "ts": "300", "amount": 1}}',
    '{"partition": 0, "offset": 3, "seq": 3, "value": {"key": "a", "ts": 400, "amount": 10.505}}',
    '{"partition": 0, "offset": 4, "seq": 4, "value": {"key": "a", "ts": 500, "amount": 0.10}}',
    '{"partition": 0, "offset": 5, "seq": 5, "value": null}',
    '{"partition": 0, "offset": 6, "seq": 6, "value": {"key": "b", "ts": 700, "amount": 1e2}}',
    '{"partition": 0, "offset": 7, "seq": 7, "value": {"key": "b", "ts": 800, "at": 5000}}',
]

DEAD = [(1, "field 'key': 7 is not a STRING"), (2, "field 'ts': '300' is not a BIGINT"),
        (3, "field 'amount': 10.505 is not a DECIMAL(10,2)"), (5, "'value' must be a JSON object, got NoneType"),
        (7, "field 'at': 5000 is not a TIMESTAMP")]


def _pipeline(directory: Path) -> tuple[StreamExecutionEnvironment, CollectSink]:
    env = StreamExecutionEnvironment()
    sums = (env.from_source(BatchFilesSource(directory, FIELDS, [0]),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("amount")).collect()
    return env, sums


def test_read_file_reads_each_value_by_the_declared_types_and_dead_letters_the_rest(tmp_path: Path) -> None:
    (tmp_path / "batch-00000000.jsonl").write_text("\n".join(LINES) + "\n")
    read = read_batch_file(tmp_path / "batch-00000000.jsonl", BatchFilesSource(tmp_path, FIELDS, [0])
                                      .declared_fields)
    assert [seq for _, seq in read] == list(range(8))
    good = [(r.offset, r.value) for r, _ in read if r.error is None]
    assert good == [(0, {"key": "a", "ts": 100, "amount": Decimal("10.50"), "at": 500}),
                    (4, {"key": "a", "ts": 500, "amount": Decimal("0.10"), "at": None}),
                    (6, {"key": "b", "ts": 700, "amount": Decimal("100.00"), "at": None})]
    assert [(r.offset, r.error) for r, _ in read if r.error is not None] == DEAD


@pytest.mark.parametrize(("line", "says"), [
    ("{not json", "line 2 is not JSON"),
    ("[1, 2]", "line 2 is a JSON list, not a record object"),
    ('{"offset": 0, "value": {}}', "line 2: 'partition' is None; it must be an integer"),
    ('{"partition": "0", "value": {}}', "line 2: 'partition' is '0'; it must be an integer"),
    ('{"partition": 0, "offset": 1.5, "value": {}}', "line 2: 'offset' is 1.5; it must be an integer or null"),
    ('{"partition": -1, "value": {}}', "line 2: 'partition' is -1; it must be from 0 to 2**31 - 1"),
    ("", "line 2 is not JSON"),
])
def test_a_line_that_is_not_a_record_fails_naming_the_file_and_line(tmp_path: Path, line: str, says: str) -> None:
    (tmp_path / "batch-00000000.jsonl").write_text(LINES[0] + "\n" + line + "\n")
    env, _ = _pipeline(tmp_path)
    with pytest.raises(BatchFileError, match="batch-00000000.jsonl, " + says.replace("*", r"\*")
                       .replace("[", r"\[").replace("(", r"\(")):
        ReferenceRuntime().execute(env)
