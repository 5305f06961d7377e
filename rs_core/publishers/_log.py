"""``log``: a pass-through stage that writes its demand and its ending to ``logging``.

Every signal goes through unchanged; ``request(n)``, ``cancel`` and the terminal signal are
written, one line each, naming the stage. Elements are only forwarded: no line, no lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar, final

from reactive_streams._demand import add_cap, check_request
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    CANCELLED,
    cancel_quietly,
    reject,
    report_dropped,
    require_element,
    require_error,
    require_subscriber,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Processor, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation

__all__ = ["LogProcessor", "log"]

T = TypeVar("T")

LOGGER: Final = logging.getLogger("reactive_streams.log")
"""Where ``log`` writes unless given a logger."""

_COMPLETE: Final = object()  # the stored terminal signal when it is on_complete


@final
class LogProcessor(Generic[T]):
    """An identity Processor that logs ``request(n)``, ``cancel`` and its terminal signal.

    Unicast: a second Subscriber gets ``on_subscribe`` then ``on_error`` (§1.9, §1.11). Either
    side may come first (``pipe`` subscribes from the sink end): requests made before the
    upstream's ``on_subscribe`` are passed on then (§2.7), and a terminal signal that comes
    before the Subscriber is given to it after its ``on_subscribe``. Requests made inside
    the Subscriber's ``on_subscribe`` are passed on once it returns, so no ``on_next`` can
    overlap it (§1.3). ``on_next`` runs on the upstream's thread and only forwards. Rules:
    §1.3, §1.9, §2.5 (set once, via ``Upstream``), §2.7, §2.13 (``None`` refused; a
    Subscriber that raises counts as cancelled), §3.5/§3.7 (``cancel`` idempotent, logged
    once), §3.13 (the Subscriber is dropped on cancel and at the end).
    """

    __slots__ = (
        "_asked",
        "_cancelled",
        "_deliver",
        "_downstream",
        "_early",
        "_ended",
        "_level",
        "_lock",
        "_logger",
        "_name",
        "_ready",
        "_taken",
        "_terminal",
        "_upstream",
    )

    def __init__(self, name: str, level: int, logger: logging.Logger) -> None:
        self._name = name
        self._level = level
        self._logger = logger
        self._lock = threading.Lock()
        self._upstream = Upstream(self._pass)  # set once (§2.5), requests serial (§2.7)
        self._asked = 0  # owned: the requesting turn (Upstream calls _pass serially)
        # Under _lock: the downstream side's state; one-way flags read lock-free as hints.
        self._taken = False  # a Subscriber came (unicast)
        self._downstream: Subscriber[T] | None = None  # dropped on cancel and at the end
        self._deliver: Callable[[T], None] | None = None  # its on_next, once it may get one
        self._ready = False  # its on_subscribe returned: requests go straight upstream
        self._early: list[object] = []  # requests made inside its on_subscribe, in order
        self._cancelled = False
        self._ended = False  # the upstream's terminal signal came
        self._terminal: object = None  # ... kept until a ready Subscriber gets it

    # -- upstream side ----------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        self._upstream.set_once(subscription)  # §2.5; passes on the demand asked before

    def on_next(self, element: T) -> None:
        if element is None:  # §2.13: the upstream counts as cancelled; downstream hears why
            self._fail_upstream(TypeError("§2.13: upstream signalled on_next(None)"))
            require_element(element)  # raises TypeError
        deliver = self._deliver  # one read: cancel may clear it meanwhile
        if deliver is None:
            if not self._cancelled and not self._ended:  # nothing was requested yet
                self._fail_upstream(OverflowViolation("§1.1: on_next before any request"))
            return  # §2.8: after cancel, dropped
        try:
            deliver(element)
        except Exception as exc:  # §2.13: the Subscriber counts as cancelled
            report_dropped(exc, rule="2.13", where=f"log {self._name}: on_next raised")
            self._cancel("cancel (its subscriber's on_next raised)")

    def on_error(self, error: Exception) -> None:
        require_error(error)  # §2.13
        self._end(error)

    def on_complete(self) -> None:
        self._end(_COMPLETE)

    def _end(self, terminal: object) -> None:
        """The upstream ended (§2.4: its subscription is dropped, never called again): log
        it, then signal the Subscriber if it is ready, else keep it for when it is."""
        self._upstream.take()
        downstream: Subscriber[T] | None = None
        with self._lock:
            if self._ended:  # §1.7: a second terminal signal
                duplicate = True
            else:
                duplicate, self._ended = False, True
                downstream = self._downstream if self._ready else None
                if downstream is None:
                    self._terminal = terminal  # for a Subscriber still to come (or ready)
                self._downstream = self._deliver = None  # §3.13
        if duplicate:
            if terminal is not _COMPLETE:
                report_dropped(terminal, rule="1.7", where=f"log {self._name}: on_error")  # type: ignore[arg-type]
            return
        self._log_terminal(terminal)
        if downstream is not None and not self._cancelled:
            _signal(downstream, terminal)

    def _fail_upstream(self, error: Exception) -> None:
        """The upstream broke a rule: cancel it, and end the stream with ``error``."""
        upstream = self._upstream.take()
        if upstream is not None and upstream is not CANCELLED:
            cancel_quietly(upstream)
        self._end(error)

    def _pass(self, subscription: Subscription, n: int) -> None:
        """One ``request(n)`` upstream, in turn (Upstream: serial, §2.7), counted first."""
        if check_request(n) is None:
            self._asked = add_cap(self._asked, n)  # owned: the requesting turn
        subscription.request(n)

    # -- downstream side ----------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        with self._lock:
            taken, self._taken = self._taken, True
            if not taken:
                self._downstream = subscriber
        if taken:
            reject(
                subscriber,
                RuntimeError(
                    f"§1.9/§1.11: log({self._name!r}) is unicast: it serves one subscriber"
                ),
            )
            return
        try:
            subscriber.on_subscribe(_LogSubscription(self))
        except Exception as exc:  # §2.13: the Subscriber counts as cancelled
            report_dropped(exc, rule="2.13", where=f"log {self._name}: on_subscribe raised")
            self._cancel("cancel (its subscriber's on_subscribe raised)")
            return
        with self._lock:  # from now on requests go straight upstream, elements downstream
            if not self._cancelled and not self._ended:
                self._deliver = subscriber.on_next  # set before _ready, which is read lock-free
            self._ready = True
            early, self._early = self._early, []
            terminal, self._terminal = self._terminal, None
            if self._ended:
                self._downstream = None  # §3.13
        for n in early:
            self._upstream.request(n)  # type: ignore[arg-type]  # as it came (§3.9)
        if terminal is not None and not self._cancelled:
            _signal(subscriber, terminal)

    def _request(self, n: int) -> None:
        self._logger.log(self._level, "log %s: request(%s)", self._name, n)
        if not self._ready:  # a hint; decided under _lock
            with self._lock:
                if not self._ready:
                    self._early.append(n)  # passed on once on_subscribe returns (§1.3)
                    return
        self._upstream.request(n)  # §2.7, §3.9 (an invalid n goes on as it came)

    def _cancel(self, what: str = "cancel") -> None:
        with self._lock:
            if self._cancelled:  # §3.7
                return
            self._cancelled = True
            self._downstream = self._deliver = None  # §3.13
            self._early = []
        self._logger.log(self._level, "log %s: %s", self._name, what)
        self._upstream.cancel()  # §3.5: never waits for a request; §3.15: reported

    def _log_terminal(self, terminal: object) -> None:
        if terminal is _COMPLETE:
            self._logger.log(self._level, "log %s: on_complete", self._name)
        else:
            self._logger.log(self._level, "log %s: on_error(%r)", self._name, terminal)

    # -- diagnostics ----------------------------------------------------------------------------

    def scan(self) -> Scan:
        """This stage's record for :func:`~reactive_streams.snapshot` (any thread, no lock):
        what it asked upstream in all; outstanding and delivered counts are not kept."""
        return Scan(
            f"log {self._name}",
            asked=self._asked,
            cancelled=self._cancelled,
            terminated=self._ended and not self._cancelled,
            subscribed=self._upstream.subscription is not None,
            upstream=self._upstream.linked,
        )

    def __repr__(self) -> str:
        return f"<LogProcessor {self._name!r}>"


@final
class _LogSubscription:
    """What the Subscriber of a ``log`` stage holds: requests and cancel, logged."""

    __slots__ = ("_stage",)

    def __init__(self, stage: LogProcessor[Any]) -> None:
        self._stage = stage

    def request(self, n: int) -> None:
        self._stage._request(n)

    def cancel(self) -> None:
        self._stage._cancel()

    def scan(self) -> Scan:
        return self._stage.scan()

    def __repr__(self) -> str:
        return f"<subscription of {self._stage!r}>"


def _signal(subscriber: Subscriber[T], terminal: object) -> None:
    try:
        if terminal is _COMPLETE:
            subscriber.on_complete()
        else:
            subscriber.on_error(terminal)  # type: ignore[arg-type]
    except Exception as exc:  # §2.13
        report_dropped(exc, rule="2.13", where="on_complete/on_error raised")


def log(
    name: str, *, level: int = logging.INFO, logger: logging.Logger | None = None
) -> Processor[T, T]:
    """A stage that passes every signal through and logs ``request(n)``, ``cancel`` and the
    terminal signal (``on_complete``, or ``on_error`` with the error) at ``level``.

    Each line starts with ``log <name>:``. Elements are not logged (that would cost per
    element). Unicast: one Subscriber. ``snapshot`` names the stage ``log <name>``.

    Args:
        name: names the stage in every line and in a snapshot.
        level: the ``logging`` level of the lines.
        logger: where to write; ``logging.getLogger("reactive_streams.log")`` by default.

    Raises:
        TypeError: ``name`` is not a str, ``level`` not an int, ``logger`` not a Logger.

    Example:
        >>> from reactive_streams import pipe
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> list(to_iterator(pipe(from_iterable(range(3)), log("numbers"))))
        [0, 1, 2]
    """
    if not isinstance(name, str):
        raise TypeError(f"log(): name must be a str, got {type(name).__name__}")
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"log(): level must be an int (logging.INFO...), got {level!r}")
    if logger is not None and not isinstance(logger, logging.Logger):
        raise TypeError(f"log(): logger must be a logging.Logger, got {type(logger).__name__}")
    return LogProcessor(name, level, LOGGER if logger is None else logger)
