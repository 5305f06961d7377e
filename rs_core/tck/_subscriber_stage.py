"""What both Subscriber verifications share: the stage (the subscriber under test, subscribed
to a ManualPublisher the test signals through) and the hooks ``create_element`` and ``env``.

Everything here runs on the test thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from reactive_streams.api import Subscriber
from reactive_streams.tck._env import TCKFailure, TestEnvironment
from reactive_streams.tck._manual import ManualPublisher, ManualSubscription

__all__ = ["Stage", "SubscriberVerificationBase", "expect_type_error"]

T = TypeVar("T")


class Stage(Generic[T]):
    """One subscriber under test, subscribed to a ManualPublisher the test signals through.

    Every call into the subscriber must return normally: a raise fails the test under the
    rule the test checks (it would be a §2.13 violation in the subscriber).
    """

    def __init__(
        self,
        env: TestEnvironment,
        subscriber: Subscriber[T],
        create_element: Callable[[int], T],
        rule_id: str,
    ) -> None:
        self.env = env
        self.subscriber = subscriber
        self.rule = rule_id
        self._create = create_element
        self._next_index = 0  # owned: the test thread
        self.publisher: ManualPublisher[T] = ManualPublisher()
        self.call("on_subscribe", lambda: self.publisher.subscribe(subscriber))
        assert self.publisher.subscription is not None
        self.subscription: ManualSubscription = self.publisher.subscription

    def call(self, signal: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:
            raise TCKFailure(
                f"§{self.rule}: the subscriber raised {exc!r} from {signal}; signals must "
                "return normally (§2.13)"
            ) from exc

    def next_element(self) -> T:
        element = self._create(self._next_index)
        self._next_index += 1
        return element

    def signal_next(self) -> T:
        """Send the next element and return it."""
        element = self.next_element()
        self.call("on_next", lambda: self.publisher.send_next(element))
        return element

    def send_complete(self) -> None:
        self.call("on_complete", self.publisher.send_complete)
        self.check_terminal_calls()

    def send_error(self, error: Exception) -> None:
        self.call("on_error", lambda: self.publisher.send_error(error))
        self.check_terminal_calls()

    def check_terminal_calls(self) -> None:
        calls = self.subscription.calls_in_terminal
        if calls:
            raise TCKFailure(
                f"§2.3: the subscriber called {', '.join(calls)}: a subscriber must not call "
                "its Subscription or Publisher from on_complete or on_error"
            )

    def expect_request(self, rule_id: str | None = None) -> int:
        return self.subscription.expect_request(self.env, rule_id or self.rule)

    def expect_cancelled(self, rule_id: str | None = None) -> None:
        self.subscription.expect_cancelled(self.env, rule_id or self.rule)

    def second_subscription(self, flag_requests: bool) -> ManualSubscription:
        """Offer the subscriber a second subscription; it must cancel it (§2.5)."""
        second = ManualSubscription(name="a second subscription")
        self.call("a second on_subscribe", lambda: self.subscriber.on_subscribe(second))
        second.expect_cancelled(self.env, "2.5")
        if flag_requests and second.all_requests:
            raise TCKFailure(
                f"§2.5: the subscriber called request({second.all_requests[0]!r}) on a second "
                "subscription instead of only cancelling it"
            )
        return second


def expect_type_error(rule_id: str, what: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except TypeError:
        return
    except Exception as exc:
        raise TCKFailure(f"§{rule_id}: {what} raised {exc!r}, not TypeError") from exc
    raise TCKFailure(f"§{rule_id}: {what} returned instead of raising TypeError")


class SubscriberVerificationBase(Generic[T]):
    def create_element(self, i: int) -> T:
        """The ``i``-th element to send to the subscriber under test (never ``None``)."""
        raise NotImplementedError

    def env(self) -> TestEnvironment:
        return TestEnvironment()
