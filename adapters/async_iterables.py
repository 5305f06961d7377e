"""Async iterables and Reactive Streams, both directions.

- ``from_async_iterable``: a pull source. One unit of demand allows one ``__anext__`` (never more
  than one in flight), so an async generator runs only as far as demand reaches (§1.1, §3.10).
- ``to_async_iterator``: ``async for`` over any Publisher; at most ``prefetch`` elements are
  requested ahead of consumption, ``limit`` (75%) re-requested as they are consumed.
- Signals of ``from_async_iterable`` arrive on its event loop (``on_subscribe`` on the thread
  that subscribes); ``request``/``cancel`` may come from any thread. ``to_async_iterator``
  accepts signals from any thread and hands them to its loop with ``call_soon_threadsafe``.
- Cancel ``aclose()``s the async generator on its loop (cancelling an in-flight ``__anext__``
  first), so its ``finally`` runs; ``break`` (dropping the iterator), ``aclose()``, leaving
  ``async with`` or cancelling the consuming task cancel ``to_async_iterator``'s subscription.

The two directions live in ``_async_from`` and ``_async_to``; docs/adapters.md has the details.
"""

from reactive_streams.adapters._async_from import AsyncIterablePublisher, from_async_iterable
from reactive_streams.adapters._async_to import AsyncPublisherIterator, to_async_iterator

__all__ = [
    "AsyncIterablePublisher",
    "AsyncPublisherIterator",
    "from_async_iterable",
    "to_async_iterator",
]
