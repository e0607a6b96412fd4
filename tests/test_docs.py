"""docs/ stays true: the API reference matches the code, and the README's commands exist."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_is_generated_from_the_current_docstrings() -> None:
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "scripts" / "gen_api_docs.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (ROOT / "docs" / "api.md").read_text() == gen.render(), (
        "docs/api.md is stale: run .venv/bin/python scripts/gen_api_docs.py"
    )


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^(\./dev \w+)$", readme, flags=re.M)
    assert "./dev test" in commands and "./dev demo" in commands
    assert "./dev test" in (ROOT / ".ci" / "run").read_text()


def test_docs_links_resolve() -> None:
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_the_readme_quickstart_block_does_what_the_text_under_it_says(tmp_path: Path, monkeypatch: Any) -> None:
    """The README's first Python block, run as written on the example's log (the reference runtime in
    place of Spark), sends the one late event to the late output. Without ``records_per_batch=1``
    the log was one batch judged against a MIN watermark: the late 100 was summed into hour 0."""

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import quickstart
    finally:
        sys.path.remove(str(ROOT / "examples"))
    quickstart.write_example_log(tmp_path / "events")
    block = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)[0]
    assert "SparkRuntime(" in block and "# env.execute()" in block
    block = block.replace("SparkRuntime(", "# SparkRuntime(").replace("# env.execute()", "env.execute()")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {})
    import pyarrow.parquet as pq

    late = [r for f in sorted((tmp_path / "out" / "late").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert [(r["user"], r["amount"]) for r in late] == [("ann", 100)]
