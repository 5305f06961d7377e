"""The wheel: one top-level package, ``reactive_streams``, usable beside a user's own
``adapters/`` and ``spark/`` packages."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_SCRIPT = """\
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import adapters  # the user's own packages, named like folders of this repository
import spark

from reactive_streams import Publisher, publish_on
from reactive_streams.adapters.iterables import from_iterable, to_iterator


def numbers() -> Iterator[int]:
    yield from range(1_000)


def main() -> None:
    with ThreadPoolExecutor(1) as pool:
        source: Publisher[int] = publish_on(from_iterable(numbers()), pool, prefetch=16)
        with to_iterator(source, prefetch=8) as it:
            total = sum(it)
    print(adapters.OWN, spark.OWN, total)


main()
"""


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from this checkout without network (setuptools is in dev)."""
    out = tmp_path_factory.mktemp("wheel")
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        out,
        ROOT,
        cwd=out,
    )
    (built,) = out.glob("reactive_streams_py-*.whl")
    return built


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    """Every file of the wheel is under reactive_streams/ or its dist-info, with py.typed."""
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"reactive_streams"}
    for package in ("reactive_streams", "reactive_streams/adapters", "reactive_streams/spark"):
        assert f"{package}/py.typed" in names
    assert "reactive_streams/tck/__init__.py" in names
    assert "reactive_streams/testing.py" in names


def test_a_user_project_with_its_own_adapters_and_spark_runs_a_pipeline(
    wheel: Path, tmp_path: Path
) -> None:
    """Installed (not editable) in a fresh venv, the wheel serves a project whose own
    ``adapters`` and ``spark`` packages shadow nothing of ours; mypy --strict accepts the
    user's script against the installed package."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        "--no-deps",
        "--no-index",
        wheel,
        cwd=tmp_path,
    )
    project = tmp_path / "project"
    for own in ("adapters", "spark"):
        (project / own).mkdir(parents=True)
        (project / own / "__init__.py").write_text(f"OWN = {own!r}\n")
    (project / "main.py").write_text(USER_SCRIPT)

    result = run(python, "main.py", cwd=project)
    assert result.stdout.split() == ["adapters", "spark", str(sum(range(1_000)))]

    pytest.importorskip("mypy")
    checked = run(
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--python-executable",
        python,
        "--cache-dir",
        tmp_path / "mypy-cache",
        "main.py",
        cwd=project,
    )
    assert "Success" in checked.stdout
