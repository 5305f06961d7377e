"""Draw docs/snapshot.png: ``snapshot()`` of a shared stream's slow consumer, mid-stream.

One source, ``share``d between a fast consumer (a thread, 0.1 ms per element) and one ten
times slower (this thread, 1 ms per element): the share is paced by the slow one, so the
fast one waits on upstream while the buffer holds what the slow one has not taken yet.
At element ``AT`` the slow consumer takes ``snapshot()`` of its own iterator (between two
``next()`` calls, so its side is at rest), prints the table, and draws it as a monospace
text image with matplotlib (the Agg backend, as benchmarks/ draws performance.png).

Run it with ``python docs/examples/snapshot_picture.py``; it writes docs/snapshot.png.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from reactive_streams import Snapshot, share, snapshot
from reactive_streams.adapters.iterables import from_iterable, to_iterator

N = 5_000  # elements in the source
AT = 400  # the slow consumer's element at which the snapshot is taken
BUFFER = 64  # share's buffer_size: how far the fast one may get ahead of the slow one
FAST, SLOW = 0.0001, 0.001  # seconds per element: the slow consumer is ten times slower
OUT = Path(__file__).resolve().parents[1] / "snapshot.png"


def consume_fast(it: Iterator[int], done: threading.Event, count: list[int]) -> None:
    """The fast consumer's thread: take every element, 0.1 ms each."""
    for _ in it:
        count[0] += 1  # owned: this thread
        time.sleep(FAST)
    done.set()


def take_snapshot() -> tuple[Snapshot, int]:
    """Run the pipeline to the slow consumer's element ``AT``; its snapshot then, and how
    many elements the fast one had taken."""
    shared = share(from_iterable(range(N)), buffer_size=BUFFER, min_subscribers=2)
    fast = to_iterator(shared, prefetch=16, timeout=30.0)
    slow = to_iterator(shared, prefetch=8, timeout=30.0)
    done, fast_count = threading.Event(), [0]
    thread = threading.Thread(target=consume_fast, args=(fast, done, fast_count), daemon=True)
    thread.start()
    taken: Snapshot | None = None
    ahead = 0
    for i, _ in enumerate(slow, start=1):
        time.sleep(SLOW)
        if i == AT:
            taken = snapshot(slow)
            ahead = fast_count[0]  # a read of another thread's counter: roughly then
            break
    slow.close()  # the fast one goes on alone to the end
    if not done.wait(60.0):
        raise TimeoutError("the fast consumer did not finish")
    if taken is None:
        raise RuntimeError(f"the slow consumer ended before element {AT}")
    return taken, ahead


def draw(text: str, title: str, path: Path) -> None:
    """``text`` in a monospace font on a white image at ``path``, ``title`` above it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = text.splitlines()
    width = max(len(line) for line in lines)
    fig = plt.figure(figsize=(0.085 * width + 0.4, 0.22 * (len(lines) + 2) + 0.3))
    fig.text(0.02, 0.97, title, fontsize=11, weight="bold", va="top")
    fig.text(0.02, 0.80, text, family="monospace", fontsize=10, va="top")
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.15, facecolor="white")
    plt.close(fig)


def main() -> None:
    taken, ahead = take_snapshot()
    table = str(taken)
    print(table)
    print(f"(the fast consumer had taken about {ahead} elements, the slow one {AT})")
    title = (
        f"snapshot(slow sink) at its element {AT}: share(from_iterable(range({N})), "
        f"buffer_size={BUFFER}), a fast consumer and one 10x slower"
    )
    draw(table, title, OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
