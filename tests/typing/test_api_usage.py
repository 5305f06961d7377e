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


def test_the_typed_pipeline_example_runs_and_passes_mypy_strict(tmp_path: Path) -> None:
    """docs/examples/typed_pipeline.py (pipe, two rx_processor stages, to_iterator with a
    timeout, retry of a source that fails twice) runs, prints what it says, and is accepted
    by mypy --strict as a user's script."""
    pytest.importorskip("mypy")
    pytest.importorskip("reactivex")
    example = ROOT / "docs" / "examples" / "typed_pipeline.py"
    run = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "pipe: ['#0', '#2', '#4', '#6', '#8']" in run.stdout
    assert "retry: [0, 1, 2, 3, 4]" in run.stdout
    assert "timeout: [1, 2] | to_iterator(): no element or end within timeout=0.5 s" in run.stdout
    assert "generator closed: True" in run.stdout
    typed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            str(example),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr
