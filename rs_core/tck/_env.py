"""The TCK's environment: timeouts, the failure type, rule metadata and a conflict detector.

The test doubles every verification drives are in ``_manual.py``. The test thread is the only
one that waits, always on a condition with a deadline (``TestEnvironment.default_timeout``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import unittest
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

__all__ = [
    "UNTESTED",
    "ConflictDetector",
    "TCKFailure",
    "TestEnvironment",
    "rule",
    "skip",
]

F = TypeVar("F", bound=Callable[..., Any])

KINDS = ("required", "optional", "stochastic", "untested")

UNTESTED = "untested: the official TCK has no way to verify this rule"
"""The skip reason of a rule the official TCK cannot verify."""


class TCKFailure(AssertionError):
    """A TCK test failed; the message starts with the rule it checks (``"§1.1: ..."``)."""


def rule(rule_id: str, kind: str = "required") -> Callable[[F], F]:
    """Attach the rule a test method checks (``"1.1"``, or ``"setup"`` / ``"config"``) and its
    kind (required / optional / stochastic / untested) as the attributes ``rule`` and ``kind``,
    which ``python -m compat_matrix`` reads."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")

    def mark(fn: F) -> F:
        fn.rule = rule_id  # type: ignore[attr-defined]
        fn.kind = kind  # type: ignore[attr-defined]
        return fn

    return mark


def skip(reason: str) -> unittest.SkipTest:
    """The exception a TCK test raises to skip (pytest and compat_matrix both honour it)."""
    return unittest.SkipTest(reason)


def _env_ms(name: str, default: int) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default / 1000.0
    try:
        ms = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number of milliseconds, got {value!r}") from None
    if ms < 0:
        raise ValueError(f"{name} must not be negative, got {ms}")
    return ms / 1000.0


def _ms(name: str, given: int | None, variable: str, default: int) -> float:
    if given is None:
        return _env_ms(variable, default)
    if given < 0:
        raise ValueError(f"{name} must not be negative, got {given}")
    return given / 1000.0


class TestEnvironment:
    """Timeouts for the TCK, each given in milliseconds by argument or environment variable.

    Args:
        default_timeout_ms: how long to wait for an expected signal
            (``RS_TCK_DEFAULT_TIMEOUT_MS``, default 1000).
        no_signals_timeout_ms: how long to watch for a signal that must not come
            (``RS_TCK_NO_SIGNALS_TIMEOUT_MS``, default 100).
        gc_timeout_ms: how long a publisher may take to drop a cancelled subscriber, §3.13
            (``RS_TCK_GC_TIMEOUT_MS``, default 300).
        poll_timeout_ms: how often a waiting test re-checks its condition
            (``RS_TCK_POLL_TIMEOUT_MS``, default 10).

    Attributes ``default_timeout``, ``no_signals_timeout``, ``gc_timeout`` and
    ``poll_timeout`` hold the same values in seconds. Raise them (by argument in ``env()``,
    or by environment variable for a whole run) to verify a slow publisher such as Spark.
    """

    __test__ = False  # not a pytest test class

    _loop: ClassVar[asyncio.AbstractEventLoop | None] = None
    _loop_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        default_timeout_ms: int | None = None,
        no_signals_timeout_ms: int | None = None,
        gc_timeout_ms: int | None = None,
        poll_timeout_ms: int | None = None,
    ) -> None:
        self.default_timeout = _ms(
            "default_timeout_ms", default_timeout_ms, "RS_TCK_DEFAULT_TIMEOUT_MS", 1000
        )
        self.no_signals_timeout = _ms(
            "no_signals_timeout_ms", no_signals_timeout_ms, "RS_TCK_NO_SIGNALS_TIMEOUT_MS", 100
        )
        self.gc_timeout = _ms("gc_timeout_ms", gc_timeout_ms, "RS_TCK_GC_TIMEOUT_MS", 300)
        self.poll_timeout = max(
            _ms("poll_timeout_ms", poll_timeout_ms, "RS_TCK_POLL_TIMEOUT_MS", 10), 0.001
        )

    def __repr__(self) -> str:
        return (
            f"TestEnvironment(default_timeout_ms={self.default_timeout * 1000:g}, "
            f"no_signals_timeout_ms={self.no_signals_timeout * 1000:g}, "
            f"gc_timeout_ms={self.gc_timeout * 1000:g}, "
            f"poll_timeout_ms={self.poll_timeout * 1000:g})"
        )

    @classmethod
    def event_loop(cls) -> asyncio.AbstractEventLoop:
        """A shared asyncio loop running on a daemon helper thread (started on first use),
        for publishers and subscribers that live on a loop. Never closed: it serves the
        whole test run."""
        with cls._loop_lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="rs-tck-loop", daemon=True)
                thread.start()
                cls._loop = loop  # under _loop_lock
            return cls._loop

    def wait_for(
        self, cond: threading.Condition, predicate: Callable[[], bool], timeout: float
    ) -> bool:
        """Wait on ``cond`` (held by the caller) until ``predicate()`` or ``timeout`` seconds;
        re-checks every ``poll_timeout``. Returns the predicate's last value."""
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return predicate()
            cond.wait(min(left, self.poll_timeout))
        return True


class ConflictDetector:
    """Notices a signal that begins on one thread while another thread is still inside a
    signal to the same subscriber (§1.3).

    Nesting on one thread is not a conflict: a synchronous publisher may emit from inside a
    ``request()`` that the subscriber made from ``on_next`` (§3.2); §3.3 bounds that depth.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside: dict[int, list[str]] = {}

    def enter(self, signal: str) -> str | None:
        """Record that ``signal`` starts on this thread; return a description of the
        conflict if another thread is inside a signal, else None."""
        me = threading.get_ident()
        with self._lock:
            conflict = None
            for thread, signals in self._inside.items():
                if thread != me and signals:
                    conflict = (
                        f"{signal} began on thread {me} while {signals[-1]} was still running "
                        f"on thread {thread}"
                    )
                    break
            self._inside.setdefault(me, []).append(signal)  # under _lock
            return conflict

    def leave(self) -> None:
        me = threading.get_ident()
        with self._lock:
            signals = self._inside.get(me)
            if signals:
                signals.pop()  # under _lock
                if not signals:
                    del self._inside[me]
