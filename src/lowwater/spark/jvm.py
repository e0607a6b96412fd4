"""Where lowwater's fetched JVM dependencies are (``pom.xml``, ``scripts/fetch_jars.sh``).

``./dev`` copies them into ``jars/`` at the top of the repository, one class path per folder:

``jars/spark``  Spark's Kafka connector and Delta Lake, for ``spark.jars``
``jars/kafka``  a Kafka broker (KRaft), run with ``java -cp``
``jars/hdfs``   Hadoop's MiniDFSCluster, run with ``java -cp``

``LOWWATER_JARS`` names another folder with the same layout (an installed lowwater has no
repository to look in).
"""

from __future__ import annotations

import os
from pathlib import Path

from lowwater.core.errors import LowwaterError

__all__ = ["jars_conf", "jars_dir", "jvm_classpath", "spark_jars"]

_REPO = Path(__file__).resolve().parents[3]
_HINT = "run ./dev setup (it fetches them with Maven, see pom.xml), or set LOWWATER_JARS"


def jars_dir() -> Path:
    """``$LOWWATER_JARS``, else ``jars/`` in the repository this module was loaded from."""
    explicit = os.environ.get("LOWWATER_JARS")
    return Path(explicit) if explicit else _REPO / "jars"


def spark_jars() -> list[str]:
    """The jar files for ``spark.jars`` (Kafka connector, Delta), or [] when not fetched. A
    ``LOWWATER_JARS`` that names a folder without them is an error: it was taken as "none", and a
    Kafka source then failed with Spark's "Failed to find data source: kafka"."""
    d = jars_dir() / "spark"
    found = sorted(str(p) for p in d.glob("*.jar")) if d.is_dir() else []
    explicit = os.environ.get("LOWWATER_JARS")
    if explicit and not found:
        raise LowwaterError(f"LOWWATER_JARS={explicit} has no spark/*.jar (looked in {d}): point it at the jars/ "
                            f"folder ./dev setup fills, or unset it")
    return found


def jvm_classpath(kind: str) -> str:
    """``jars/<kind>/*`` as a ``java -cp`` argument; raises if that folder has no jars."""
    d = jars_dir() / kind
    if not d.is_dir() or not any(d.glob("*.jar")):
        raise LowwaterError(f"no {kind} jars in {d}: {_HINT}")
    return str(d / "*")


def jars_conf(jars: list[str]) -> dict[str, str]:
    """Spark settings that the given jars need: Delta's SQL extension and catalog when
    ``delta-spark`` is among them (Delta refuses some operations without them)."""
    if any(os.path.basename(j).startswith("delta-spark_") for j in jars):
        return {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
    return {}
