"""The KRaft cluster id the test broker is formatted with."""

from __future__ import annotations

import uuid

from lowwater.spark.kafka import new_cluster_id


def test_a_cluster_id_never_starts_with_a_dash_the_storage_tool_would_take_for_an_option() -> None:
    # 0xF8 is 111110..: base64url's 62nd character, "-"; one random UUID in 64 starts so
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x04" + bytes(15))])
    assert new_cluster_id(lambda: next(drawn)) == "BAAAAAAAAAAAAAAAAAAAAA"
    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
