"""Progress for logs nobody watches. On a terminal a progress bar redraws one line; written to
a file (CI, ``nohup``, a SLURM job's output) each redraw is a carriage-return update, and a kNN
run's log became one line of thousands of them. Off a terminal the entry points print a whole
line instead, every few percent and at least every minute. Standard library only."""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, Optional, TextIO, TypeVar

T = TypeVar("T")

#: a line at every this many percent of the steps ...
PERCENT_STEP = 10
#: ... but not sooner than this many seconds after the previous line (short loops stay quiet) ...
MIN_SECONDS = 5.0
#: ... and at least this often, however slow the loop (an hour-long epoch still shows it runs)
MAX_SECONDS = 60.0


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


class LineProgress:
    """Says when a loop's progress deserves a line: at each :data:`PERCENT_STEP` of ``total``
    (no sooner than :data:`MIN_SECONDS` after the last line), after :data:`MAX_SECONDS` without
    one, and at the last step."""

    def __init__(self, desc: str, total: Optional[int], clock=time.monotonic) -> None:
        self.desc, self.total, self.clock = desc, total, clock
        self.start = self.last = clock()
        self.next_percent = PERCENT_STEP

    def update(self, done: int) -> Optional[str]:
        """The line to print after ``done`` steps, or None."""
        now = self.clock()
        percent = 100.0 * done / self.total if self.total else None
        final = self.total is not None and done >= self.total
        due = percent is not None and percent >= self.next_percent and now - self.last >= MIN_SECONDS
        if not (final or due or now - self.last >= MAX_SECONDS):
            return None
        self.last = now
        if percent is not None:
            while self.next_percent <= percent:
                self.next_percent += PERCENT_STEP
        of = f"/{self.total} ({percent:.0f}%)" if percent is not None else ""
        return f"{self.desc} {done}{of}, {now - self.start:.0f} s"


def progress(
    iterable: Iterable[T], desc: Optional[str], total: Optional[int] = None, stream: Optional[TextIO] = None
) -> Iterator[T]:
    """``iterable`` with a progress display on ``stream`` (stderr): tqdm's bar on a terminal,
    :class:`LineProgress` lines elsewhere; nothing when ``desc`` is None."""
    stream = stream or sys.stderr
    if desc is None:
        yield from iterable
        return
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            pass
    if is_terminal(stream):
        from tqdm.auto import tqdm  # local: a bar on a terminal only; this module is standard library

        yield from tqdm(iterable, desc=desc, total=total, leave=False, dynamic_ncols=True, file=stream)
        return
    lines = LineProgress(desc, total)
    for done, item in enumerate(iterable, start=1):
        yield item
        line = lines.update(done)
        if line is not None:
            print(line, file=stream, flush=True)
