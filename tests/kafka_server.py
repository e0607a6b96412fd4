"""A throwaway, real Kafka broker for tests (KRaft, no ZooKeeper), like pg_server.py for PostgreSQL.

    with kafka_server() as kafka:
        kafka.bootstrap_servers  # "127.0.0.1:<free port>"

It is :func:`lowwater.spark.kafka.local_broker`: ``kafka.Kafka`` from ``jars/kafka`` (fetched by
``./dev`` from pom.xml) with a 384 MB heap, a temporary log directory, stopped at the end.
Helpers produce with a real client (confluent-kafka) and make unique topic names.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from lowwater.spark.kafka import KafkaBroker, create_topic, local_broker

__all__ = ["KafkaBroker", "kafka_server", "new_topic", "produce"]

_names = itertools.count()


@contextmanager
def kafka_server() -> Iterator[KafkaBroker]:
    with local_broker(heap_mb=384) as broker:
        yield broker


def new_topic(broker: KafkaBroker, prefix: str, partitions: int) -> str:
    """Create a topic with a name no other test uses."""
    name = f"{prefix}-{os.getpid()}-{next(_names)}"
    create_topic(broker.bootstrap_servers, name, partitions)
    return name


def produce(broker: KafkaBroker, topic: str, records: Iterable[tuple[int, Any, int | None]],
            key: bytes | None = None) -> None:
    """Produce ``(partition, value, timestamp_ms)`` records in order and wait for every ack.

    ``value`` is a dict (sent as JSON), ``bytes`` (sent as is) or None (a null value).
    """
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "linger.ms": 0})
    errors: list[Any] = []
    for partition, value, ts in records:
        payload = value if value is None or isinstance(value, bytes) else json.dumps(value).encode()
        kw: dict[str, Any] = {"partition": partition, "on_delivery": lambda err, _m: err and errors.append(err)}
        if ts is not None:
            kw["timestamp"] = ts
        p.produce(topic, payload, key, **kw)
    left = p.flush(30)
    assert left == 0 and not errors, f"produce to {topic}: {left} unacknowledged, errors {errors}"
