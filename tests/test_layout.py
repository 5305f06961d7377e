"""The shape of the library's code: modules of one responsibility, short docstrings.

Limits from issue 19: a module of rs_core/, adapters/ or spark/ is at most 600 lines, a docstring
at most 20 before its ``Example:`` section (what, which rule, which thread; reasoning goes to
docs/; a runnable example is not counted).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("rs_core", "adapters", "spark")
MODULES = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
MAX_MODULE_LINES = 600
MAX_DOCSTRING_LINES = 20


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_module_has_at_most_600_lines(path: Path) -> None:
    """Split a module that grows past 600 lines by responsibility."""
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_docstring_has_at_most_20_lines(path: Path) -> None:
    """Docstrings say what, which rule, which thread; proofs and measurements go to docs/."""
    tree = ast.parse(path.read_text())
    long = []
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=True) or ""
            prose = doc.split("\nExample:\n")[0].split("\nExamples:\n")[0]
            if len(prose.splitlines()) > MAX_DOCSTRING_LINES:
                long.append(f"{getattr(node, 'name', '<module>')}: {len(prose.splitlines())} lines")
    assert not long, f"{_name(path)}: " + ", ".join(long)


def test_the_limits_see_the_library() -> None:
    """The checks above run over the library's modules (a moved folder would empty them)."""
    names = {_name(p) for p in MODULES}
    assert {"rs_core/_drain.py", "adapters/rx.py", "spark/dataframe.py"} <= names
