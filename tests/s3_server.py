"""A throwaway, real S3 API server for tests: moto's server (``python -m moto.server``), S3 only.

    with s3_server() as s3:
        s3.endpoint            # "http://127.0.0.1:<free port>"
        s3.hadoop_settings()   # the fs.s3a.* settings that point a bucket at it

S3A (hadoop-aws, fetched by ``./dev`` into ``jars/spark``) speaks to it over HTTP as to AWS:
path-style requests, fixed test credentials, no TLS. The server keeps its objects in memory
and stops at the end. :meth:`S3Server.hadoop_settings` scopes every setting to the one bucket
(``fs.s3a.bucket.<bucket>.*``), so nothing else a Spark session reads changes, and makes S3A
raise where it would only warn about a call an object store cannot honour (``hsync``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["S3Server", "s3_server"]

ACCESS_KEY, SECRET_KEY, REGION = "lowwater-test", "lowwater-test-secret", "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    log: str
    """The server's log: a line per request (:meth:`requests`)."""

    @property
    def uri(self) -> str:
        """The bucket as an ``s3a:`` URI."""
        return f"s3a://{self.bucket}"

    def hadoop_settings(self) -> dict[str, str]:
        """Hadoop settings (``spark.hadoop.`` without its prefix) that point S3A at this server
        for :attr:`bucket` only."""
        scope = f"fs.s3a.bucket.{self.bucket}."
        return {scope + k: v for k, v in {
            "endpoint": self.endpoint, "endpoint.region": REGION, "path.style.access": "true",
            "connection.ssl.enabled": "false", "access.key": ACCESS_KEY, "secret.key": SECRET_KEY,
            "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            # an hsync on an S3A stream raises, where S3A's default logs a warning on each call
            "downgrade.syncable.exceptions": "false",
        }.items()}

    def requests(self) -> list[str]:
        """Every request the server has answered so far, as ``"METHOD /path?query"`` (URL-decoded)."""
        from urllib.parse import unquote

        with open(self.log) as f:
            return [unquote(m.group(1)) for m in (re.search(r'"([A-Z]+ \S+) HTTP', line) for line in f) if m]

    def keys(self, prefix: str = "") -> list[str]:
        """The bucket's object keys under ``prefix``, read with boto3, not through Hadoop."""
        client = _client(self.endpoint)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def _client(endpoint: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name=REGION)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def s3_server(bucket: str = "lowwater-tests", timeout_s: float = 60.0) -> Iterator[S3Server]:
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix="lowwater-s3-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto's S3 server exited with {proc.returncode}: "
                                   f"{open(log.name).read()[-3000:]}")  # noqa: SIM115
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not listen within {timeout_s} s "
                                       f"(log: {log.name})") from None
                time.sleep(0.2)
        server = S3Server(f"http://127.0.0.1:{port}", bucket, log.name)
        _client(server.endpoint).create_bucket(Bucket=bucket)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        os.unlink(log.name)
