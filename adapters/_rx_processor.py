"""``rx_processor``: an RxPY operator chain as a Processor, demand kept on both sides.

Upstream is requested only for what the output buffer has room for, given the most outputs
one input has made so far. The demand policy and its bound: docs/adapters.md, "rx_processor".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final, overload

import reactivex
from reactivex import Observable
from reactivex.abc import DisposableBase, ObserverBase
from reactivex.disposable import Disposable
from reactivex.scheduler import CurrentThreadScheduler, TimeoutScheduler
from reactivex.scheduler.periodicscheduler import PeriodicScheduler
from reactivex.subject import Subject

from reactive_streams._demand import add_cap
from reactive_streams._drain import DrainSubscription
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    CANCELLED,
    cancel_quietly,
    reject,
    report_dropped,
    require_element,
    require_error,
    require_subscriber,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.adapters._rx_buffer import _BufferSource, _dispose, _Stop
from reactive_streams.api import Processor, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation

__all__ = ["RxProcessor", "rx_processor"]

T = TypeVar("T")
R = TypeVar("R")

if TYPE_CHECKING:  # element types of rx_processor's overloads; one no operator pins is Any
    from typing_extensions import TypeVar as DefaultingTypeVar  # (PEP 696; no runtime need)

    A = DefaultingTypeVar("A", default=Any)
    B = DefaultingTypeVar("B", default=Any)
    C = DefaultingTypeVar("C", default=Any)
    D = DefaultingTypeVar("D", default=Any)
    E = DefaultingTypeVar("E", default=Any)
    F = DefaultingTypeVar("F", default=Any)
    G = DefaultingTypeVar("G", default=Any)


class _ChainScheduler(CurrentThreadScheduler, PeriodicScheduler):
    """The default scheduler of one processor's chain: a trampoline per thread of its own.

    Work an operator schedules to run now (``reactivex.of`` inside ``flat_map``, the prefix of
    ``start_with``) then runs inside the input's ``on_next``, even when another Rx trampoline
    is running on this thread (an upstream that is an Rx source, or another processor): the
    thread's shared trampoline would queue it until that one's current action returned,
    after ``on_next``. Work due later, and periodic work (``interval``, ``sample``), goes to
    the ``TimeoutScheduler``, where Rx's timed operators put it by default, and never blocks
    the input's thread.
    """

    def schedule_periodic(self, period: Any, action: Any, state: Any = None) -> DisposableBase:
        return TimeoutScheduler.singleton().schedule_periodic(period, action, state)

    def schedule_absolute(self, duetime: Any, action: Any, state: Any = None) -> DisposableBase:
        if self.to_datetime(duetime) > self.now:
            return TimeoutScheduler.singleton().schedule_absolute(duetime, action, state)
        return super().schedule_absolute(duetime, action, state)


@final
class RxProcessor(Generic[T, R]):
    """A Processor running an RxPY operator chain with demand kept on both sides.

    Outputs wait in a buffer of ``buffer_size`` that the subscriber drains. Upstream is
    asked only for what fits: ``(buffer_size - queued) // E - outstanding`` inputs, in
    batches of at least 75% of ``buffer_size // E``, ``E`` being the most outputs one input
    has made inside its signal (the first input is requested alone, to measure it), so the
    buffer stays within ``buffer_size`` but for an input that expands more than any before
    it (§1.1). An output outside an input's signals (``delay``, ``observe_on``) fails the
    stream with a ``RuntimeError``; outputs no request paces (at the input's end, while the
    chain is subscribed) fail it with ``OverflowViolation`` past ``buffer_size`` beyond
    demand; so does an operator that subscribes to the input again (``repeat``, ``retry``).
    Unicast: a second Subscriber is rejected (§1.11). Signals reach the subscriber on the
    thread of upstream's ``on_next`` or of ``request``; errors follow the buffered outputs
    (§1.4); the chain ending by itself or a cancel cancels upstream (§3.12). Rules: §1.1,
    §1.3, §1.9, §2.5, §2.7, §2.13, §3.13. The policy's bound, and the operators that need a
    word: docs/adapters.md, "rx_processor".
    """

    def __init__(self, operators: tuple[Callable[[Any], Any], ...], buffer_size: int) -> None:
        if type(buffer_size) is not int or buffer_size <= 0:
            raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
        for position, operator in enumerate(operators):
            if not callable(operator):
                raise TypeError(
                    f"rx_processor(): operator {position} must be an Rx operator (ops.map(f), "
                    f"...), got {type(operator).__name__}"
                )
        self._buffer_size = buffer_size
        self._lock = threading.Lock()
        self._outstanding = 0  # inputs requested from upstream and not yet received
        self._asked = 0  # inputs requested from upstream in all: owned by the turn (§2.7)
        self._expansion = 1  # E: the most outputs one input produced during its on_next
        self._measured = False  # E is known once the first input went through the chain
        # set once (§2.5); requests serial (§2.7), none from inside another (defer_nested)
        self._upstream = Upstream(self._pass, defer_nested=True)
        self._upstream_done = False
        self._subscribed = False
        self._source: _ProcessorSource[R] = _ProcessorSource(self)
        self._subject: Subject[T] = Subject()
        self._fed = False  # the chain subscribed to its input (once: see _feed)
        self._listening = False  # ... and now hears it: nothing is requested before
        self._chain: DisposableBase = Disposable()
        chain: Observable[Any] = reactivex.create(self._feed)
        for position, operator in enumerate(operators):  # as pipe() does, naming the culprit
            try:
                chain = operator(chain)
            except Exception as exc:
                raise TypeError(
                    f"rx_processor(): operator {position} ({operator!r}) raised {exc!r} when "
                    "applied to the chain's Observable: pass Rx operators, ops.map(f), not a "
                    "function of the elements"
                ) from exc
            if not isinstance(chain, Observable):
                raise TypeError(
                    f"rx_processor(): operator {position} ({operator!r}) made "
                    f"{type(chain).__name__}, not an Observable: pass operators applied to "
                    "their arguments, ops.map(f), not ops.map nor a function of the elements"
                )
        # Outputs while the chain is being subscribed (start_with, merge with a cold
        # Observable) are paced by no request: at most buffer_size of them (see push_checked).
        self._subscribing = True
        self._feeding = get_ident()
        try:
            self._chain = chain.subscribe(
                on_next=self._source.push_checked,
                on_error=self._chain_ended,
                on_completed=lambda: self._chain_ended(None),
                scheduler=_ChainScheduler(),
            )
        except _Stop:
            pass  # an endless subscribe-time producer, unwound (the stream has failed)
        finally:
            self._feeding = 0
            self._subscribing = False
        if self._source._done:
            _dispose(self._chain)  # it ended while subscribing

    @property
    def buffer_size(self) -> int:
        return self._buffer_size

    def __repr__(self) -> str:
        """Whether an upstream subscribed yet, what is buffered and requested, and whether a
        subscriber came: read lock-free (a snapshot), so a blocked consumer can tell why."""
        source, upstream = self._source, self._upstream.subscription
        queued = len(source._items)
        if source._done:
            state = "cancelled" if source._cancelled else "ended"  # (the error is let go)
            if source._error is not None:
                state = f"failed with {source._error!r}"
        elif upstream is None:
            state = "waiting: no upstream subscribed yet (was subscribe() called?)"
        elif self._upstream_done:
            state = "upstream ended"
        else:
            state = f"{self._outstanding} requested upstream"  # written under _lock: a snapshot
        subscription = source.subscription
        downstream = "had a subscriber" if self._subscribed else "no subscriber yet"
        if subscription is not None:
            downstream = f"{subscription.requested} requested by its subscriber in all"
        return f"<RxProcessor at {id(self):#x} {state}, {queued} queued, {downstream}>"

    def scan(self) -> Scan:
        """The processor's state for :func:`~reactive_streams.snapshot` (any thread, no lock):
        its input side (inputs asked of upstream, in flight) and the outputs it holds, with
        its subscriber's demand; upstream is its upstream subscription. Its subscriber's
        subscription ("rx_processor → subscriber") links here, so a walk from the sink passes both.
        """
        source = self._source
        subscription = source.subscription
        return Scan(
            "rx_processor",
            requested=subscription.scan().requested if subscription is not None else 0,
            asked=self._asked,
            in_flight=self._outstanding,  # written under _lock: a snapshot
            buffered=len(source._items),
            cancelled=source._cancelled,
            terminated=source._done and not source._cancelled,
            subscribed=self._upstream.subscription is not None,
            upstream=self._upstream.linked,
        )

    def _feed(self, observer: ObserverBase[T], _scheduler: Any = None) -> DisposableBase:
        """The chain's input: upstream's elements, once. A second subscription (``repeat``,
        ``retry``) would meet a Subject that has ended and end again at once, for ever,
        inside upstream's on_complete: the stream fails instead, from outside the chain."""
        with self._lock:
            again, self._fed = self._fed, True
        if self._source._done:  # cancelled before a late subscription (subscribe_on)
            return Disposable()
        if not again:
            # An operator may subscribe late (subscribe_on, delay_subscription): the Subject
            # is hot, so upstream is asked for elements only once the chain hears them.
            disposable = self._subject.subscribe(observer)
            self._listening = True
            self._replenish()
            return disposable
        self._chain_ended(
            RuntimeError(
                "rx_processor: an operator subscribed to the chain's input a second time "
                "(ops.repeat, ops.retry, ...); the upstream Publisher feeds the chain once: "
                "to retry, wrap the Publisher: reactive_streams.retry(publisher, attempts=...)"
            )
        )
        return Disposable()

    # -- upstream side --------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        if self._upstream.set_once(subscription):  # §2.5: a duplicate, or one after our
            self._replenish()  # cancel, is cancelled quietly (§3.15)

    def on_next(self, element: T) -> None:
        source = self._source
        if element is None:  # §2.13: upstream counts as cancelled, the subscriber hears why
            if not source._done:  # (once the stream is over, there is no one to tell)
                self._chain_ended(TypeError("§2.13: upstream signalled on_next(None)"))
            require_element(element)  # and upstream gets its TypeError
        if source._done:
            return  # the stream is over: an element in flight after our cancel (§3.12)
        before = source.produced
        self._feeding = get_ident()  # an output on another thread, or after this returns,
        try:  # comes from an operator that shifts it in time: see _ProcessorSource
            self._subject.on_next(element)
        except Exception as exc:  # an operator raised outside Rx's own error handling
            if not source._done:  # (else: the input was released meanwhile, see _close)
                self._chain_ended(exc)
            return
        finally:
            self._feeding = 0
        made = source.produced - before  # outputs of this input (a synchronous chain)
        with self._lock:
            if self._outstanding > 0:
                self._outstanding -= 1  # under _lock
            self._measured = True
            if made > self._expansion:
                self._expansion = made
        self._replenish()

    def on_error(self, error: Exception) -> None:
        require_error(error)  # §2.13
        self._upstream_done = True  # §2.3/§2.4: never call the subscription again
        if self._source._done:  # after our cancel it may race in (§1.8); never lose it
            report_dropped(error, rule="1.8", where="rx_processor: on_error after the end")
            return
        self._input(self._subject.on_error, error)  # §4.1: through the chain (catch may
        # emit here)

    def on_complete(self) -> None:
        self._upstream_done = True
        if not self._source._done:
            self._input(self._subject.on_completed)  # take_last, to_list, concat emit here

    def _input(self, signal: Callable[..., None], *args: Any) -> None:
        """An upstream terminal signal into the chain, whose outputs count as the input's."""
        self._feeding = get_ident()
        try:
            signal(*args)
        except Exception as exc:
            # An operator raised outside Rx's own error handling: fail the stream, as on_next
            # does, never raise into upstream (§2.13). Once the stream is over, the input was
            # released meanwhile (see _close), and this is its refusal: nothing to tell.
            if not self._source._done:
                self._chain_ended(exc)
        finally:
            self._feeding = 0

    def _chain_ended(self, error: Exception | None) -> None:
        if isinstance(error, _Stop):
            return  # our own unwinding (push_checked), routed to on_error by an Rx source
        self._source.finish(error)
        self._cancel_upstream()  # no-op when upstream's own end caused it

    def _room(self) -> int:
        """How many inputs to request now (called under ``_lock``); see the class docstring."""
        expansion = self._expansion
        queued = len(self._source._items)
        outstanding = self._outstanding
        if not self._measured:
            return 0 if outstanding else 1  # one input first, to measure E
        free = (self._buffer_size - queued) // expansion - outstanding
        if outstanding == 0 and queued == 0:
            return free if free > 0 else 1  # progress, even for a huge expansion
        window = max(1, self._buffer_size // expansion)
        return free if free >= window - window // 4 else 0

    def _replenish(self) -> None:
        """Request what fits in the output buffer (§1.1 bound kept downstream), from
        upstream's ``on_next`` or the subscriber's drain, maybe on two threads: ``Upstream``
        makes one call at a time (§2.7), never one inside another, and asks ``_due`` again
        after each, so what another thread freed meanwhile is requested too."""
        self._upstream.replenish(self._due)

    def _due(self) -> int:
        """How many inputs to request now, counted as outstanding at once."""
        with self._lock:
            n = self._room() if self._requestable() else 0
            if n > 0:
                self._outstanding += n  # under _lock
            return n

    def _pass(self, upstream: Subscription, n: int) -> None:
        """One ``upstream.request(n)``, made by ``Upstream`` in turn (§2.7). One that raises
        breaks §3.16: the upstream is cancelled, and its error goes through the chain as its
        on_error would, after the outputs already buffered (as PrefetchQueue does)."""
        self._asked = add_cap(self._asked, n)  # owned: Upstream's requesting turn (§2.7)
        try:
            upstream.request(n)
        except BaseException as exc:  # whatever it recorded is not outstanding any more
            with self._lock:
                self._outstanding = max(0, self._outstanding - n)  # under _lock
            if not isinstance(exc, Exception):
                raise
            failure = RuntimeError(f"§3.16: the upstream's request({n}) raised {exc!r}")
            failure.__cause__ = exc
            self._detach_upstream()
            self.on_error(failure)

    def _requestable(self) -> bool:
        """Under ``_lock``: upstream may be asked for more now."""
        return self._listening and not self._upstream_done and not self._source._done

    def _cancel_upstream(self) -> None:
        self._detach_upstream()
        self._chain.dispose()

    def _detach_upstream(self) -> None:
        upstream = self._upstream.take()
        if upstream is not None and upstream is not CANCELLED and not self._upstream_done:
            cancel_quietly(upstream)  # §3.12, §3.15; never after upstream terminated (§2.3)

    def _close(self) -> None:
        """The stream is over (cancelled or ended): cancel upstream, dispose the chain, and
        release the chain's input. That Subject keeps upstream's error to replay to late
        subscribers (it has none: it is fed once), and the error's traceback holds the
        frames that delivered it to the subscriber, so the subscriber with them (§3.13)."""
        self._cancel_upstream()
        self._subject.dispose()

    # -- downstream side ---------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        require_subscriber(subscriber)  # §1.9
        with self._lock:
            taken, self._subscribed = self._subscribed, True
        if taken:
            reject(
                subscriber,
                RuntimeError("§1.11: rx_processor is unicast: it serves one subscriber"),
            )
            return
        subscription = DrainSubscription(subscriber, self._source, name="rx_processor → subscriber")
        self._source.subscription = subscription
        subscription.start()


@final
class _ProcessorSource(_BufferSource[R]):
    """The processor's output buffer; ``produced`` counts the outputs made inside the input's
    signals, on the thread that delivers them."""

    __slots__ = ("_processor", "produced", "subscription")

    def __init__(self, processor: RxProcessor[Any, R]) -> None:
        super().__init__()
        self._processor = processor
        self.produced = 0
        self.subscription: DrainSubscription[R] | None = None  # the subscriber's, once there

    def push_checked(self, element: R) -> None:
        processor = self._processor
        if self._done:
            if processor._subscribing and processor._feeding == get_ident():
                raise _Stop  # the chain ended while the constructor subscribes it: unwind a
                # producer on the constructor's own stack, which has no disposable to stop it
            return
        if element is None:  # legal in Rx, never an element here
            processor._chain_ended(
                TypeError("§2.13: the operator chain produced None, which is never an element")
            )
            return
        if processor._feeding != get_ident():  # outside the input's signals: §1.1 unkeepable
            processor._chain_ended(
                RuntimeError(
                    "rx_processor: the operator chain emitted outside its input's signals "
                    "(delay, observe_on, a timer, an inner Observable that emits later): no "
                    "request can pace such an operator, and its own buffer takes upstream "
                    "without bound; apply it to an Observable instead: "
                    "from_observable(to_observable(publisher).pipe(...), overflow=...)"
                )
            )
            return
        self.produced += 1  # owned: the thread inside the input's signal (_feeding)
        if processor._upstream_done or processor._subscribing:  # no request paces these
            subscription = self.subscription
            demand = subscription.demand if subscription is not None else 0
            if len(self._items) >= add_cap(processor._buffer_size, demand):
                when = (
                    "while it was being subscribed (start_with, merge with a cold Observable, ...)"
                    if processor._subscribing
                    else "after its input ended (take_last, concat, catch, ...)"
                )
                processor._chain_ended(
                    OverflowViolation(
                        f"§1.1: rx_processor: the operator chain emitted more than "
                        f"buffer_size={processor._buffer_size} outputs beyond the subscriber's "
                        f"demand {when}, which no request can pace: raise buffer_size, or "
                        "bound the operator"
                    )
                )
                return  # (while subscribing, the producer's next output unwinds it)
        self.push(element)

    def consumed(self, n: int) -> None:
        self._processor._replenish()

    def buffered(self) -> int:
        return 0  # the outputs are the processor's: its own row shows them (upstream())

    def upstream(self) -> object | None:
        return self._processor  # its row: the input side, then on to its upstream

    def want(self, n: int) -> None:
        self._processor._replenish()  # the buffer ran dry with demand: room to request?

    def close(self) -> None:
        self._discard()  # §3.13
        self.subscription = None
        self._processor._close()


_Op = Callable[[Observable[Any]], Observable[Any]]


@overload
def rx_processor(*, buffer_size: int = 256) -> Processor[A, A]: ...
@overload
def rx_processor(
    o1: Callable[[Observable[A]], Observable[B]], /, *, buffer_size: int = 256
) -> Processor[A, B]: ...
@overload
def rx_processor(
    o1: Callable[[Observable[A]], Observable[B]],
    o2: Callable[[Observable[B]], Observable[C]],
    /,
    *,
    buffer_size: int = 256,
) -> Processor[A, C]: ...
@overload
def rx_processor(
    o1: Callable[[Observable[A]], Observable[B]],
    o2: Callable[[Observable[B]], Observable[C]],
    o3: Callable[[Observable[C]], Observable[D]],
    /,
    *,
    buffer_size: int = 256,
) -> Processor[A, D]: ...
@overload
def rx_processor(
    o1: Callable[[Observable[A]], Observable[B]],
    o2: Callable[[Observable[B]], Observable[C]],
    o3: Callable[[Observable[C]], Observable[D]],
    o4: Callable[[Observable[D]], Observable[E]],
    /,
    *,
    buffer_size: int = 256,
) -> Processor[A, E]: ...
@overload
def rx_processor(
    o1: Callable[[Observable[A]], Observable[B]],
    o2: Callable[[Observable[B]], Observable[C]],
    o3: Callable[[Observable[C]], Observable[D]],
    o4: Callable[[Observable[D]], Observable[E]],
    o5: Callable[[Observable[E]], Observable[F]],
    /,
    *,
    buffer_size: int = 256,
) -> Processor[A, F]: ...
@overload
def rx_processor(
    o1: Callable[[Observable[A]], Observable[B]],
    o2: Callable[[Observable[B]], Observable[C]],
    o3: Callable[[Observable[C]], Observable[D]],
    o4: Callable[[Observable[D]], Observable[E]],
    o5: Callable[[Observable[E]], Observable[F]],
    o6: Callable[[Observable[F]], Observable[G]],
    /,
    *,
    buffer_size: int = 256,
) -> Processor[A, G]: ...
@overload
def rx_processor(  # seven operators or more: the element types are not followed
    o1: _Op,
    o2: _Op,
    o3: _Op,
    o4: _Op,
    o5: _Op,
    o6: _Op,
    o7: _Op,
    /,
    *more: _Op,
    buffer_size: int = 256,
) -> Processor[Any, Any]: ...


def rx_processor(*operators: Callable[[Any], Any], buffer_size: int = 256) -> Processor[Any, Any]:
    """A Processor that runs ``operators`` (``ops.map``, ``ops.filter``, ...) with demand kept.

    See :class:`RxProcessor` for the demand policy and its bound. To mypy the element types
    follow the chain as reactivex types its operators: ``ops.map(f)``, ``f`` annotated
    ``(int) -> str``, makes a ``Processor[int, str]``, and each operator's output type is the
    next one's input (one to six operators; more make a ``Processor[Any, Any]``). A type no
    operator pins (``ops.take(3)`` alone) is ``Any``: state the types on the variable,
    ``stage: Processor[int, str] = rx_processor(...)``, and mypy holds the stage to them.
    With no operator it is an identity, ``Processor[T, T]`` for the ``T`` stated. reactivex
    gives an untyped lambda's argument no type, so mypy refuses ``lambda x: x * 10`` in an
    operator: pass a ``def`` (or a typed callable) where the lambda would use its argument.

    Example:
        >>> from reactivex import operators as ops
        >>> from reactive_streams import Processor
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> def tenfold(x: int) -> int:
        ...     return x * 10
        >>> def big(x: int) -> bool:
        ...     return x > 10
        >>> stage = rx_processor(ops.map(tenfold), ops.filter(big))  # Processor[int, int]
        >>> from_iterable(range(4)).subscribe(stage)
        >>> list(to_iterator(stage))
        [20, 30]
        >>> batches: Processor[int, list[int]] = rx_processor(ops.buffer_with_count(2))
    """
    return RxProcessor(operators, buffer_size)
