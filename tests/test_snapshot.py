"""A watermark generator's state through the checkpoint's JSON (lowwater.spark.snapshot), as data."""

from __future__ import annotations

import collections
import json
from typing import Any

from lowwater.spark.snapshot import restore, to_data

Stats = collections.namedtuple("Stats", "max_ts count")


class _Generator:
    def __init__(self) -> None:
        self.stats = Stats(None, 0)
        self.seen: collections.defaultdict[str, int] = collections.defaultdict(int)
        self.lists: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
        self.counts: collections.Counter[str] = collections.Counter()
        self.order: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.nested = {"s": Stats(1, 2)}


def test_namedtuples_and_dict_subclasses_come_back_as_they_were() -> None:
    """A namedtuple was kept without its values (the fresh object's initial one stayed), and a
    defaultdict or Counter came back a plain dict (``d[new] += 1`` then raised ``KeyError``): a user
    generator on the keyed path lost its state every batch, and on the executor path at a restart."""
    g = _Generator()
    g.stats = Stats(12_000, 2)
    g.seen["a"] += 5
    g.lists["b"].append(7)
    g.counts["x"] += 3
    g.order["z"], g.order["y"] = 1, 2
    data = json.loads(json.dumps(to_data(g)))
    back: Any = restore(data, _Generator())
    assert back.stats == Stats(12_000, 2) and type(back.stats) is Stats
    assert back.nested == {"s": Stats(1, 2)} and type(back.nested["s"]) is Stats
    assert type(back.seen) is collections.defaultdict and dict(back.seen) == {"a": 5}
    back.seen["new"] += 1  # the factory came back too
    back.lists["c"].append(1)
    assert dict(back.lists) == {"b": [7], "c": [1]}
    assert type(back.counts) is collections.Counter and back.counts["x"] == 3 and back.counts["none"] == 0
    assert type(back.order) is collections.OrderedDict and list(back.order) == ["z", "y"]
    alone: Any = restore(json.loads(json.dumps(to_data(collections.defaultdict(int, {"k": 1})))))
    assert type(alone) is collections.defaultdict and alone["other"] == 0  # no fresh object: int by name
