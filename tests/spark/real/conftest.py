"""Real servers for the Spark tests, each started at most once per test session, on first use:
a Kafka broker (``kafka``), an HDFS MiniDFSCluster (``hdfs``) and an S3 API server (``s3``).
They fail, never skip, when their jars or packages are missing (``./dev setup`` fetches them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.hdfs_server import HdfsCluster, hdfs_server
from tests.kafka_server import KafkaBroker, kafka_server
from tests.s3_server import S3Server, s3_server


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


@pytest.fixture(scope="session")
def s3(spark: Any) -> Iterator[S3Server]:
    """An S3 API server with one bucket, which the test session's Spark reads and writes through
    S3A (``s3a://lowwater-tests/...``): its settings are the bucket's own, set on the session's
    Hadoop configuration for the session's life."""
    try:
        with s3_server() as server:
            conf = spark._jsc.hadoopConfiguration()
            for key, value in server.hadoop_settings().items():
                conf.set(key, value)
            try:
                yield server
            finally:
                for key in server.hadoop_settings():
                    conf.unset(key)
    except Exception as e:
        if isinstance(e, pytest.fail.Exception):
            raise
        pytest.fail(f"could not start an S3 server for the tests: {e}")
