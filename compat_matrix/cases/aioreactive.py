"""TCK cases for ``reactive_streams.adapters.aioreactive`` (the loop: the TCK's helper thread).

- ``from_async_observable`` over ``aioreactive.from_async_iterable`` of a re-iterable async
  generator (its worker awaits ``asend``, so demand paces it); the failed publisher is a
  source whose ``subscribe_async`` raises (reported without any demand, §1.4).
- the Subscriber inside ``to_async_observable``, in black-box mode, while its pump task on
  the TCK's loop sends to an aioreactive observer and awaits each ``asend``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aioreactive as rx
from aioreactive import AsyncObservable
from expression.system import AsyncDisposable

from compat_matrix.cases.async_iterables import Handoff, Numbers
from reactive_streams import Publisher, Subscriber
from reactive_streams.adapters.aioreactive import from_async_observable, to_async_observable
from reactive_streams.tck import PublisherVerification, SubscriberBlackboxVerification


class _FailingObservable(AsyncObservable[int]):
    """An async observable that cannot be subscribed to."""

    async def subscribe_async(
        self, send: Any = None, throw: Any = None, close: Any = None
    ) -> AsyncDisposable:
        raise ConnectionError("TCK: this source cannot be subscribed to")


class FromAsyncObservableVerification(PublisherVerification[int]):
    """``from_async_observable(aioreactive.from_async_iterable(...))``: asend awaits demand."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        source: Any = rx.from_async_iterable(Numbers(elements))
        return from_async_observable(source, loop=self.env().event_loop())

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_async_observable(_FailingObservable(), loop=self.env().event_loop())


class ToAsyncObservableSubscriberBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_async_observable`` (prefetch 4), feeding an observer on the
    TCK's loop that awaits a little in each ``asend``."""

    def create_subscriber(self) -> Subscriber[int]:
        handoff: Handoff[int] = Handoff()

        async def asend(value: int) -> None:
            await asyncio.sleep(0)

        async def start() -> AsyncDisposable:
            observable = to_async_observable(handoff, prefetch=4)
            return await observable.subscribe_async(rx.AsyncAnonymousObserver(asend))

        loop = self.env().event_loop()
        disposable = asyncio.run_coroutine_threadsafe(start(), loop).result(
            self.env().default_timeout
        )
        self.__dict__.setdefault("_disposables", []).append((loop, disposable))
        return handoff.subscriber.result(self.env().default_timeout)

    def create_element(self, i: int) -> int:
        return i

    def teardown_method(self, method: object) -> None:
        """Dispose the subscriptions a test left open."""
        for loop, disposable in self.__dict__.pop("_disposables", []):
            asyncio.run_coroutine_threadsafe(disposable.dispose_async(), loop).result(5)


CASES = [
    ("from_async_observable", FromAsyncObservableVerification),
    ("to_async_observable (blackbox)", ToAsyncObservableSubscriberBlackboxVerification),
]
