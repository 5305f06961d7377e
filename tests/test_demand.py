"""reactive_streams._demand: property tests of the only demand arithmetic in the project."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactive_streams import UNBOUNDED, IllegalRequestError, ProtocolViolation
from reactive_streams._demand import Replenisher, add_cap, check_request, produced
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import RecordingSubscriber

demand = st.integers(min_value=0, max_value=UNBOUNDED)
positive = st.integers(min_value=1, max_value=2**80)


def test_unbounded_is_long_max_value() -> None:
    """§3.17: UNBOUNDED is 2**63 - 1 on every platform (not sys.maxsize)."""
    assert UNBOUNDED == 2**63 - 1


# -- add_cap ------------------------------------------------------------------------------------


@given(demand, st.integers(min_value=0, max_value=2**80))
def test_add_cap_is_the_sum_saturated_at_unbounded(current: int, n: int) -> None:
    """§3.17: add_cap is current + n, capped at UNBOUNDED."""
    assert add_cap(current, n) == min(current + n, UNBOUNDED)


@given(positive)
def test_add_cap_keeps_unbounded(n: int) -> None:
    """§3.17: UNBOUNDED plus anything stays UNBOUNDED."""
    assert add_cap(UNBOUNDED, n) == UNBOUNDED


@given(demand, demand)
def test_add_cap_is_commutative_and_monotone(a: int, b: int) -> None:
    """add_cap is commutative and never decreases demand."""
    assert add_cap(a, b) == add_cap(b, a)
    assert add_cap(a, b) >= max(a, b)


@given(st.lists(positive, min_size=1, max_size=50))
def test_many_requests_saturate_instead_of_growing(requests: list[int]) -> None:
    """§3.17: any sequence of requests stays within UNBOUNDED (Python ints never overflow)."""
    total = 0
    for n in requests:
        total = add_cap(total, n)
        assert 0 < total <= UNBOUNDED
    assert total == min(sum(requests), UNBOUNDED)


# -- produced -----------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=UNBOUNDED - 1), st.integers(min_value=0, max_value=2**70))
def test_produced_subtracts_and_floors_at_zero(current: int, n: int) -> None:
    """produced is current - n, never below 0."""
    assert produced(current, n) == max(current - n, 0)


@given(st.integers(min_value=0, max_value=2**70))
def test_produced_keeps_unbounded(n: int) -> None:
    """§3.17: UNBOUNDED demand is effectively unbounded: emitting never consumes it."""
    assert produced(UNBOUNDED, n) == UNBOUNDED


@given(demand, st.integers(min_value=0, max_value=UNBOUNDED))
def test_produced_after_add_cap_never_goes_negative(current: int, n: int) -> None:
    """Requesting then emitting the same amount leaves the original demand, or UNBOUNDED."""
    after = produced(add_cap(current, n), n)
    assert after == (UNBOUNDED if current + n >= UNBOUNDED else current)


# -- check_request ------------------------------------------------------------------------------


@given(positive)
def test_check_request_accepts_every_positive_int(n: int) -> None:
    """§3.9: any n > 0 is valid, including n far beyond UNBOUNDED."""
    assert check_request(n) is None


def test_request_beyond_long_max_is_unbounded_not_an_error() -> None:
    """§3.17: request(2**70) is valid and counts as UNBOUNDED."""
    assert check_request(2**70) is None
    assert add_cap(0, 2**70) == UNBOUNDED
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(2**70)
    from_iterable(range(5)).subscribe(subscriber)
    assert subscriber.elements == [0, 1, 2, 3, 4]
    assert subscriber.completed


@given(st.integers(max_value=0))
def test_check_request_rejects_non_positive(n: int) -> None:
    """§3.9: n <= 0 is an IllegalRequestError (a ValueError) naming rule 3.9."""
    error = check_request(n)
    assert isinstance(error, IllegalRequestError)
    assert isinstance(error, ValueError)
    assert isinstance(error, ProtocolViolation)
    assert error.rule == "3.9"
    assert str(error).startswith("§3.9: ")
    assert "non-positive" in str(error)  # §3.9: the message SHOULD explain


@pytest.mark.parametrize(
    "n", [True, False, 1.0, 2.5, float("inf"), "1", None, Decimal(3), Fraction(4, 1), b"1", [1]]
)
def test_check_request_rejects_bool_and_non_int(n: object) -> None:
    """§3.9 (our reading): bool and any non-int are rejected like n <= 0."""
    error = check_request(n)
    assert isinstance(error, IllegalRequestError)
    assert error.rule == "3.9"
    assert str(error).startswith("§3.9: ")
    assert type(n).__name__ in str(error)


def test_check_request_returns_the_error_without_raising() -> None:
    """check_request returns the error for the drain to deliver via on_error; it never raises."""
    assert isinstance(check_request(0), IllegalRequestError)
    assert isinstance(check_request(-(2**100)), IllegalRequestError)


# -- Replenisher ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("prefetch", "limit"), [(1, 1), (2, 2), (4, 3), (8, 6), (256, 192)])
def test_replenisher_default_limit_is_75_percent(prefetch: int, limit: int) -> None:
    """The default limit is prefetch - prefetch // 4 (Reactor's and RxJava's 75%)."""
    assert Replenisher(prefetch).limit == limit


@given(
    st.integers(min_value=1, max_value=64).flatmap(
        lambda prefetch: st.tuples(
            st.just(prefetch),
            st.one_of(st.none(), st.integers(min_value=1, max_value=prefetch)),
            st.lists(st.integers(min_value=1, max_value=prefetch), max_size=60),
        )
    )
)
def test_replenisher_keeps_outstanding_within_the_window(
    case: tuple[int, int | None, list[int]],
) -> None:
    """Never more than prefetch requested ahead of consumption, and more than prefetch - limit
    after every consumed() call: the window is refilled at the threshold, never beyond."""
    prefetch, limit, batches = case
    replenisher = Replenisher(prefetch, limit)
    outstanding = prefetch  # requested up front
    for n in batches:
        n = min(n, outstanding)  # a consumer cannot consume what was not requested
        if n == 0:
            continue
        outstanding -= n
        due = replenisher.consumed(n)
        assert due >= 0
        outstanding += due
        assert outstanding <= prefetch
        assert outstanding > prefetch - replenisher.limit


def test_replenisher_requests_limit_after_limit_consumed() -> None:
    """One element at a time: nothing until limit elements, then exactly limit."""
    replenisher = Replenisher(8)
    assert [replenisher.consumed() for _ in range(6)] == [0, 0, 0, 0, 0, 6]
    assert [replenisher.consumed() for _ in range(6)] == [0, 0, 0, 0, 0, 6]


@given(st.integers(min_value=1, max_value=1000))
def test_replenisher_with_unbounded_prefetch_never_requests_again(n: int) -> None:
    """§3.17: with an UNBOUNDED window nothing is ever re-requested."""
    replenisher = Replenisher(UNBOUNDED)
    assert replenisher.consumed(n) == 0


@pytest.mark.parametrize(
    ("prefetch", "limit"), [(0, None), (-1, None), (True, None), (2.0, None), (4, 0), (4, 5)]
)
def test_replenisher_rejects_bad_windows(prefetch: object, limit: object) -> None:
    """A non-positive or non-int prefetch, or a limit outside 1..prefetch, is a ValueError."""
    with pytest.raises(ValueError):
        Replenisher(prefetch, limit)  # type: ignore[arg-type]


def test_replenisher_until_due_counts_down_to_the_next_request() -> None:
    """until_due is how many more consumed elements make consumed() return a request: a
    consumer reporting in rounds of until_due requests exactly at the limit."""
    replenisher = Replenisher(8)  # limit 6
    assert replenisher.until_due == 6
    assert replenisher.consumed(2) == 0 and replenisher.until_due == 4
    assert replenisher.consumed(4) == 6 and replenisher.until_due == 6
    assert Replenisher(UNBOUNDED).until_due == UNBOUNDED


def test_replenisher_ran_dry_asks_for_the_rest_only_before_the_last_request_is_answered() -> None:
    """ran_dry() returns what was consumed since the last request when all of it was
    already queued when that request was made (none of the request has arrived: the
    upstream is not producing alongside); once an element arrived after the request, or
    right after a top-up, nothing."""
    window = Replenisher(8)  # limit 6
    assert window.ran_dry() == 0  # nothing consumed
    assert window.consumed(6, queued=2) == 6  # a whole window arrived at once
    assert window.consumed(2) == 0
    assert window.ran_dry() == 2  # the 2 were queued at the request: nothing arrived since
    assert window.until_due == 6  # counted as a request: the window starts afresh
    assert window.ran_dry() == 0
    assert window.consumed(1) == 0  # arrived after the top-up
    assert window.ran_dry() == 0
    slow = Replenisher(8)  # one element at a time: each arrived after the last request
    assert [slow.consumed(1) for _ in range(6)] == [0, 0, 0, 0, 0, 6]
    for _ in range(5):
        assert slow.consumed(1) == 0
        assert slow.ran_dry() == 0  # never a request per element
    unbounded = Replenisher(UNBOUNDED)
    unbounded.consumed(5)
    assert unbounded.ran_dry() == 0  # §3.17: nothing is ever re-requested


@given(
    st.integers(min_value=1, max_value=64).flatmap(
        lambda prefetch: st.tuples(
            st.just(prefetch),
            st.one_of(st.none(), st.integers(min_value=1, max_value=prefetch)),
            st.lists(  # 0 (running dry) often: a top-up needs the queue empty then
                st.one_of(st.just(0), st.integers(min_value=-64, max_value=64)), max_size=80
            ),
        )
    )
)
def test_replenisher_running_dry_keeps_the_window_and_asks_once_per_replenishment(
    case: tuple[int, int | None, list[int]],
) -> None:
    """A queue in front of a consumer: elements arrive (a positive step, as far as was
    requested), are consumed (a negative step), and the consumer runs dry (0, when the
    queue is empty). What the returned amounts add up to never runs more than prefetch
    ahead of consumption; ran_dry() asks only when nothing arrived since the last request,
    and at most once per replenishment (never a request per element)."""
    prefetch, limit, steps = case
    window = Replenisher(prefetch, limit)
    total, consumed, arrived, queued = prefetch, 0, 0, 0
    arrived_since_request = False
    top_up_allowed = True  # one top-up per request made at the limit (or the first)
    for step in steps:
        if step > 0:
            n = min(step, total - arrived)  # never more than requested (§1.1)
            arrived += n
            queued += n
            arrived_since_request = arrived_since_request or n > 0
        elif step < 0:
            n = min(-step, queued)
            if not n:
                continue
            queued -= n
            consumed += n
            due = window.consumed(n, queued)
            if due:
                total += due
                arrived_since_request = False
                top_up_allowed = True
        elif queued == 0:
            due = window.ran_dry()
            if due:
                assert not arrived_since_request and top_up_allowed
                top_up_allowed = False
                total += due
        assert total - consumed <= prefetch
        assert window.until_due == window.limit - (prefetch - (total - consumed))
