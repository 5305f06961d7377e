"""Reactive Streams for Python: the protocol, the machinery every publisher reuses, the TCK.

See ``docs/`` for the Python reading of the rules; ``rs_core.tck`` holds the verification
base classes.
"""

from rs_core._checked import checked
from rs_core._demand import UNBOUNDED
from rs_core.api import Processor, Publisher, Subscriber, Subscription
from rs_core.errors import IllegalRequestError, OverflowViolation, ProtocolViolation
from rs_core.publishers._publish_on import publish_on
from rs_core.subscribers._base import BaseSubscriber

__all__ = [
    "UNBOUNDED",
    "BaseSubscriber",
    "IllegalRequestError",
    "OverflowViolation",
    "Processor",
    "ProtocolViolation",
    "Publisher",
    "Subscriber",
    "Subscription",
    "checked",
    "publish_on",
]
