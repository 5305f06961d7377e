"""IdentityProcessorVerification: a Processor verified as a Publisher (fed by a helper
publisher), as a whitebox Subscriber (observed through its output), and by the
processor-only rules (§1.4 to every subscriber, §4.1, §2.1 with late subscribers)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from rs_core._demand import UNBOUNDED
from rs_core.api import Processor, Publisher, Subscriber, Subscription
from rs_core.publishers._iterable import IterablePublisher
from rs_core.tck._env import (
    ManualPublisher,
    ManualSubscriber,
    TCKFailure,
    TestEnvironment,
    rule,
    skip,
)
from rs_core.tck._publisher import PublisherVerification
from rs_core.tck._subscriber import SubscriberWhiteboxVerification, WhiteboxSubscriberProbe

__all__ = ["IdentityProcessorVerification"]

T = TypeVar("T")


class _Elements(Generic[T]):
    """``create_element(0..n-1)``, re-iterable and lazy (``n`` may be 2**31 - 1)."""

    def __init__(self, n: int, create: Callable[[int], T]) -> None:
        self._n = n
        self._create = create

    def __iter__(self) -> Iterator[T]:
        return (self._create(i) for i in range(self._n))


class IdentityProcessorVerification(Generic[T]):
    """Subclass it, implement ``create_identity_processor(buffer_size)`` and
    ``create_element(i)``, and name the subclass ``Test…``.

    Optional: ``create_failed_publisher()``, ``max_elements_from_publisher()``,
    ``max_supported_subscribers()`` (default: unbounded; 1 skips the multi-subscriber tests),
    ``processor_buffer_size()`` (default 16), ``env()``.
    """

    def create_identity_processor(self, buffer_size: int) -> Processor[T, T]:
        raise NotImplementedError

    def create_element(self, i: int) -> T:
        raise NotImplementedError

    def create_failed_publisher(self) -> Publisher[T] | None:
        return None

    def max_elements_from_publisher(self) -> int:
        return UNBOUNDED - 1

    def max_supported_subscribers(self) -> int:
        return UNBOUNDED

    def processor_buffer_size(self) -> int:
        return 16

    def env(self) -> TestEnvironment:
        return TestEnvironment()

    # -- the two views the delegated tests run on -------------------------------------------------

    def _publisher_view(self) -> PublisherVerification[T]:
        return _AsPublisher(self)

    def _subscriber_view(self) -> SubscriberWhiteboxVerification[T]:
        return _AsSubscriber(self)

    # -- processor-only rules ---------------------------------------------------------------------

    def _processor_with_upstream(self) -> tuple[Processor[T, T], ManualPublisher[T]]:
        processor = self.create_identity_processor(self.processor_buffer_size())
        upstream: ManualPublisher[T] = ManualPublisher()
        upstream.subscribe(processor)
        return processor, upstream

    def _need_subscribers(self, n: int) -> None:
        if self.max_supported_subscribers() < n:
            raise skip(
                f"needs {n} subscribers; max_supported_subscribers() is "
                f"{self.max_supported_subscribers()}"
            )

    @rule("1.4")
    def test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error(  # noqa: E501
        self,
    ) -> None:
        self._need_subscribers(2)
        processor, upstream = self._processor_with_upstream()
        env = self.env()
        subs = [ManualSubscriber[T](env), ManualSubscriber[T](env)]
        for sub in subs:
            processor.subscribe(sub)
            sub.expect_subscribed()
            sub.request(1)
        error = RuntimeError("TCK: a test error for §1.4")
        upstream.send_error(error)
        for sub in subs:
            got = sub.expect_error("1.4")
            if got is not error:
                raise TCKFailure(f"§1.4: a subscriber got {got!r}, not the upstream error")

    @rule("4.1")
    def test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream(  # noqa: E501
        self,
    ) -> None:
        processor, upstream = self._processor_with_upstream()
        sub = ManualSubscriber[T](self.env())
        processor.subscribe(sub)
        sub.expect_subscribed()
        error = RuntimeError("TCK: a test error for §4.1")
        upstream.send_error(error)
        got = sub.expect_error("4.1")
        if got is not error:
            raise TCKFailure(f"§4.1: the subscriber got {got!r}, not the upstream error")

    @rule("2.1")
    def test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago(
        self,
    ) -> None:
        self._need_subscribers(2)
        processor, upstream = self._processor_with_upstream()
        env = self.env()
        first = ManualSubscriber[T](env)
        processor.subscribe(first)
        first.request(10)  # old outstanding demand
        assert upstream.subscription is not None
        upstream.subscription.expect_request(env, "2.1")
        upstream.send_next(self.create_element(0))
        first.next_element("2.1")
        second = ManualSubscriber[T](env)
        processor.subscribe(second)
        second.request(10)
        for i in range(1, 4):
            if not upstream.subscription.await_total(env, i + 1):
                raise TCKFailure("§2.1: the processor stopped requesting from upstream")
            upstream.send_next(self.create_element(i))
        first.next_elements(3, "2.1")
        second.next_elements(3, "2.1")
        upstream.send_complete()
        first.expect_completion("2.1")
        second.expect_completion("2.1")


class _AsPublisher(PublisherVerification[T]):
    """The processor as a Publisher: each publisher of n elements is a fresh processor fed by
    a helper publisher of n elements."""

    def __init__(self, outer: IdentityProcessorVerification[T]) -> None:
        self._outer = outer

    def create_publisher(self, elements: int) -> Publisher[T]:
        processor = self._outer.create_identity_processor(self._outer.processor_buffer_size())
        IterablePublisher(_Elements(elements, self._outer.create_element)).subscribe(processor)
        return processor

    def create_failed_publisher(self) -> Publisher[T] | None:
        return self._outer.create_failed_publisher()

    def max_elements_from_publisher(self) -> int:
        return self._outer.max_elements_from_publisher()

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
    """Subscribes to the processor's output and reports to the probe."""

    def __init__(self, probe: WhiteboxSubscriberProbe[T]) -> None:
        self._probe = probe

    def on_subscribe(self, subscription: Subscription) -> None:
        self._probe.register_on_subscribe(_Puppet(subscription))

    def on_next(self, element: T) -> None:
        self._probe.register_on_next(element)

    def on_error(self, error: Exception) -> None:
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._probe.register_on_complete()


class _ProcessorUnderTest(Generic[T]):
    """The processor's Subscriber side, with its output observed by the probe."""

    def __init__(self, processor: Processor[T, T], probe: WhiteboxSubscriberProbe[T]) -> None:
        self._processor = processor
        self._probe = probe
        self._observed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self._processor.on_subscribe(subscription)
        if not self._observed:
            self._observed = True
            self._processor.subscribe(_Output(self._probe))

    def on_next(self, element: T) -> None:
        self._processor.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._processor.on_error(error)

    def on_complete(self) -> None:
        self._processor.on_complete()


class _AsSubscriber(SubscriberWhiteboxVerification[T]):
    def __init__(self, outer: IdentityProcessorVerification[T]) -> None:
        self._outer = outer

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        processor = self._outer.create_identity_processor(self._outer.processor_buffer_size())
        return _ProcessorUnderTest(processor, probe)

    def create_element(self, i: int) -> T:
        return self._outer.create_element(i)

    def env(self) -> TestEnvironment:
        return self._outer.env()


def _delegate(
    name: str, view: str, fn: Any
) -> Callable[[IdentityProcessorVerification[Any]], None]:
    def test(self: IdentityProcessorVerification[Any]) -> None:
        getattr(getattr(self, view)(), name)()

    test.__name__ = name
    test.__qualname__ = f"IdentityProcessorVerification.{name}"
    test.__doc__ = f"Delegated: {view.strip('_').replace('_', ' ')} test {name}."
    test.rule = fn.rule  # type: ignore[attr-defined]
    test.kind = fn.kind  # type: ignore[attr-defined]
    return test


for _cls, _view in (
    (PublisherVerification, "_publisher_view"),
    (SubscriberWhiteboxVerification, "_subscriber_view"),
):
    for _name, _fn in list(vars(_cls).items()):
        if _name.startswith("test_") and not hasattr(IdentityProcessorVerification, _name):
            setattr(IdentityProcessorVerification, _name, _delegate(_name, _view, _fn))
