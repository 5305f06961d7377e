"""The TCK's environment: every official test exists under its Python name with its rule and
kind, the timeouts and the shared event loop, the rule decorator and the conflict detector.
(Skips of a test a publisher cannot serve: test_tck_publisher.py.)"""

from __future__ import annotations

import asyncio
import csv
import threading
import unittest
from pathlib import Path
from typing import Any

import pytest

from reactive_streams.tck import (
    ConflictDetector,
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TCKFailure,
    TestEnvironment,
    rule,
)

_TSV = Path(__file__).with_name("official_tck_tests.tsv")
_CLASSES: dict[str, type[Any]] = {
    "publisher": PublisherVerification,
    "subscriber_whitebox": SubscriberWhiteboxVerification,
    "subscriber_blackbox": SubscriberBlackboxVerification,
    "processor": IdentityProcessorVerification,
}


# -- every official test, under its Python name, with its rule and kind -------------------------


def _rows() -> list[dict[str, str]]:
    with _TSV.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['verification']}-{r['method_name']}")
def test_every_official_test_exists_with_its_rule_and_kind(row: dict[str, str]) -> None:
    """Each official test is a method of its verification, carrying the TSV's rule and kind."""
    method = getattr(_CLASSES[row["verification"]], row["python_test_name"], None)
    assert method is not None, row["python_test_name"]
    assert (method.rule, method.kind) == (row["rule_id"], row["kind"])
    assert method.__doc__, "every TCK test says what it checks"


@pytest.mark.parametrize("verification", sorted(_CLASSES))
def test_no_test_method_outside_the_official_list(verification: str) -> None:
    """A verification has no test_* method the official TCK does not have."""
    names = {r["python_test_name"] for r in _rows() if r["verification"] == verification}
    methods = {n for n in dir(_CLASSES[verification]) if n.startswith("test_")}
    assert methods == names


@pytest.mark.parametrize(
    "row", [r for r in _rows() if r["kind"] == "untested"], ids=lambda r: r["python_test_name"]
)
def test_untested_tests_skip_saying_so(row: dict[str, str]) -> None:
    """An untested rule's method skips with a reason starting with "untested"."""
    verification = _CLASSES[row["verification"]]()
    with pytest.raises(unittest.SkipTest, match="^untested"):
        getattr(verification, row["python_test_name"])()


# -- timeouts and the shared event loop ---------------------------------------------------------


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without arguments or variables: 1000 ms, 100 ms, 300 ms, 10 ms."""
    for name in ("DEFAULT", "NO_SIGNALS", "GC", "POLL"):
        monkeypatch.delenv(f"RS_TCK_{name}_TIMEOUT_MS", raising=False)
    env = TestEnvironment()
    assert (env.default_timeout, env.no_signals_timeout, env.gc_timeout, env.poll_timeout) == (
        1.0,
        0.1,
        0.3,
        0.01,
    )


def test_environment_variables_and_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """RS_TCK_*_MS variables set the timeouts; constructor arguments win over them."""
    monkeypatch.setenv("RS_TCK_DEFAULT_TIMEOUT_MS", "20000")
    monkeypatch.setenv("RS_TCK_NO_SIGNALS_TIMEOUT_MS", "250")
    monkeypatch.setenv("RS_TCK_GC_TIMEOUT_MS", "5000")
    monkeypatch.setenv("RS_TCK_POLL_TIMEOUT_MS", "50")
    env = TestEnvironment()
    assert (env.default_timeout, env.no_signals_timeout, env.gc_timeout, env.poll_timeout) == (
        20.0,
        0.25,
        5.0,
        0.05,
    )
    assert TestEnvironment(default_timeout_ms=300).default_timeout == 0.3


def test_environment_rejects_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed variable or a negative argument is an error naming it."""
    monkeypatch.setenv("RS_TCK_GC_TIMEOUT_MS", "soon")
    with pytest.raises(ValueError, match="RS_TCK_GC_TIMEOUT_MS"):
        TestEnvironment()
    monkeypatch.delenv("RS_TCK_GC_TIMEOUT_MS")
    with pytest.raises(ValueError, match="default_timeout_ms"):
        TestEnvironment(default_timeout_ms=-1)


def test_event_loop_is_shared_and_runs_on_a_daemon_thread() -> None:
    """env.event_loop() is one running loop on a daemon helper thread."""
    loop = TestEnvironment().event_loop()
    assert loop is TestEnvironment(default_timeout_ms=5).event_loop()

    async def where() -> threading.Thread:
        return threading.current_thread()

    thread = asyncio.run_coroutine_threadsafe(where(), loop).result(timeout=5)
    assert thread.daemon and thread is not threading.current_thread()


# -- the conflict detector and the rule decorator -----------------------------------------------


def test_conflict_detector_flags_other_threads_only() -> None:
    """Nesting on one thread is fine; a signal from another thread meanwhile is a conflict."""
    detector = ConflictDetector()
    assert detector.enter("on_next") is None
    assert detector.enter("on_next") is None  # synchronous re-entry from request()
    seen: list[str | None] = []
    other = threading.Thread(target=lambda: seen.append(detector.enter("on_complete")))
    other.start()
    other.join()
    assert seen[0] is not None and "on_complete" in seen[0] and "on_next" in seen[0]
    detector.leave()
    detector.leave()
    fresh = ConflictDetector()
    fresh.enter("on_next")
    fresh.leave()
    later = threading.Thread(target=lambda: seen.append(fresh.enter("on_next")))
    later.start()
    later.join()
    assert seen[1] is None


def test_rule_decorator_and_failure_type() -> None:
    """rule() sets .rule and .kind and refuses unknown kinds; TCKFailure is an AssertionError."""

    @rule("3.9", "optional")
    def check() -> None:
        pass

    assert (check.rule, check.kind) == ("3.9", "optional")  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        rule("1.1", "sometimes")
    assert issubclass(TCKFailure, AssertionError)
