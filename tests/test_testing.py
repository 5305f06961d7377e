"""reactive_streams.testing: the tools other tests stand on (race, PausedAt, switch_interval)."""

from __future__ import annotations

import sys

import pytest

from reactive_streams.testing import PausedAt, race, switch_interval

# -- race ------------------------------------------------------------------------------------------


def test_race_reraises_a_base_exception_raised_by_an_action() -> None:
    """testing.race: an action failing with a BaseException (pytest.fail()) fails the
    caller, instead of dying on its thread unseen."""

    def fail() -> None:
        pytest.fail("an action failed")

    with pytest.raises(pytest.fail.Exception, match="an action failed"):
        race(fail, lambda: None)


# -- PausedAt --------------------------------------------------------------------------------------


def _steps(seen: list[str]) -> None:
    seen.append("before")
    seen.append("marked")  # paused-at: trailing
    # paused-at: above
    # (a marker of its own marks the next line of code)

    seen.append("below")
    seen.append("after")  # paused-at: twice
    seen.append("again")  # paused-at: twice


@pytest.mark.parametrize(
    ("marker", "seen_when_stopped"),
    [("trailing", ["before"]), ("above", ["before", "marked"])],
)
def test_paused_at_stops_before_the_marked_line(marker: str, seen_when_stopped: list[str]) -> None:
    """The action's thread stops before the marked line runs (its side effect is not seen
    until resume()), whether the marker ends that line or stands above it."""
    seen: list[str] = []
    paused = PausedAt(_steps, marker)
    paused.start(lambda: _steps(seen))
    assert paused.reached.is_set() and seen == seen_when_stopped
    paused.resume()
    assert seen == ["before", "marked", "below", "after", "again"]


def test_paused_at_names_a_marker_found_on_no_line_or_on_several() -> None:
    """A marker on no line, or on several, is refused at once, naming the marker; the text of
    a line is no marker (editing code or a comment never moves a stop)."""
    with pytest.raises(ValueError, match=r"0 lines of _steps hold the marker '# paused-at: nope'"):
        PausedAt(_steps, "nope")
    with pytest.raises(ValueError, match=r"2 lines of _steps hold .*'# paused-at: twice'"):
        PausedAt(_steps, "twice")
    with pytest.raises(ValueError, match="0 lines"):
        PausedAt(_steps, 'seen.append("marked")')


def test_paused_at_fails_when_the_marked_line_is_never_reached() -> None:
    """An action that never runs the marked line fails start() (a test would wait for ever)."""
    paused = PausedAt(_steps, "trailing")
    with pytest.raises(AssertionError, match="never reached '# paused-at: trailing'"):
        paused.start(lambda: None, timeout=0.5)


# -- switch_interval -------------------------------------------------------------------------------


def test_switch_interval_sets_and_restores_even_on_error() -> None:
    """The interval holds inside the block and is restored afterwards, even when it raises."""
    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError), switch_interval(1e-6):
        assert sys.getswitchinterval() == pytest.approx(1e-6)
        raise RuntimeError
    assert sys.getswitchinterval() == before
