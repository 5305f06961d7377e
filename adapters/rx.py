"""RxPY (reactivex 4.x to 6.x) and Reactive Streams, both directions.

- ``from_observable``: an Observable ignores demand, so an ``overflow`` strategy applies and
  at most ``buffer_size`` elements are held: ``block`` (lossless: the emitting thread waits
  for room; a cold Observable runs on a thread the adapter owns), ``buffer``, ``drop``,
  ``latest`` or ``error``.
- ``to_observable``: requests ``prefetch`` and re-requests 75% as the observer takes them.
- ``rx_processor``: an operator chain in a pipeline, upstream requested for what fits.
- Signals reach a subscriber on the thread that emits (or requests); Rx observers on the
  publisher's thread. Cancel disposes the Rx subscription; ``dispose()`` of a
  ``to_observable`` subscription cancels the publisher. See docs/adapters.md, "RxPY".
"""

from __future__ import annotations

from reactive_streams.adapters._extras import missing_extra

try:
    import reactivex  # noqa: F401  # the extra, checked before the modules that need it
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra(exc, "reactive_streams.adapters.rx", "rx") from exc

from reactive_streams.adapters._rx_from import ObservablePublisher, Overflow, from_observable
from reactive_streams.adapters._rx_processor import RxProcessor, rx_processor
from reactive_streams.adapters._rx_to import to_observable

__all__ = [
    "ObservablePublisher",
    "Overflow",
    "RxProcessor",
    "from_observable",
    "rx_processor",
    "to_observable",
]
