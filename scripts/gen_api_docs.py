"""Write docs/api.md from the public names (``__all__``) and their docstrings.

    .venv/bin/python scripts/gen_api_docs.py          # rewrite docs/api.md
    .venv/bin/python scripts/gen_api_docs.py --check  # exit 1 if it is stale
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

MODULES = [
    "lowwater.api",
    "lowwater.core.time",
    "lowwater.core.clock",
    "lowwater.core.errors",
    "lowwater.core.time_characteristic",
    "lowwater.core.watermarks",
    "lowwater.core.windows",
    "lowwater.core.process",
    "lowwater.runtime",
    "lowwater.io",
    "lowwater.spark.engine",
    "lowwater.spark.sources",
    "lowwater.spark.sinks",
    "lowwater.spark.session",
    "lowwater.observe",
]
OUT = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _summary(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def _signature(name: str, obj: object) -> str:
    try:
        sig = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return name
    return f"{name}{sig}" if len(sig) < 140 else f"{name}(...)"


def render() -> str:
    lines = ["# API reference", "",
             "Generated from the docstrings by `scripts/gen_api_docs.py`; the test suite checks it is current.", ""]
    for mod_name in MODULES:
        mod = importlib.import_module(mod_name)
        lines += [f"## `{mod_name}`", "", _summary(mod), ""]
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
            head = _signature(name, obj) if kind != "value" else name
            lines.append(f"- **`{head}`** ({kind}): {_summary(obj) if kind != 'value' else ''}".rstrip(": "))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if OUT.exists() and OUT.read_text() == text else 1)
    OUT.write_text(text)
