"""docs/ stays true: the API reference matches the code, and the README's commands exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

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
