"""reactive_streams._subscription: the argument checks every publisher makes first (§1.9)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import pytest

from reactive_streams import UNBOUNDED, BaseSubscriber, Publisher, checked, publish_on
from reactive_streams._subscription import require_subscriber
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import ManualPublisher
from reactive_streams.testing import RecordingSubscriber


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in debug mode, running on a helper thread."""
    event_loop = asyncio.new_event_loop()
    event_loop.set_debug(True)
    thread = threading.Thread(target=event_loop.run_forever, name="test-loop", daemon=True)
    thread.start()
    yield event_loop
    event_loop.call_soon_threadsafe(event_loop.stop)
    thread.join(5)
    event_loop.close()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """A one-thread executor, shut down after the test."""
    with ThreadPoolExecutor(1, thread_name_prefix="test-pool") as executor:
        yield executor


def numbers() -> Iterator[int]:
    """A one-shot source: a second subscriber would be refused (§1.9)."""
    yield from range(3)


# -- what a Subscriber is ------------------------------------------------------------------------


class OnlyOnNext:
    def on_next(self, element: object) -> None:
        pass


class NotCallable:
    on_subscribe = on_next = on_error = on_complete = "not a method"


class TestRequireSubscriber:
    def test_spec109_none_is_a_type_error(self) -> None:
        """§1.9: None is refused, naming the rule."""
        with pytest.raises(TypeError, match=r"§1.9: subscribe\(\) requires a Subscriber, got None"):
            require_subscriber(None)

    @pytest.mark.parametrize(
        ("argument", "lacks"),
        [
            (object(), "on_subscribe, on_next, on_error, on_complete"),
            (OnlyOnNext(), "on_subscribe, on_error, on_complete"),
            (NotCallable(), "on_subscribe, on_next, on_error, on_complete"),
            (print, "on_subscribe, on_next, on_error, on_complete"),
        ],
        ids=["object", "only-on_next", "attributes-not-callable", "a-function"],
    )
    def test_spec109_a_non_subscriber_is_a_type_error_naming_it_and_the_methods(
        self, argument: object, lacks: str
    ) -> None:
        """The error says what was passed (its repr and type) and which methods it lacks."""
        with pytest.raises(TypeError) as raised:
            require_subscriber(argument)
        message = str(raised.value)
        assert message.startswith("§1.9: subscribe() requires a Subscriber")
        assert "on_subscribe, on_next, on_error and on_complete" in message
        assert f"(type {type(argument).__qualname__})" in message
        assert message.endswith(f"which lacks {lacks}")

    def test_a_long_repr_is_cut_to_a_line(self) -> None:
        """An argument with a huge repr does not flood the message."""

        class Loud:
            def __repr__(self) -> str:
                return "x" * 10_000

        with pytest.raises(TypeError) as raised:
            require_subscriber(Loud())
        assert len(str(raised.value)) < 400

    @pytest.mark.parametrize(
        "subscriber",
        [RecordingSubscriber(), BaseSubscriber()],
        ids=["RecordingSubscriber", "BaseSubscriber"],
    )
    def test_a_subscriber_passes(self, subscriber: object) -> None:
        """Anything with the four callable signal methods is accepted."""
        require_subscriber(subscriber)


# -- every publisher checks before it claims anything ------------------------------------------


def _async_numbers(loop: asyncio.AbstractEventLoop, pool: Executor) -> Publisher[int]:
    from reactive_streams.adapters.async_iterables import from_async_iterable

    async def agen() -> Any:
        for i in range(3):
            yield i

    return from_async_iterable(agen(), loop=loop)


def _observable(loop: asyncio.AbstractEventLoop, pool: Executor) -> Publisher[int]:
    reactivex = pytest.importorskip("reactivex")
    from reactive_streams.adapters.rx import from_observable

    return from_observable(reactivex.from_iterable(range(3)))


def _rx_processor(loop: asyncio.AbstractEventLoop, pool: Executor) -> Publisher[int]:
    pytest.importorskip("reactivex")
    from reactive_streams.adapters.rx import rx_processor

    processor: Any = rx_processor()  # unicast: one subscriber is all it serves
    from_iterable(numbers()).subscribe(processor)
    return processor  # type: ignore[no-any-return]


def _async_observable(loop: asyncio.AbstractEventLoop, pool: Executor) -> Publisher[int]:
    aioreactive = pytest.importorskip("aioreactive")
    from reactive_streams.adapters.aioreactive import from_async_observable

    return from_async_observable(aioreactive.from_iterable(range(3)), loop=loop)


PUBLISHERS: dict[str, Callable[[asyncio.AbstractEventLoop, Executor], Publisher[int]]] = {
    "from_iterable(generator)": lambda loop, pool: from_iterable(numbers()),
    "from_iterable(generator, executor)": lambda loop, pool: from_iterable(
        numbers(), executor=pool
    ),
    "publish_on": lambda loop, pool: publish_on(from_iterable(numbers()), pool),
    "checked": lambda loop, pool: checked(from_iterable(numbers())),
    "from_async_iterable(async generator)": _async_numbers,
    "from_observable": _observable,
    "rx_processor": _rx_processor,
    "from_async_observable": _async_observable,
}


@pytest.mark.parametrize("kind", list(PUBLISHERS))
def test_spec109_subscribe_with_a_non_subscriber_raises_and_claims_nothing(
    kind: str, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor
) -> None:
    """§1.9: subscribe(object()) raises TypeError naming the argument and the methods, before
    the publisher claims its one-shot source (or its one subscriber slot): the next, valid
    subscriber gets the whole stream."""
    publisher = PUBLISHERS[kind](loop, pool)
    with pytest.raises(TypeError, match="§1.9: .*got <object object at .*lacks on_subscribe"):
        publisher.subscribe(object())  # type: ignore[arg-type]
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    publisher.subscribe(sub)
    sub.await_terminal(10)
    assert sub.error is None
    assert sub.elements == [0, 1, 2] and sub.completed
    sub.assert_no_violations()


def test_spec109_the_tck_manual_publisher_checks_its_subscriber_too() -> None:
    """The TCK's own test double refuses a non-Subscriber the same way."""
    with pytest.raises(TypeError, match="§1.9: .*lacks on_subscribe"):
        ManualPublisher().subscribe(object())  # type: ignore[arg-type]
