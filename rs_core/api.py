"""The four interfaces of Reactive Streams, read into Python (spec §1-§4).

Every signal returns ``None``. ``None`` is never an element: passing it is answered
with ``TypeError`` (§2.13). Demand is a positive ``int``; ``reactive_streams.UNBOUNDED``
(2**63 - 1) means "effectively unbounded" (§3.17).
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["Processor", "Publisher", "Subscriber", "Subscription"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


@runtime_checkable
class Subscription(Protocol):
    """**Protocol:** one Subscriber's link to one Publisher (§3).

    ``request(n)`` registers ``n`` more elements of demand (§3.8); ``n <= 0`` is answered
    with ``on_error(ValueError)`` (§3.9). ``cancel()`` asks the Publisher to stop and to
    drop its references to the Subscriber (§3.12, §3.13); it is idempotent and thread-safe
    (§3.5, §3.7). Both return normally (§3.15, §3.16).
    """

    def request(self, n: int) -> None: ...

    def cancel(self) -> None: ...


@runtime_checkable
class Subscriber(Protocol[T_contra]):
    """**Protocol:** receives ``on_subscribe`` once, then at most as many ``on_next`` as it
    requested, then at most one of ``on_error`` / ``on_complete`` (§1.1, §1.7, §2.12).

    Signals arrive serially (§1.3) and must return normally (§2.13); ``on_error`` and
    ``on_complete`` must not call the Subscription (§2.3).
    """

    def on_subscribe(self, subscription: Subscription) -> None: ...

    def on_next(self, element: T_contra) -> None: ...

    def on_error(self, error: Exception) -> None: ...

    def on_complete(self) -> None: ...


@runtime_checkable
class Publisher(Protocol[T_co]):
    """**Protocol:** a possibly unbounded source of elements, emitted according to demand.

    ``subscribe(None)`` raises ``TypeError``; for any other Subscriber, ``subscribe`` calls
    ``on_subscribe`` first and returns normally: failures go to ``on_error`` (§1.9).
    """

    def subscribe(self, subscriber: Subscriber[T_co]) -> None: ...


@runtime_checkable
class Processor(Subscriber[T_contra], Publisher[R_co], Protocol[T_contra, R_co]):
    """**Protocol:** a stage that is both a Subscriber and a Publisher and obeys both (§4.1)."""
