"""``checked``: a runtime rule checker to wrap around any Publisher, in tests or in production.

It sits between a Publisher and each of its Subscribers and passes every signal on unchanged,
checking it on the way (the per-Subscriber ``Checker`` is in ``_checker.py``). It adds no
buffering and no demand of its own. Signals reach the subscriber on whichever thread the
publisher uses; ``request`` and ``cancel`` go upstream at once, on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Literal, TypeAlias, TypeVar, final

from reactive_streams._checker import Checker
from reactive_streams._subscription import report_dropped, require_publisher, require_subscriber
from reactive_streams.api import Publisher, Subscriber
from reactive_streams.errors import ProtocolViolation

__all__ = ["CheckedPublisher", "OnViolation", "checked"]

T = TypeVar("T")

OnViolation: TypeAlias = Literal["raise", "log"] | Callable[[ProtocolViolation], object]
"""What ``checked`` does with a violation: ``"raise"``, ``"log"``, or a callable to call."""


def _log(violation: ProtocolViolation) -> None:
    report_dropped(
        violation,
        rule=violation.rule,
        where="checked(): the offending signal was passed on and the violation",
    )


def checked(publisher: Publisher[T], *, on_violation: OnViolation = "raise") -> Publisher[T]:
    """Wrap ``publisher`` so that every signal to and from it is checked against the rules.

    Checked per Subscriber: §1.1, §1.3, §1.7, §1.9, §2.3, §2.12, §2.13, §3.9, §3.15, §3.16
    (what each means, and what is not checked: docs/notes/checked.md).

    Args:
        publisher: any Publisher.
        on_violation: ``"raise"`` (default): raised to the offending caller, the Subscriber
            gets ``on_error(violation)`` once, the upstream is cancelled. ``"log"``: logged
            at ERROR (logger ``reactive_streams``), the signal passed on. A callable: called
            instead of logging; what it raises reaches the offending caller.

    Returns:
        A Publisher with the same elements; each Subscriber gets its own checker.

    Raises:
        TypeError: ``on_violation`` is neither ``"raise"``, ``"log"`` nor callable.

    Example: ``list(to_iterator(checked(from_iterable(range(3)))))`` is ``[0, 1, 2]``.
    """
    return CheckedPublisher(publisher, on_violation)


@final
class CheckedPublisher(Generic[T]):
    """The Publisher ``checked`` returns: subscribes a fresh ``Checker`` per Subscriber.

    Rules: §1.9 (``subscribe(None)`` raises ``TypeError``; ``subscribe`` must return
    normally), and every rule its checker checks. Immutable: shared freely between threads.
    """

    __slots__ = ("_publisher", "_raise", "_report")

    def __init__(self, publisher: Publisher[T], on_violation: OnViolation = "raise") -> None:
        require_publisher(publisher, "checked()")
        self._publisher = publisher
        self._report: Callable[[ProtocolViolation], object]
        if on_violation == "raise":
            self._raise, self._report = True, _log
        elif on_violation == "log":
            self._raise, self._report = False, _log
        elif callable(on_violation):
            self._raise, self._report = False, on_violation
        else:
            raise TypeError(
                f"on_violation must be 'raise', 'log' or a callable, got {on_violation!r}"
            )

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        checker = Checker(subscriber, self._raise, self._report)
        try:
            self._publisher.subscribe(checker)
        except Exception as exc:  # §1.9: subscribe must return normally
            checker.subscribe_raised(self._publisher, exc)  # raises the violation in raise mode
            raise  # "log" or a callable: the exception passes through as it came

    def __repr__(self) -> str:
        return f"checked({self._publisher!r})"
