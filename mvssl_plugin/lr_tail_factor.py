"""The learning rate's tail: a constant lr, then a straight line to zero over the last steps.

A constant lr lets a run go on from any shorter run of its training (the speedrun's 74 epochs
from its 18), but its kNN flattens late in a long run (docs/speedrun.md). Decaying only at the
end keeps that property for every epoch before the tail: such a run is its constant twin until
the tail starts, and can go on from the twin's checkpoint there. Pure Python.
"""

from __future__ import annotations


def tail_factor(step: int, total_steps: int, tail_steps: int) -> float:
    """The lr's multiplier for optimizer step ``step`` (0-based) of ``total_steps``.

    ``1`` before the tail; inside it ``(total_steps - step) / tail_steps``, so the tail's first
    step takes the full lr and its last ``1 / tail_steps`` of it. ``tail_steps = 0`` is no tail.
    Steps past the end (a run resumed with fewer epochs) take ``0``.
    """
    if tail_steps < 0 or total_steps < 1 or tail_steps > total_steps:
        raise ValueError(f"tail_steps={tail_steps} must be in [0, total_steps={total_steps}]")
    if tail_steps == 0 or step < total_steps - tail_steps:
        return 1.0
    return max(0.0, (total_steps - step) / tail_steps)
