"""Reactive Streams for Python: the protocol, the machinery every publisher reuses, the TCK.

See ``docs/`` for the Python reading of the rules; ``reactive_streams.tck`` holds the verification
base classes.
"""

from reactive_streams._checked import checked
from reactive_streams._demand import UNBOUNDED
from reactive_streams._pipe import pipe
from reactive_streams._scan import Scan, Scannable, Snapshot, snapshot
from reactive_streams.api import Processor, Publisher, Subscriber, Subscription
from reactive_streams.errors import IllegalRequestError, OverflowViolation, ProtocolViolation
from reactive_streams.publishers._log import log
from reactive_streams.publishers._map_async import map_async
from reactive_streams.publishers._publish_on import publish_on
from reactive_streams.publishers._retry import retry
from reactive_streams.publishers._share import share
from reactive_streams.subscribers._base import BaseSubscriber

__all__ = [
    "UNBOUNDED",
    "BaseSubscriber",
    "IllegalRequestError",
    "OverflowViolation",
    "Processor",
    "ProtocolViolation",
    "Publisher",
    "Scan",
    "Scannable",
    "Snapshot",
    "Subscriber",
    "Subscription",
    "checked",
    "log",
    "map_async",
    "pipe",
    "publish_on",
    "retry",
    "share",
    "snapshot",
]
