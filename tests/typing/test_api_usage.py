"""The typed usage file type-checks under ``mypy --strict`` (about 1-2 s, cold cache)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_api_usage_passes_mypy_strict(tmp_path: Path) -> None:
    """tests/typing/api_usage.py is accepted by mypy --strict, and every mistake in it is
    rejected (warn_unused_ignores makes an accepted mistake an error)."""
    pytest.importorskip("mypy")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "tests/typing/api_usage.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
