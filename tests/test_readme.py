"""Every Python snippet of the README runs as a user would paste it: in a fresh interpreter,
in an empty directory, against the installed package. A snippet that prints says what it
should print in a trailing comment, and the output is checked against it where it is exact.
The TCK snippet runs under pytest, as the README tells the user to run it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def _needs_spark(code: str) -> str | None:
    if "reactive_streams.spark" not in code:
        return None
    try:
        from reactive_streams.spark.local import java_problem
    except ImportError as exc:  # pyspark or pyarrow absent
        return f"pyspark/pyarrow not installed: {exc}"
    return java_problem()


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_the_readme_has_its_snippets() -> None:
    """The pattern finds the README's snippets (a changed fence would skip them all)."""
    assert len(SNIPPETS) >= 8


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_each_readme_snippet_runs(code: str, tmp_path: Path) -> None:
    """The snippet runs to completion (exit 0), or, for the TCK one, its tests pass."""
    missing = _needs_spark(code)
    if missing:
        pytest.skip(missing)
    if "PublisherVerification" in code:
        (tmp_path / "test_squares.py").write_text(code, encoding="utf-8")
        result = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_squares.py"], tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert re.search(r"\d+ passed", result.stdout), result.stdout
        return
    (tmp_path / "snippet.py").write_text(code, encoding="utf-8")
    result = _run(["snippet.py"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_first_pipeline_prints_what_it_says() -> None:
    """The first screen's pipeline prints the values its comment promises."""
    code = SNIPPETS[0]
    promised = re.search(r"#\s*([\d ]+);", code)
    assert promised is not None, "the first snippet's comment no longer names its output"
    result = _run(["-c", code], README.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == promised.group(1).split()
