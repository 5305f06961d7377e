"""The rx columns again in a second interpreter, with another reactivex, merged into one matrix.

``python -m compat_matrix`` runs everything in its own interpreter, then the case modules in
``VARIED_MODULES`` and the grid cells bridging ``VARIED`` in a second one (by default
``.venv-rx6/bin/python``, made by ``make test-rx6``: reactivex 6.x, no aioreactive, no pyspark)
through ``python -m compat_matrix --no-also --only rx --json PATH``. Every such result is
labelled with the reactivex version it ran under, e.g. ``from_observable(block) [reactivex 6.1.0]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from compat_matrix._tck_run import CaseResult
from compat_matrix.grid import Cell

__all__ = [
    "DEFAULT_INTERPRETER",
    "VARIED",
    "VARIED_MODULES",
    "SecondRun",
    "choose_interpreter",
    "env_label",
    "interleave",
    "merge",
    "parse_payload",
    "run_second",
    "tag",
]

VARIED = "reactivex"  # the library whose versions the second environment covers
VARIED_MODULES = ("rx", "pipe")  # the case modules that depend on it (pipe: rx_processor stages)
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INTERPRETER = ROOT / ".venv-rx6" / "bin" / "python"
TIMEOUT_S = 1800

T = TypeVar("T")


@dataclass
class SecondRun:
    """What the second interpreter gave; ``status`` is "ran", "absent", "off" or "error"."""

    interpreter: str
    status: str
    versions: dict[str, str] = field(default_factory=dict)
    results: list[CaseResult] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    detail: str = ""

    def describe(self) -> str:
        """One sentence about the second environment, for the console and the markdown."""
        where = f"`{self.interpreter}`"
        if self.status == "ran":
            found = ", ".join(f"{k} {v}" for k, v in self.versions.items())
            return (
                f"Second environment {where} ({found}) ran the {VARIED} columns and grid "
                f"cells again, marked [{env_label(self.versions)}]."
            )
        if self.status == "absent":
            return (
                f"Second environment {where} not found (`make test-rx6` creates it): "
                f"the {VARIED} columns ran under one {VARIED} version only."
            )
        if self.status == "off":
            return f"Second environment not run: {self.detail}."
        return f"Second environment {where} FAILED: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        """Where and what the second environment was (its results are in the main lists)."""
        return {
            "interpreter": self.interpreter,
            "status": self.status,
            "versions": self.versions,
            "detail": self.detail,
        }


def env_label(versions: dict[str, str]) -> str:
    """The label for results that depend on ``VARIED``, e.g. ``reactivex 6.1.0``."""
    return f"{VARIED} {versions.get(VARIED, 'not installed')}"


def tag(
    results: Sequence[CaseResult], cells: Sequence[Cell], label: str
) -> tuple[list[CaseResult], list[Cell]]:
    """Copies of the results and cells, those depending on ``VARIED`` labelled ``label``."""
    return (
        [replace(r, env=label) if r.module in VARIED_MODULES else r for r in results],
        [replace(c, env=label) if VARIED in c.libraries else c for c in cells],
    )


def interleave(primary: Sequence[T], extra: Sequence[T], key: Callable[[T], Hashable]) -> list[T]:
    """``primary`` with each ``extra`` item after the last item of its key (or at the end)."""
    out = list(primary)
    for item in extra:
        same = [i for i, other in enumerate(out) if key(other) == key(item)]
        out.insert(same[-1] + 1 if same else len(out), item)
    return out


def merge(
    results: Sequence[CaseResult], cells: Sequence[Cell], second: SecondRun
) -> tuple[list[CaseResult], list[Cell]]:
    """The main run's results and cells, with the second run's placed beside their twins."""
    return (
        interleave(results, second.results, lambda r: (r.column, r.verification)),
        interleave(cells, second.cells, lambda c: (c.source, c.sink, c.via)),
    )


def choose_interpreter(option: str | None) -> Path | None:
    """``--also-python``'s path, else the default one, unless that is this very environment."""
    if option:
        return Path(option).absolute()  # not resolve(): a venv's python is a symlink
    if Path(sys.prefix).resolve() == DEFAULT_INTERPRETER.parent.parent.resolve():
        return None
    return DEFAULT_INTERPRETER


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def parse_payload(payload: dict[str, Any], interpreter: str) -> SecondRun:
    """A second run's ``--json`` payload as a ``SecondRun``."""
    return SecondRun(
        interpreter,
        "ran",
        dict(payload["versions"]),
        [CaseResult.from_json(r) for r in payload["tck"]],
        [Cell.from_json(c) for c in payload["grid"]],
    )


def run_second(interpreter: Path, modules: Sequence[str], grid_elements: int | None) -> SecondRun:
    """Run ``modules`` (and the ``VARIED`` grid cells unless ``grid_elements`` is None) there."""
    shown = _shown(interpreter)
    if not interpreter.exists():
        return SecondRun(shown, "absent")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "second.json"
        cmd = [str(interpreter), "-m", "compat_matrix", "--no-also", "--only", ",".join(modules)]
        cmd += ["--json", str(out)]
        if grid_elements is None:
            cmd.append("--no-grid")
        else:
            cmd += ["--grid-library", VARIED, "--no-spark-grid"]
            cmd += ["--grid-elements", str(grid_elements)]
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SecondRun(shown, "error", detail=f"{type(exc).__name__}: {exc}")
        if not out.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return SecondRun(shown, "error", detail=f"exit {proc.returncode}, no results: {last}")
        return _checked_second(parse_payload(json.loads(out.read_text("utf-8")), shown))


def _checked_second(second: SecondRun) -> SecondRun:
    """The second environment exists to run the ``VARIED`` columns: one where they could not
    run (the library missing there) failed, it did not pass. (An adapter of ours that would
    not import fails that run itself; a grid cell whose other side's library is missing
    there, such as aioreactive's, is unavailable, as anywhere.)"""
    missing = [r.label for r in second.results if r.unavailable]
    if VARIED not in second.versions or second.versions[VARIED] == "not installed":
        missing.insert(0, f"{VARIED} is not installed there")
    if not missing:
        return second
    return replace(second, status="error", detail="did not run: " + "; ".join(missing))
