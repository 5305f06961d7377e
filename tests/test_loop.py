"""rs_core/_loop.py: the event-loop helpers the asyncio adapters share."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading

import pytest

from reactive_streams import _loop
from reactive_streams._loop import (
    call_on_loop,
    check_loop,
    on_loop,
    resolve_loop,
    run_clean_up,
    start_eagerly,
    start_task,
)

# -- where a loop-bound publisher runs ------------------------------------------------------------


class TestWhichLoop:
    def test_check_loop_refuses_what_can_never_run_a_stream(self) -> None:
        """None passes; a non-loop is a TypeError, a closed loop a ValueError, at the call."""
        check_loop(None)
        with pytest.raises(TypeError, match="must be an asyncio event loop"):
            check_loop("loop")
        closed = asyncio.new_event_loop()
        closed.close()
        with pytest.raises(ValueError, match="loop is closed"):
            check_loop(closed)

    def test_resolve_loop_takes_the_given_or_the_running_loop(self) -> None:
        """The loop given, else the one running here; none, or a closed one, is an error to
        reject the subscriber with (returned, never raised)."""
        assert "loop=" in str(resolve_loop(None, "who()"))
        given = asyncio.new_event_loop()
        assert resolve_loop(given, "who()") is given

        async def running() -> object:
            return resolve_loop(None, "who()") is asyncio.get_running_loop()

        assert asyncio.run(running()) is True
        given.close()
        error = resolve_loop(given, "who()")
        assert isinstance(error, RuntimeError) and "closed" in str(error)

    def test_on_loop_and_call_on_loop(self) -> None:
        """On the loop's thread, call_on_loop calls at once; elsewhere at the loop's next
        turn, and a closed loop raises RuntimeError."""
        loop = asyncio.new_event_loop()
        calls: list[tuple[str, bool]] = []

        async def main() -> None:
            assert on_loop(loop)
            call_on_loop(loop, lambda: calls.append(("on the loop", on_loop(loop))))
            assert calls == [("on the loop", True)]  # already called

        loop.run_until_complete(main())
        assert not on_loop(loop)
        call_on_loop(loop, lambda: calls.append(("from outside", on_loop(loop))))
        assert len(calls) == 1  # queued, not called
        loop.run_until_complete(asyncio.sleep(0))
        assert calls[1] == ("from outside", True)
        loop.close()
        with pytest.raises(RuntimeError):
            call_on_loop(loop, calls.clear)


# -- starting tasks -----------------------------------------------------------------------------


class TestStartTask:
    def test_a_started_task_is_kept_until_done(self) -> None:
        """The loop holds tasks weakly: one nobody else refers to still runs to its end."""
        done = threading.Event()

        async def work() -> None:
            for _ in range(3):
                await asyncio.sleep(0)
            done.set()

        async def main() -> None:
            start_task(asyncio.get_running_loop(), work())  # the reference dropped at once
            gc.collect()
            for _ in range(10):
                await asyncio.sleep(0)

        asyncio.run(main())
        assert done.is_set()

    @pytest.mark.skipif(
        not hasattr(asyncio, "eager_task_factory"), reason="asyncio.eager_task_factory is 3.12+"
    )
    def test_the_first_step_runs_later_under_an_eager_task_factory(self) -> None:
        """start_task never runs the coroutine inside the call, whatever the task factory."""
        steps: list[str] = []

        async def work() -> None:
            steps.append("task")

        async def main() -> None:
            loop = asyncio.get_running_loop()
            loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
            task = start_task(loop, work())
            steps.append("returned")
            await task

        asyncio.run(main())
        assert steps == ["returned", "task"]

    @pytest.mark.stress
    def test_loops_on_many_threads_start_and_finish_tasks_at_once(self, switching: None) -> None:
        """The set of kept tasks is shared by every loop: four loops on four threads start
        and finish 500 tasks each at once; every task runs and none is left kept."""
        ran = [0] * 4
        barrier = threading.Barrier(4)

        def run(which: int) -> None:
            async def tick() -> None:
                ran[which] += 1  # owned: this loop
                await asyncio.sleep(0)

            async def main() -> None:
                barrier.wait()
                loop = asyncio.get_running_loop()
                await asyncio.gather(*(start_task(loop, tick()) for _ in range(500)))

            asyncio.run(main())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert ran == [500] * 4
        assert not _loop._tasks


class TestStartEagerly:
    @pytest.mark.asyncio
    async def test_the_first_step_is_done_when_it_returns(self) -> None:
        """The coroutine runs up to its first suspension inside the call; the rest in a
        kept task, which then is the current task."""
        steps: list[object] = []
        go = asyncio.Event()

        async def work() -> None:
            steps.append("first step")
            await go.wait()
            steps.append(asyncio.current_task())

        task = start_eagerly(asyncio.get_running_loop(), work())
        assert steps == ["first step"] and task is not None and not task.done()
        go.set()
        await asyncio.wait_for(task, 5)
        assert steps == ["first step", task]

    @pytest.mark.asyncio
    async def test_a_coroutine_done_in_its_first_step_needs_no_task(self) -> None:
        """None when the coroutine never suspends; an exception of its first step is the
        caller's."""
        steps: list[str] = []

        async def quick() -> None:
            steps.append("done")

        async def failing() -> None:
            raise KeyError("first step")

        assert start_eagerly(asyncio.get_running_loop(), quick()) is None
        assert steps == ["done"]
        with pytest.raises(KeyError, match="first step"):
            start_eagerly(asyncio.get_running_loop(), failing())

    @pytest.mark.asyncio
    async def test_cancel_and_errors_reach_the_coroutine(self) -> None:
        """Cancelling the task throws CancelledError into the coroutine at its await (its
        handler and finally run, the task ends cancelled); a later error is the task's."""
        seen: list[str] = []
        waiting = asyncio.Event()

        async def cancelled() -> None:
            try:
                await asyncio.sleep(0)  # a bare yield: the task reschedules itself
                waiting.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            finally:
                seen.append("finally")

        async def later_error() -> None:
            await asyncio.sleep(0)
            raise LookupError("second step")

        loop = asyncio.get_running_loop()
        task = start_eagerly(loop, cancelled())
        assert task is not None
        await asyncio.wait_for(waiting.wait(), 5)
        task.cancel()
        await asyncio.wait((task,), timeout=5)
        assert task.cancelled() and seen == ["cancelled", "finally"]
        failing = start_eagerly(loop, later_error())
        assert failing is not None
        with pytest.raises(LookupError, match="second step"):
            await asyncio.wait_for(failing, 5)

    @pytest.mark.asyncio
    async def test_every_step_runs_in_one_context(self) -> None:
        """A context variable the first step sets is still set in later steps, and the
        caller's context is left alone."""
        var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")
        seen: list[str] = []

        async def work() -> None:
            var.set("work")
            await asyncio.sleep(0)
            seen.append(var.get())

        task = start_eagerly(asyncio.get_running_loop(), work())
        assert task is not None and var.get() == "caller"
        await asyncio.wait_for(task, 5)
        assert seen == ["work"]


# -- clean-up that outlives asyncio.run -----------------------------------------------------------


class TestRunCleanUp:
    def test_a_clean_up_queued_for_the_last_turn_still_runs(self) -> None:
        """A clean-up started on the loop's last turn, which asyncio.run's task sweep
        cancels before its first step, is started once more and runs."""
        ran = threading.Event()

        async def work() -> None:
            ran.set()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            loop.call_soon(run_clean_up, loop, work)

        asyncio.run(main())
        assert ran.is_set()
