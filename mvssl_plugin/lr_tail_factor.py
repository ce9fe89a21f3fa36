"""The learning rate's tail: a constant lr, then a straight line to zero over the end of a run.

A constant lr lets a run go on from any shorter run of its training (the speedrun's 74 epochs
from its 18), but its kNN flattens late in a long run (docs/speedrun.md). Decaying only at the
end keeps that property for everything before the tail: such a run is its constant twin until
the tail starts, and can go on from the twin's checkpoint there. The run's length is counted in
optimizer steps (``scheduler.tail_epochs``) or in seconds of its own training clock
(``scheduler.tail_minutes``, for a run with a time budget); the line is the same. Pure Python.
"""

from __future__ import annotations


def tail_factor(now: float, end: float, tail: float) -> float:
    """The lr's multiplier at position ``now`` of a run that ends at ``end`` (0-based optimizer
    steps, or training seconds), its last ``tail`` of them the tail.

    ``1`` before the tail; inside it ``(end - now) / tail``, so the tail's first step takes the
    full lr and, counted in steps, its last ``1 / tail`` of it. ``tail = 0`` is no tail. Past the
    end (a run resumed with fewer epochs, or the epoch that crosses a time budget) it is ``0``.
    """
    if tail < 0 or end <= 0 or tail > end:
        raise ValueError(f"tail={tail} must be in [0, end={end}], and end > 0")
    if tail == 0 or now < end - tail:
        return 1.0
    return max(0.0, (end - now) / tail)
