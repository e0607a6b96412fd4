#!/usr/bin/env bash
# Build lowwater's own JVM code (jvm/lowwater/src) into jars/spark/lowwater-jvm.jar, which
# spark.jars hands to the driver and the executors with the other jars of jars/spark.
# Compiled with javac against pyspark's own jars (no download): the classes use Spark's Java
# UDF interface and the Jackson that Spark ships. Run by scripts/fetch_jars.sh; does nothing
# while the jar is newer than its sources and was built against the pyspark installed now
# (jars/lowwater-jvm.pyspark names that pyspark's version: an upgrade builds the jar again).
# Needs a JDK's javac (Debian: openjdk-17-jdk-headless); without one, it says so and
# KafkaShapedSource checks values in Spark SQL, about 3x slower.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
say() { printf '[jars] %s\n' "$*" >&2; }
out="jars/spark/lowwater-jvm.jar"
stamp="jars/lowwater-jvm.pyspark"  # beside jars/spark, whose every file is handed to spark.jars
sources=(jvm/lowwater/src/dev/lowwater/*.java)
python="${LOWWATER_PYTHON:-python3}"
pyspark="$("$python" -c 'import os, pyspark; print(pyspark.__version__, os.path.dirname(pyspark.__file__))')"
stale=0
[ -f "$out" ] || stale=1
for s in "${sources[@]}"; do [ "$s" -nt "$out" ] && stale=1; done
[ "$(cat "$stamp" 2>/dev/null)" = "${pyspark%% *}" ] || stale=1
[ "$stale" = 1 ] || exit 0
if ! command -v javac >/dev/null 2>&1; then
  say "no javac (install openjdk-17-jdk-headless): $out is not built, and KafkaShapedSource checks values in Spark SQL"
  exit 0
fi
pyjars="${pyspark#* }/jars"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
javac --release 17 -Xlint:all,-path -Werror -cp "$pyjars/*" -d "$tmp/classes" "${sources[@]}"
jar --create --file "$tmp/lowwater-jvm.jar" -C "$tmp/classes" .
mkdir -p jars/spark
mv "$tmp/lowwater-jvm.jar" "$out"
printf '%s\n' "${pyspark%% *}" > "$stamp"
say "built $out from jvm/lowwater/src against pyspark ${pyspark%% *}"
