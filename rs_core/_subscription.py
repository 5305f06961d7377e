"""Small pieces every publisher and subscriber shares: the empty subscription, the §1.9 and
§2.13 argument checks, the rejection path of ``subscribe``, and ``report_dropped``: the one
place where an error that cannot be signalled any more is reported (Reactor's onErrorDropped).
"""

from __future__ import annotations

import logging
import math
import numbers
import reprlib
import sys
import threading
from collections.abc import Callable
from typing import Any, Final, final

from reactive_streams.api import Subscriber, Subscription

__all__ = [
    "CANCELLED",
    "EMPTY_SUBSCRIPTION",
    "EmptySubscription",
    "OneShot",
    "cancel_quietly",
    "reject",
    "report_dropped",
    "require_element",
    "require_subscriber",
    "require_subscription",
    "start_daemon",
]

logger: Final = logging.getLogger("reactive_streams")


@final
class EmptySubscription:
    """A Subscription with nothing behind it: ``request`` and ``cancel`` do nothing.

    Given to a Subscriber that is rejected at ``subscribe`` time, just before ``on_error``
    (§1.9), and used as the ``CANCELLED`` marker by subscribers that drop their upstream.
    """

    __slots__ = ()

    def request(self, n: int) -> None:
        """Do nothing: there is nothing to produce."""

    def cancel(self) -> None:
        """Do nothing: there is nothing to stop."""

    def __repr__(self) -> str:
        return "EMPTY_SUBSCRIPTION"


EMPTY_SUBSCRIPTION: Final = EmptySubscription()
CANCELLED: Final[Subscription] = EmptySubscription()
"""Marker a subscriber stores in place of its upstream once it has cancelled or terminated."""


def cancel_quietly(subscription: Subscription) -> None:
    """Cancel ``subscription``; a ``cancel`` that raises (§3.15) is reported, not raised."""
    try:
        subscription.cancel()
    except Exception as exc:
        report_dropped(exc, rule="3.15", where="cancel() raised")


def start_daemon(target: Callable[..., object], *args: Any, name: str) -> bool:
    """Run ``target(*args)`` on a new daemon thread; False, without running it, when no
    thread can start now. From a finalizer at interpreter exit (an iterator never closed), a
    thread started on 3.11 never runs and ``start()`` waits for it for ever; 3.12 and later
    raise ``RuntimeError`` then, as when the system refuses another thread. The caller
    decides what not running ``target`` means (the process may be ending anyway)."""
    if sys.is_finalizing():
        return False
    try:
        threading.Thread(target=target, args=args, name=name, daemon=True).start()
    except RuntimeError:
        return False
    return True


def report_dropped(error: BaseException, *, rule: str | None = None, where: str = "") -> None:
    """Report an error that can no longer be signalled to anyone (§2.13, §1.7).

    Logs at ERROR to the ``reactive_streams`` logger, naming the rule and carrying the traceback.
    """
    prefix = f"§{rule}: " if rule else ""
    logger.error("%s%s dropped: %r", prefix, where or "error", error, exc_info=error)


def not_an_exception(error: object, what: str) -> Exception:
    """What ``on_error`` gets for something a source raised or threw that is no ``Exception``
    (``None``, a ``BaseException`` such as a cancellation): ``on_error`` takes an Exception,
    so a RuntimeError naming it after ``what``, caused by it when it can be (§1.4)."""
    wrapped = RuntimeError(f"{what} {error!r}, which is not an Exception")
    if isinstance(error, BaseException):
        wrapped.__cause__ = error
    return wrapped


_SIGNALS: Final = ("on_subscribe", "on_next", "on_error", "on_complete")
_REPR: Final = reprlib.Repr()
_REPR.maxother = 80  # what the caller passed, cut to a line


def require_subscriber(subscriber: object) -> None:
    """§1.9: ``subscribe(None)``, or of anything without the four callable signal methods,
    raises ``TypeError`` (the JVM's NullPointerException; its compiler refuses the rest).
    Every publisher calls it first, before it claims anything (a one-shot source)."""
    if subscriber is None:
        raise TypeError("§1.9: subscribe() requires a Subscriber, got None")
    missing = [name for name in _SIGNALS if not callable(getattr(subscriber, name, None))]
    if missing:
        raise TypeError(
            f"§1.9: subscribe() requires a Subscriber, with callable on_subscribe, on_next, "
            f"on_error and on_complete; got {_REPR.repr(subscriber)} (type "
            f"{type(subscriber).__qualname__}), which lacks {', '.join(missing)}"
        )


def require_publisher(publisher: object, who: str) -> None:
    """``who`` takes a Publisher: ``None``, or an object without a callable ``subscribe``,
    is a ``TypeError`` at the call that names ``who``, not a failure at subscribe time."""
    if publisher is None or not callable(getattr(publisher, "subscribe", None)):
        got = "None" if publisher is None else type(publisher).__name__
        raise TypeError(
            f"{who} requires a Publisher (an object with subscribe(subscriber)), got {got}"
        )


def require_timeout(timeout: object, who: str) -> float | None:
    """``who``'s ``timeout``: ``None`` (wait for ever) or a finite number of seconds > 0,
    returned as a float; anything else is a ``TypeError`` (not a number, or a bool) or a
    ``ValueError`` (not finite, or not > 0) at the call, naming ``timeout``."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"{who}: timeout must be None or a number of seconds, got "
            f"{type(timeout).__name__} {_REPR.repr(timeout)}"
        )
    try:
        seconds = float(timeout)
    except OverflowError:  # an int too large for a float: not finite either
        seconds = math.inf
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{who}: timeout must be a finite number of seconds > 0, got {timeout!r}")
    return seconds


def require_subscription(subscription: object) -> None:
    """§2.13: ``on_subscribe(None)`` raises ``TypeError``."""
    if subscription is None:
        raise TypeError("§2.13: on_subscribe() requires a Subscription, got None")


def require_element(element: object) -> None:
    """§2.13: ``on_next(None)`` raises ``TypeError``: ``None`` is never an element."""
    if element is None:
        raise TypeError("§2.13: on_next() requires an element, got None (None is never an element)")


def require_error(error: object) -> None:
    """§2.13: ``on_error(None)`` raises ``TypeError``."""
    if error is None:
        raise TypeError("§2.13: on_error() requires an exception, got None")


@final
class OneShot:
    """Guards a source that can be consumed once (an iterator, a generator): the first
    ``take()`` wins; later ones get the §1.9 rejection error to pass to :func:`reject`."""

    __slots__ = ("_lock", "_taken", "_what")

    def __init__(self, what: str) -> None:
        self._lock = threading.Lock()
        self._taken = False
        self._what = what

    def take(self) -> Exception | None:
        with self._lock:
            taken, self._taken = self._taken, True
        if not taken:
            return None
        return RuntimeError(
            f"§1.9: this publisher wraps a one-shot {self._what} that an earlier subscriber "
            "already consumed; wrap an iterable whose __iter__ (or __aiter__) returns a fresh "
            "iterator to serve many subscribers"
        )


def reject(subscriber: Subscriber[Any], error: Exception) -> None:
    """Refuse a subscription: ``on_subscribe(EMPTY)`` then ``on_error(error)`` (§1.9, §1.4)."""
    try:
        subscriber.on_subscribe(EMPTY_SUBSCRIPTION)
        subscriber.on_error(error)
    except Exception as exc:  # §2.13: the subscriber broke the protocol; nobody left to tell
        report_dropped(exc, rule="2.13", where="a subscriber's on_subscribe/on_error raised")
