"""Real servers for the Spark tests, each started at most once per test session, on first use:
a Kafka broker (``kafka``) and an HDFS MiniDFSCluster (``hdfs``). Both fail, never skip,
when their jars are missing (``./dev setup`` fetches them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hdfs_server import HdfsCluster, hdfs_server
from tests.kafka_server import KafkaBroker, kafka_server


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    try:
        with kafka_server() as broker:
            yield broker
    except Exception as e:
        if isinstance(e, pytest.fail.Exception):
            raise
        pytest.fail(f"could not start a Kafka broker for the tests: {e}")


@pytest.fixture(scope="session")
def hdfs() -> Iterator[HdfsCluster]:
    try:
        with hdfs_server() as cluster:
            yield cluster
    except Exception as e:
        if isinstance(e, pytest.fail.Exception):
            raise
        pytest.fail(f"could not start an HDFS MiniDFSCluster for the tests: {e}")
