"""The errors reactive_streams raises or signals.

Exception tree::

    Exception
    └── ProtocolViolation            a Reactive Streams rule was broken; ``.rule`` names it
        ├── IllegalRequestError      (also ValueError) request(n) with n <= 0 or a non-int (§3.9)
        └── OverflowViolation        more elements arrived than were requested (§1.1)

``asyncio.CancelledError`` and other ``BaseException`` subclasses are never caught or
mapped by this library: they always propagate. One passing through a publisher's drain (a
``KeyboardInterrupt`` in ``on_next``) ends that subscription on its way: it counts as
cancelled and its source is closed (a generator's ``finally`` runs); on an executor, where
it would vanish into the task's ``Future``, it is also logged.
"""

from __future__ import annotations

__all__ = ["IllegalRequestError", "OverflowViolation", "ProtocolViolation"]


class ProtocolViolation(Exception):
    """A Reactive Streams rule was broken.

    Attributes:
        rule: the rule's number as the specification writes it, e.g. ``"1.1"`` or ``"3.9"``.
    """

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        text = message if message.startswith("§") else f"§{rule}: {message}"
        super().__init__(text)


class IllegalRequestError(ProtocolViolation, ValueError):
    """``request(n)`` was called with ``n <= 0`` or with a value that is not an ``int`` (§3.9).

    It reaches the Subscriber through ``on_error``; it is a ``ValueError``, the Python reading
    of the JVM's ``IllegalArgumentException``.
    """

    def __init__(self, message: str) -> None:
        super().__init__("3.9", message)


class OverflowViolation(ProtocolViolation):
    """A Publisher signalled more ``on_next`` than were requested (§1.1), or a bounded
    buffer overflowed because its source ignored demand."""

    def __init__(self, message: str, rule: str = "1.1") -> None:
        super().__init__(rule, message)
