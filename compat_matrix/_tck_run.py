"""Run the Python TCK over every registered adapter case and collect rule-by-rule results.

A case module is any ``compat_matrix/cases/<name>.py`` with
``CASES = [(column, Verification), ...]``.
A module whose optional library is not installed becomes a column marked unavailable, not a
crash; any other import error is a defect of ours, and is raised (the run fails).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import traceback
import unittest
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import compat_matrix.cases as cases_pkg

__all__ = [
    "CaseResult",
    "TestOutcome",
    "case_modules",
    "discover_cases",
    "optional_missing",
    "run_case",
]

OPTIONAL_LIBRARIES: Final = frozenset({"reactivex", "aioreactive", "pyspark", "pyarrow"})
"""The libraries an adapter may lack (the extras): a column over a missing one is unavailable."""


def optional_missing(exc: ImportError) -> str:
    """The optional library whose absence ``exc`` reports, else "" (a broken import of ours,
    which must fail the run, not pass for a missing library)."""
    root = (exc.name or "").split(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
    return root if root in OPTIONAL_LIBRARIES else ""


@dataclass
class TestOutcome:
    """One TCK test method's result on one adapter column."""

    test: str
    rule: str
    kind: str
    status: str  # "pass" | "fail" | "skip" | "error"
    detail: str = ""


@dataclass
class CaseResult:
    """All outcomes of one column (one adapter under one verification)."""

    column: str
    verification: str
    module: str
    outcomes: list[TestOutcome] = field(default_factory=list)
    unavailable: str = ""
    env: str = ""  # e.g. "reactivex 6.1.0": the library version the column ran under, if varied

    @property
    def label(self) -> str:
        """The column's name in the matrix, with the environment it ran under if any."""
        return f"{self.column} [{self.env}]" if self.env else self.column

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        """Rebuild a result from ``to_json()`` output (e.g. sent by another interpreter)."""
        outcomes = [TestOutcome(**o) for o in data.get("outcomes", [])]
        return cls(**{**data, "outcomes": outcomes})

    def counts(self) -> dict[str, int]:
        """How many outcomes have each status."""
        out = {"pass": 0, "fail": 0, "skip": 0, "error": 0}
        for o in self.outcomes:
            out[o.status] += 1
        return out

    def required_failures(self) -> list[TestOutcome]:
        """The outcomes that fail the run: a required or stochastic test that failed, and any
        error (the TCK turns an optional test's failure into a skip, so an error is a case
        that broke, or one that overrode a TCK test)."""
        return [
            o
            for o in self.outcomes
            if o.status == "error" or (o.status == "fail" and o.kind in ("required", "stochastic"))
        ]

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON-able data."""
        return asdict(self)


def case_modules() -> list[str]:
    """The names ``--only`` accepts: one per ``compat_matrix/cases`` module."""
    return sorted(m.name for m in pkgutil.iter_modules(cases_pkg.__path__) if m.name[0] != "_")


def discover_cases(
    only: set[str] | None = None,
) -> Iterator[tuple[str, str, type[Any] | None, str]]:
    """Yield ``(module, column, verification_class, unavailable_reason)`` for every case."""
    for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or (only and info.name not in only):
            continue
        name = f"{cases_pkg.__name__}.{info.name}"
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            if not optional_missing(exc):
                raise
            yield info.name, info.name, None, f"unavailable: {exc}"
            continue
        for column, verification in getattr(module, "CASES", []):
            yield info.name, column, verification, ""


def _test_methods(cls: type[Any]) -> list[tuple[str, Callable[..., Any]]]:
    return [
        (name, fn)
        for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name.startswith("test_")
    ]


def run_case(
    module: str, column: str, cls: type[Any], progress: Callable[[], None] | None = None
) -> CaseResult:
    """Run every test method of ``cls`` the way pytest would (setup/teardown included)."""
    result = CaseResult(column=column, verification=_base_name(cls), module=module)
    for name, fn in _test_methods(cls):
        rule = str(getattr(fn, "rule", "?"))
        kind = str(getattr(fn, "kind", "required"))
        # the matrix reports the TCK's tests
        if not fn.__module__.startswith("reactive_streams.tck"):
            result.outcomes.append(
                TestOutcome(
                    name,
                    rule,
                    kind,
                    "error",
                    f"{fn.__qualname__} replaces the TCK's test: a case may configure the "
                    "verification, never override its tests",
                )
            )
            if progress is not None:
                progress()
            continue
        instance = cls()
        status, detail = "pass", ""
        try:
            if hasattr(instance, "setup_method"):
                instance.setup_method(fn)
            try:
                getattr(instance, name)()
            finally:
                if hasattr(instance, "teardown_method"):
                    instance.teardown_method(fn)
        except unittest.SkipTest as exc:
            status, detail = "skip", str(exc)
        except AssertionError as exc:
            status, detail = "fail", str(exc) or repr(exc)
        except Exception as exc:
            status = "error"
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        except BaseException as exc:  # pytest.skip() / pytest.fail() in a user's case
            kind_of = type(exc).__name__
            if kind_of not in ("Skipped", "Failed"):
                raise  # KeyboardInterrupt, SystemExit: the run stops
            status = "skip" if kind_of == "Skipped" else "fail"
            detail = str(exc)
        result.outcomes.append(TestOutcome(name, rule, kind, status, detail[:500]))
        if progress is not None:
            progress()
    return result


def count_tests(cls: type[Any]) -> int:
    """How many test methods ``cls`` has."""
    return len(_test_methods(cls))


def _base_name(cls: type[Any]) -> str:
    for base in cls.__mro__:
        if base.__module__.startswith("reactive_streams.tck"):
            return base.__name__
    return cls.__name__
