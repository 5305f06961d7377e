"""A type-checked tour of the public API: ``mypy --strict tests/typing/api_usage.py`` must pass.

Never executed by pytest (its name does not start with ``test_``); it exists to be type-checked,
like structlog's tests/typing/api.py. Lines marked ``# type: ignore[...]`` are mistakes mypy must
reject: strict mode's ``warn_unused_ignores`` turns an accepted mistake into an error, so the
variance of the four protocols is checked in both directions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, assert_type

from reactivex import operators as ops

from reactive_streams import (
    UNBOUNDED,
    BaseSubscriber,
    IllegalRequestError,
    OverflowViolation,
    Processor,
    ProtocolViolation,
    Publisher,
    Subscriber,
    Subscription,
    checked,
    pipe,
    publish_on,
)
from reactive_streams.adapters.async_iterables import (
    AsyncPublisherIterator,
    from_async_iterable,
    to_async_iterator,
)
from reactive_streams.adapters.iterables import BlockingIterator, from_iterable, to_iterator
from reactive_streams.adapters.rx import rx_processor
from reactive_streams.testing import RecordingSubscriber

# -- the four protocols, implemented by hand ----------------------------------------------------


class Numbers:
    """A Publisher[int] written from scratch (structural typing: no base class needed)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        from_iterable([1, 2, 3]).subscribe(subscriber)


class Printer:
    """A Subscriber[object]: accepts anything, so it may subscribe to a Publisher[int]."""

    def __init__(self) -> None:
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(UNBOUNDED)

    def on_next(self, element: object) -> None:
        print(element)

    def on_error(self, error: Exception) -> None:
        print("failed:", error)

    def on_complete(self) -> None:
        print("done")


class Lengths:
    """A Processor[str, int]: a Subscriber of str and a Publisher of int."""

    def __init__(self) -> None:
        self._downstream: Subscriber[int] | None = None

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._downstream = subscriber

    def on_subscribe(self, subscription: Subscription) -> None:
        if self._downstream is not None:
            self._downstream.on_subscribe(subscription)

    def on_next(self, element: str) -> None:
        if self._downstream is not None:
            self._downstream.on_next(len(element))

    def on_error(self, error: Exception) -> None:
        if self._downstream is not None:
            self._downstream.on_error(error)

    def on_complete(self) -> None:
        if self._downstream is not None:
            self._downstream.on_complete()


numbers: Publisher[int] = Numbers()
printer: Subscriber[object] = Printer()
lengths: Processor[str, int] = Lengths()

# Variance: Publisher is covariant, Subscriber contravariant, Processor both.
as_objects: Publisher[object] = numbers
numbers.subscribe(printer)  # a Subscriber[object] may take ints
ints_in: Subscriber[int] = printer
from_iterable(["a", "bc"]).subscribe(lengths)  # Processor[str, int] is a Subscriber[str]
lengths.subscribe(printer)  # ... and a Publisher[int]
strings_out: Publisher[object] = lengths
as_int_sink: Subscriber[str] = lengths

# ... and the mistakes mypy must reject:
not_ints: Publisher[int] = from_iterable(["a"])  # type: ignore[list-item]
strs: Publisher[str] = from_iterable(["a"])
narrowed: Publisher[int] = strs  # type: ignore[assignment]
only_ints: Subscriber[int] = RecordingSubscriber[int]()
widened: Subscriber[object] = only_ints  # type: ignore[assignment]
strs.subscribe(only_ints)  # type: ignore[arg-type]
wrong_processor: Processor[int, int] = lengths  # type: ignore[assignment]
numbers.subscribe(None)  # type: ignore[arg-type]


# -- library entry points keep the element type ------------------------------------------------


def pipeline(pool: ThreadPoolExecutor) -> list[int]:
    """from_iterable -> checked -> publish_on -> to_iterator, typed end to end."""
    source = from_iterable(range(10))
    assert_type(source, Publisher[int])
    guarded = checked(source)
    assert_type(guarded, Publisher[int])
    logged = checked(source, on_violation="log")
    collected: list[ProtocolViolation] = []
    custom = checked(logged, on_violation=collected.append)
    moved = publish_on(custom, pool, prefetch=16)
    assert_type(moved, Publisher[int])
    with to_iterator(moved, prefetch=8) as iterator:
        assert_type(iterator, BlockingIterator[int])
        first: int = next(iterator)
        rest: Iterator[int] = iterator
        return [first, *rest]


async def async_pipeline() -> list[str]:
    """Async iterables in and out keep the element type too."""

    async def words() -> AsyncIterator[str]:
        yield "a"
        yield "b"

    publisher = from_async_iterable(words())
    assert_type(publisher, Publisher[str])
    out: list[str] = []
    async for word in to_async_iterator(publisher, prefetch=4):
        out.append(word)
    return out


def with_timeouts(publisher: Publisher[int]) -> None:
    """timeout= (seconds, each wait) keeps the iterator types; seconds as text are refused."""
    assert_type(to_iterator(publisher, timeout=2.0), BlockingIterator[int])
    assert_type(to_async_iterator(publisher, timeout=2), AsyncPublisherIterator[int])
    to_iterator(publisher, timeout="2")  # type: ignore[arg-type]


class Summer(BaseSubscriber[int]):
    """BaseSubscriber subclasses are Subscribers of their element type."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def hook_on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(1)

    def hook_on_next(self, element: int) -> None:
        self.total += element
        self.request(1)


summer = Summer()
from_iterable([1, 2, 3]).subscribe(summer)
from_iterable(["x"]).subscribe(summer)  # type: ignore[arg-type]
as_subscriber: Subscriber[int] = summer
disposed: bool = summer.is_disposed

recorder = RecordingSubscriber[int](initial_request=2, request_on_next=1)
from_iterable([1, 2]).subscribe(recorder)
recorder.await_terminal(timeout=1.0)
elements: list[int] = recorder.elements
violations: list[str] = recorder.violations

# Errors carry the rule they name.
rule: str = ProtocolViolation("1.1", "too many").rule
bad_request: ValueError = IllegalRequestError("§3.9: request(0)")
overflow: ProtocolViolation = OverflowViolation("§1.1: overflow")
unbounded: int = UNBOUNDED
checked(numbers, on_violation="ignore")  # type: ignore[arg-type]


# -- pipe and rx_processor: the element types carry through the stages -------------------------


def tenfold(x: int) -> int:
    return x * 10


def label(x: int) -> str:
    return f"#{x}"


def short(text: str) -> bool:
    return len(text) < 4


def rx_pipeline() -> list[str]:
    """An iterable through two rx_processor stages into to_iterator, typed end to end."""
    scaled = rx_processor(ops.map(tenfold))
    assert_type(scaled, Processor[int, int])
    labelled = rx_processor(ops.map(label), ops.filter(short), buffer_size=16)
    assert_type(labelled, Processor[int, str])
    piped = pipe(from_iterable(range(10)), scaled, labelled)
    assert_type(piped, Publisher[str])
    assert_type(pipe(piped), Publisher[str])
    with to_iterator(piped, prefetch=16) as lines:
        assert_type(lines, BlockingIterator[str])
        return list(lines)


# A type no operator pins is Any: the variable states it, and mypy holds the stage to it.
batches: Processor[int, list[int]] = rx_processor(ops.buffer_with_count(3))
first_three: Processor[int, int] = rx_processor(ops.take(3))
identity: Processor[str, str] = rx_processor()
assert_type(pipe(from_iterable([1]), identity, *[identity] * 6), Publisher[Any])  # 7 and more

# ... and the mistakes mypy must reject (mypy reports some at the ops.map the type flows to):
numbers_in = from_iterable(range(3))
wrong_out: Publisher[int] = pipe(numbers_in, rx_processor(ops.map(label)))  # type: ignore[arg-type]
pipe(from_iterable(["a"]), rx_processor(ops.map(tenfold)))  # type: ignore[misc]
pipe(numbers_in, rx_processor(ops.map(label)), rx_processor(ops.map(tenfold)))  # type: ignore[misc]
rx_processor(ops.map(label), ops.map(tenfold))  # type: ignore[misc]
from_iterable(["a"]).subscribe(rx_processor(ops.map(tenfold)))  # type: ignore[arg-type]
stated_wrong: Processor[str, int] = rx_processor(ops.map(tenfold))  # type: ignore[arg-type]
pipe(from_iterable([1]), "not a stage")  # type: ignore[call-overload]
rx_processor(ops.map)  # type: ignore[arg-type]
