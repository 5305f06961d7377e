"""IdentityProcessorVerification: a Processor verified as a Publisher (fed by a helper
publisher of ``create_element(i)``), as a whitebox Subscriber (its output observed by a
probe), and by the processor-only tests (§1.4 to every subscriber, §4.1, §2.1 with a late
subscriber), following the JVM TCK's ``IdentityProcessorVerification``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from reactive_streams._demand import UNBOUNDED
from reactive_streams.api import Processor, Publisher, Subscriber, Subscription
from reactive_streams.publishers._iterable import IterablePublisher
from reactive_streams.publishers._publish_on import publish_on
from reactive_streams.tck._env import TCKFailure, TestEnvironment, rule, skip
from reactive_streams.tck._manual import ManualPublisher, ManualSubscriber, ManualSubscription
from reactive_streams.tck._publisher import PublisherVerification
from reactive_streams.tck._subscriber_probe import WhiteboxSubscriberProbe
from reactive_streams.tck._subscriber_whitebox import SubscriberWhiteboxVerification

__all__ = ["IdentityProcessorVerification"]

T = TypeVar("T")

_COORDINATED = (
    "if the processor emits only once every subscriber has requested, override "
    "does_coordinated_emission() to return True"
)


class _Elements(Generic[T]):
    """``create_element(0..n-1)``, re-iterable and lazy (``n`` may be 2**31 - 1)."""

    def __init__(self, n: int, create: Callable[[int], T]) -> None:
        self._n = n
        self._create = create

    def __iter__(self) -> Iterator[T]:
        return (self._create(i) for i in range(self._n))


class IdentityProcessorVerification(Generic[T]):
    """A Processor that passes its input through unchanged, verified against every rule.

    Subclass it, implement ``create_identity_processor(buffer_size)`` (a fresh processor
    able to buffer ``buffer_size`` elements) and ``create_element(i)``, and name the
    subclass ``Test…``. Every PublisherVerification and SubscriberWhiteboxVerification test
    runs over the processor under the same name, plus the processor-only tests.

    Optional hooks: ``create_failed_publisher()``, ``max_elements_from_publisher()``,
    ``bounded_depth_of_on_next_and_request_recursion()``, ``skip_stochastic_tests()``,
    ``max_supported_subscribers()`` (default unbounded; below 2 skips the tests needing two
    subscribers), ``does_coordinated_emission()``, ``processor_buffer_size()`` (default 16),
    ``env()``.
    """

    def create_identity_processor(self, buffer_size: int) -> Processor[T, T]:
        raise NotImplementedError

    def create_element(self, i: int) -> T:
        raise NotImplementedError

    def create_failed_publisher(self) -> Publisher[T] | None:
        return None

    def max_elements_from_publisher(self) -> int:
        return UNBOUNDED - 1

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        return 1

    def skip_stochastic_tests(self) -> bool:
        return False

    def max_supported_subscribers(self) -> int:
        return UNBOUNDED

    def does_coordinated_emission(self) -> bool:
        """True if the processor emits an element only once all its subscribers requested."""
        return False

    def processor_buffer_size(self) -> int:
        return 16

    def env(self) -> TestEnvironment:
        return TestEnvironment()

    # -- the two views the delegated tests run on -------------------------------------------------

    def _publisher_view(self) -> PublisherVerification[T]:
        return _AsPublisher(self)

    def _subscriber_view(self) -> SubscriberWhiteboxVerification[T]:
        return _AsSubscriber(self)

    # -- processor-only tests -------------------------------------------------------------------

    def _need_subscribers(self, n: int) -> None:
        if self.max_supported_subscribers() < n:
            raise skip(
                f"needs {n} subscribers at once; max_supported_subscribers() is "
                f"{self.max_supported_subscribers()}"
            )

    @rule("1.4")
    def test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error(  # noqa: E501
        self,
    ) -> None:
        """An upstream error reaches both of two subscribers as the same exception."""
        self._need_subscribers(2)
        setup = _Setup(self, "1.4")
        sub1, sub2 = setup.new_subscriber(), setup.new_subscriber()
        if self.does_coordinated_emission():
            sub1.request(1)
            sub2.request(1)
            setup.expect_request()
            x = setup.send_next()
            setup.expect_next(sub1, x)
            setup.expect_next(sub2, x)
            sub1.request(1)
            sub2.request(1)
        else:
            sub1.request(1)
            setup.expect_request(_COORDINATED)
            x = setup.send_next()
            setup.expect_next(sub1, x, _COORDINATED)
            sub1.request(1)
        error = RuntimeError("TCK: a test error for §1.4")
        setup.upstream.send_error(error)
        for sub in (sub1, sub2):
            got = sub.expect_error("1.4")
            if got is not error:
                raise TCKFailure(
                    f"§1.4: a subscriber got on_error({got!r}), not the upstream error"
                )

    @rule("4.1")
    def test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream(  # noqa: E501
        self,
    ) -> None:
        """An upstream on_error reaches a subscriber that never requested anything."""
        setup = _Setup(self, "4.1")
        sub = setup.new_subscriber()
        error = RuntimeError("TCK: a test error for §4.1")
        setup.upstream.send_error(error)
        got = sub.expect_error("4.1")
        if got is not error:
            raise TCKFailure(f"§4.1: the subscriber got on_error({got!r}), not the upstream error")

    @rule("2.1")
    def test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago(
        self,
    ) -> None:
        """Demand of an early subscriber keeps upstream requested while a second joins."""
        self._need_subscribers(2)
        setup = _Setup(self, "2.1")
        sub1 = setup.new_subscriber()
        sub1.request(20)
        total = setup.expect_request()
        setup.expect_next(sub1, setup.send_next())
        if total == 1:
            total += setup.expect_request()
        setup.expect_next(sub1, setup.send_next())
        if total == 2:
            total += setup.expect_request()
        sub2 = setup.new_subscriber()
        if self.does_coordinated_emission():
            sub2.expect_none("2.1", "no element before the second subscriber requests")
            sub2.request(1)
            z = setup.send_next()
            setup.expect_next(sub1, z)
            setup.expect_next(sub2, z)
        else:
            z = setup.send_next()
            setup.expect_next(sub1, z, _COORDINATED)
            sub2.expect_none("2.1", "no element before the second subscriber requests")
            sub2.request(1)
            setup.expect_next(sub2, z)
        if total == 3:
            setup.expect_request()
        setup.upstream.send_complete()
        sub1.expect_completion("2.1")
        sub2.expect_completion("2.1")


class _Setup(Generic[T]):
    """A fresh processor fed by a ManualPublisher the test signals through."""

    def __init__(self, outer: IdentityProcessorVerification[T], rule_id: str) -> None:
        self.env = outer.env()
        self.rule = rule_id
        self._create = outer.create_element
        self._index = 0  # owned: the test thread
        self.processor = outer.create_identity_processor(outer.processor_buffer_size())
        self.upstream: ManualPublisher[T] = ManualPublisher()
        self.upstream.subscribe(self.processor)
        assert self.upstream.subscription is not None
        self.subscription: ManualSubscription = self.upstream.subscription

    def new_subscriber(self) -> ManualSubscriber[T]:
        sub = ManualSubscriber[T](self.env)
        self.processor.subscribe(sub)
        sub.expect_subscribed(self.rule)
        return sub

    def expect_request(self, hint: str = "") -> int:
        try:
            return self.subscription.expect_request(self.env, self.rule)
        except TCKFailure as failure:
            if hint:
                raise TCKFailure(f"{failure} ({hint})") from failure
            raise

    def send_next(self) -> T:
        element = self._create(self._index)
        self._index += 1
        self.upstream.send_next(element)
        return element

    def expect_next(self, sub: ManualSubscriber[T], element: T, hint: str = "") -> None:
        try:
            got = sub.next_element(self.rule, f"on_next({element!r})")
        except TCKFailure as failure:
            if hint:
                raise TCKFailure(f"{failure} ({hint})") from failure
            raise
        if got != element:
            raise TCKFailure(f"§{self.rule}: got on_next({got!r}) downstream, expected {element!r}")


class _AsPublisher(PublisherVerification[T]):
    """The processor as a Publisher: each publisher of n elements is a fresh processor fed by
    a helper publisher of n elements that signals on an executor, as the JVM's
    ``createHelperPublisher()``: the processor's upstream ``on_next`` comes from another
    thread, after its ``request()`` returned. One executor per test, shut down by ``close``."""

    def __init__(self, outer: IdentityProcessorVerification[T]) -> None:
        self._outer = outer
        self._executor: ThreadPoolExecutor | None = None

    def create_publisher(self, elements: int) -> Publisher[T]:
        if self._executor is None:  # owned: the test thread
            self._executor = ThreadPoolExecutor(2, thread_name_prefix="rs-tck-helper")
        processor = self._outer.create_identity_processor(self._outer.processor_buffer_size())
        helper = IterablePublisher(_Elements(elements, self._outer.create_element))
        publish_on(helper, self._executor).subscribe(processor)
        return processor

    def close(self) -> None:
        """Shut the helper's executor down without waiting: drains already queued still run
        (a cancelled one does nothing); one scheduled later ends its subscription."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def create_failed_publisher(self) -> Publisher[T] | None:
        return self._outer.create_failed_publisher()

    def max_elements_from_publisher(self) -> int:
        return self._outer.max_elements_from_publisher()

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        return self._outer.bounded_depth_of_on_next_and_request_recursion()

    def skip_stochastic_tests(self) -> bool:
        return self._outer.skip_stochastic_tests()

    def env(self) -> TestEnvironment:
        return self._outer.env()


class _Puppet:
    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription

    def trigger_request(self, n: int) -> None:
        self._subscription.request(n)

    def signal_cancel(self) -> None:
        self._subscription.cancel()


class _Output(Generic[T]):
    """Subscribes to the processor's output and reports to the probe; requests only when
    the puppet says so; cancels a second subscription (it must pass §2.5 itself)."""

    def __init__(self, probe: WhiteboxSubscriberProbe[T]) -> None:
        self._probe = probe
        self._lock = threading.Lock()
        self._subscribed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("§2.13: on_subscribe() requires a Subscription, got None")
        with self._lock:
            second, self._subscribed = self._subscribed, True  # under _lock
        if second:
            subscription.cancel()  # §2.5
            return
        self._probe.register_on_subscribe(_Puppet(subscription))

    def on_next(self, element: T) -> None:
        self._probe.register_on_next(element)

    def on_error(self, error: Exception) -> None:
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._probe.register_on_complete()


class _AsSubscriber(SubscriberWhiteboxVerification[T]):
    """The processor as a Subscriber: its output is subscribed at once, and the probe sees
    what comes out; the puppet requests and cancels on the output side."""

    def __init__(self, outer: IdentityProcessorVerification[T]) -> None:
        self._outer = outer

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        processor = self._outer.create_identity_processor(self._outer.processor_buffer_size())
        processor.subscribe(_Output(probe))
        return processor

    def create_element(self, i: int) -> T:
        return self._outer.create_element(i)

    def env(self) -> TestEnvironment:
        return self._outer.env()

    def close(self) -> None:
        """Nothing to release."""


def _delegate(
    name: str, view: str, fn: Any
) -> Callable[[IdentityProcessorVerification[Any]], None]:
    def test(self: IdentityProcessorVerification[Any]) -> None:
        target = getattr(self, view)()
        try:
            getattr(target, name)()
        finally:
            target.close()

    what = (
        "PublisherVerification" if view == "_publisher_view" else "SubscriberWhiteboxVerification"
    )
    test.__name__ = name
    test.__qualname__ = f"IdentityProcessorVerification.{name}"
    test.__doc__ = f"{what} over the processor: {(fn.__doc__ or name).strip()}"
    test.rule = fn.rule  # type: ignore[attr-defined]
    test.kind = fn.kind  # type: ignore[attr-defined]
    return test


for _cls, _view in (
    (PublisherVerification, "_publisher_view"),
    (SubscriberWhiteboxVerification, "_subscriber_view"),
):
    for _base in _cls.__mro__:  # the tests live in the verification's base classes
        for _name, _fn in list(vars(_base).items()):
            if _name.startswith("test_") and not hasattr(IdentityProcessorVerification, _name):
                setattr(IdentityProcessorVerification, _name, _delegate(_name, _view, _fn))
