"""The package's modules import one another at the top only: a function-level import of a sibling
hides a cycle (and fails late, inside a caller's loop, if the sibling cannot load)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ringcast"


def test_no_module_imports_a_sibling_inside_a_function():
    late = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.level > 0:
                        late.append(f"{path.name}:{inner.lineno} from {'.' * inner.level}{inner.module or ''}")
    assert late == []


def test_each_module_imports_first_in_a_fresh_interpreter():
    for path in sorted(PACKAGE.glob("*.py")):
        name = "ringcast" if path.stem == "__init__" else f"ringcast.{path.stem}"
        run = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                             env={"PYTHONPATH": str(PACKAGE.parent)}, timeout=60)
        assert run.returncode == 0, f"import {name}: {run.stderr}"
