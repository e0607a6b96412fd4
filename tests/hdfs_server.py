"""A throwaway, real HDFS for tests: Hadoop's MiniDFSCluster (one NameNode, one DataNode).

    with hdfs_server() as hdfs:
        hdfs.uri  # "hdfs://127.0.0.1:<port>"

It runs ``org.apache.hadoop.test.MiniDFSClusterManager`` (hadoop-hdfs's test jar) from
``jars/hdfs`` (fetched by ``./dev`` from pom.xml; the Hadoop version is pyspark's) in its own
JVM with a 384 MB heap, formats a fresh file system in a temp dir, waits for the NameNode port
it reports, and at the end stops the JVM and removes the temp dir. Everything binds to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lowwater.spark.jvm import jvm_classpath

__all__ = ["HdfsCluster", "hdfs_server"]


@dataclass(frozen=True)
class HdfsCluster:
    uri: str
    namenode_port: int
    base_dir: str


@contextmanager
def hdfs_server(timeout_s: float = 180.0) -> Iterator[HdfsCluster]:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH: run ./dev setup")
    cp = jvm_classpath("hdfs")
    work = tempfile.mkdtemp(prefix="lowwater-hdfs-")
    details = os.path.join(work, "details.json")
    log_path = os.path.join(work, "minidfs.log")
    props = [
        f"hdfs.minidfs.basedir={work}/data",
        "dfs.namenode.rpc-bind-host=127.0.0.1",
        "dfs.namenode.http-address=127.0.0.1:0",
        "dfs.datanode.address=127.0.0.1:0",
        "dfs.datanode.http.address=127.0.0.1:0",
        "dfs.datanode.ipc.address=127.0.0.1:0",
        "dfs.permissions.enabled=false",
        "dfs.replication=1",
    ]
    argv = [java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
            "org.apache.hadoop.test.MiniDFSClusterManager", "-format", "-datanodes", "1",
            "-writeDetails", details]
    for p in props:
        argv += ["-D", p]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        port = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                with open(log_path) as f:
                    raise RuntimeError(f"MiniDFSCluster exited with {proc.returncode}: {f.read()[-3000:]}")
            if os.path.exists(details) and os.path.getsize(details) > 0:
                try:
                    port = int(json.load(open(details))["namenode_port"])  # noqa: SIM115
                    break
                except (ValueError, KeyError):
                    pass
            time.sleep(0.5)
        if port is None:
            raise RuntimeError(f"MiniDFSCluster did not start within {timeout_s} s (log: {log_path})")
        yield HdfsCluster(f"hdfs://127.0.0.1:{port}", port, work)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
