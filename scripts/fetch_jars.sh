#!/usr/bin/env bash
# Fetch lowwater's pinned JVM dependencies (pom.xml) into jars/{spark,kafka,hdfs}/.
# Run by ./dev (setup, test, demo). Cached twice: Maven keeps what it downloads in ~/.m2, and
# this script does nothing while jars/.stamp matches the poms' hash. Needs Maven and Java 17
# (Debian: apt-get install maven openjdk-17-jre-headless); reaches Maven Central.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
say() { printf '[jars] %s\n' "$*" >&2; }
want="$(cat pom.xml jvm/*/pom.xml | sha256sum | cut -c1-16)"
if [ "$(cat jars/.stamp 2>/dev/null)" = "$want" ] && [ -d jars/spark ] && [ -d jars/kafka ] && [ -d jars/hdfs ]; then
  exec bash scripts/build_jar.sh  # lowwater's own jar, when its sources changed
fi
command -v mvn >/dev/null 2>&1 || { say "Maven is missing: apt-get install maven (or put mvn on PATH)"; exit 1; }
say "fetching pinned JVM dependencies (pom.xml) into jars/ (Maven caches them in ~/.m2)"
start=$(date +%s)
rm -rf jars.tmp
mvn -B -q -Djars.dir="$here/jars.tmp" dependency:copy-dependencies >&2
# Spark's side must not shadow pyspark's own jars with a second version of the same artifact.
pyjars="$(python3 - <<'PY' 2>/dev/null || true
import importlib.util, os
spec = importlib.util.find_spec("pyspark")
print(os.path.join(os.path.dirname(spec.origin), "jars") if spec and spec.origin else "")
PY
)"
if [ -n "${LOWWATER_PYTHON:-}" ]; then
  pyjars="$("$LOWWATER_PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
fi
if [ -n "$pyjars" ] && [ -d "$pyjars" ]; then
  for j in jars.tmp/spark/*.jar; do
    a="$(basename "$j" .jar)"; a="${a%-*}"
    if ls "$pyjars" | grep -q "^$a-[0-9]"; then
      say "jars/spark/$(basename "$j") duplicates pyspark's $(ls "$pyjars" | grep "^$a-[0-9]" | head -1): exclude it in jvm/spark/pom.xml"
      exit 1
    fi
  done
fi
rm -rf jars && mv jars.tmp jars
echo "$want" > jars/.stamp
say "jars/: $(du -sh jars | cut -f1) ($(du -sh jars/spark | cut -f1) spark, $(du -sh jars/kafka | cut -f1) kafka, $(du -sh jars/hdfs | cut -f1) hdfs) in $(( $(date +%s) - start )) s"
bash scripts/build_jar.sh
