"""``from_dataframe``'s element types reach mypy: in this repository (tests/typing/spark_usage.py
under ``mypy --strict``) and in a user's project (a script checked outside the repository,
with no mypy config). About 5-10 s each, cold cache."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_USER_SCRIPT = """\
from pyspark.sql import DataFrame
from reactive_streams import Subscriber
from reactive_streams.spark import from_dataframe

def f(df: DataFrame, counts: Subscriber[int]) -> None:
    reveal_type(from_dataframe(df))
    reveal_type(from_dataframe(df, mode="rows"))
    reveal_type(from_dataframe(df, mode="arrow"))
    from_dataframe(df, mode="rows").subscribe(counts)
"""


def _mypy(cwd: Path, cache: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), target],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _has_pyarrow_stubs() -> bool:
    try:
        importlib.metadata.distribution("pyarrow-stubs")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(autouse=True)
def _needs_mypy_and_spark() -> None:
    pytest.importorskip("mypy")
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")


def test_spark_usage_passes_mypy_strict(tmp_path: Path) -> None:
    """tests/typing/spark_usage.py is accepted, with its assert_type lines (Row for rows
    mode, RecordBatch for arrow mode), and each marked mistake is rejected."""
    result = _mypy(ROOT, tmp_path / "mypy-cache", "tests/typing/spark_usage.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_users_project_sees_rows_and_record_batches(tmp_path: Path) -> None:
    """mypy in a project of its own: rows mode is Publisher[Row] and a Subscriber[int] is
    refused; arrow mode is Publisher[RecordBatch] with pyarrow-stubs installed, Publisher[Any]
    without (pyarrow ships no types)."""
    (tmp_path / "user.py").write_text(_USER_SCRIPT)
    result = _mypy(tmp_path, tmp_path / "mypy-cache", "user.py")
    out = result.stdout + result.stderr
    revealed = re.findall(r'Revealed type is "([^"]+)"', out)
    row = "reactive_streams.api.Publisher[pyspark.sql.types.Row]"
    assert revealed[:2] == [row, row], out
    if _has_pyarrow_stubs():
        assert re.fullmatch(
            r"reactive_streams\.api\.Publisher\[pyarrow\..*RecordBatch\]", revealed[2]
        ), out
    else:
        assert revealed[2] == "reactive_streams.api.Publisher[Any]", out
    assert 'incompatible type "Subscriber[int]"; expected "Subscriber[Row]"' in out, out
    assert out.count("error:") == 1, out
