"""The constant learning rate's two ramps: up from zero over a run's first minutes (the warm-up),
down to zero over its end (the tail). Pure Python.

A constant lr lets a run go on from any shorter run of its training (the speedrun's 74 epochs
from its 18), but its kNN flattens late in a long run (docs/speedrun.md). Decaying only at the
end keeps that property for everything before the tail: such a run is its constant twin until
the tail starts, and can go on from the twin's checkpoint there. The run's length is counted in
optimizer steps (``scheduler.tail_epochs``) or in seconds of its own training clock
(``scheduler.tail_minutes``, for a run with a time budget); the line is the same.

The warm-up (``scheduler.warmup_minutes``, on the same clock) lets a run start at a peak lr that
diverges or loses when taken from the first step; the ramp is the usual linear one
(Goyal et al., 2017, "Accurate, large minibatch SGD").

Cycles (``scheduler.cycle_minutes``) repeat the tail: the budget cut into cycles of equal length,
each ending at zero lr, the lr back to its constant value at the next one's start (warm restarts,
Loshchilov and Hutter, 2017, "SGDR"). Every cycle's end is then a finished model, so the budget
can be read, or extended, at any of them: the "extendable cyclic" schedule Kocyigit, Hospedales
and Bilen report as one of three levers that together train SSL methods up to 2.7x faster (WACV
2023, arXiv 2212.05611; their cycles' shape is theirs, this one is the tail's line repeated).
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


def cycle_position(now: float, end: float, cycle: float) -> tuple[float, float]:
    """``(now, end)`` inside the cycle of length ``cycle`` that holds ``now``, for ``tail_factor``
    (its tail then ends each cycle). ``cycle = 0`` is one cycle, the run; so is ``now >= end``, so
    the run's end still takes zero. ``end`` must be a whole number of cycles (to 1e-6)."""
    if cycle < 0 or end <= 0:
        raise ValueError(f"cycle={cycle} must be >= 0 and end={end} > 0")
    if cycle == 0 or now >= end:
        return now, end
    cycles = end / cycle
    if abs(cycles - round(cycles)) > 1e-6 or round(cycles) < 1:
        raise ValueError(f"end={end} must be a whole number of cycles of {cycle}")
    return now - cycle * (now // cycle), cycle


def warmup_factor(now: float, warmup: float) -> float:
    """The lr's multiplier at training second ``now`` of a run whose first ``warmup`` seconds
    are the warm-up: ``now / warmup`` inside it, ``1`` from its end on; ``warmup = 0`` is none."""
    if warmup < 0 or now < 0:
        raise ValueError(f"warmup={warmup} and now={now} must be >= 0")
    return 1.0 if now >= warmup else now / warmup


def ramp_phrases(
    warmup_minutes: float = 0, tail_epochs: int = 0, tail_minutes: float = 0, cycle_minutes: float = 0
) -> list[str]:
    """The ramps in words, one phrase each (none set: ``[]``), for the start block and the model
    card to say the same thing: e.g. ``["linear from zero over the first 2 training minutes",
    "linear to zero over the last 20 training minutes of every 20-minute cycle"]``."""
    phrases = [f"linear from zero over the first {warmup_minutes:g} training minutes"] if warmup_minutes else []
    if tail_epochs:
        phrases.append(f"linear to zero over the last {tail_epochs} epochs")
    if tail_minutes:
        phrases.append(
            f"linear to zero over the last {tail_minutes:g} training minutes"
            + (f" of every {cycle_minutes:g}-minute cycle" if cycle_minutes else "")
        )
    return phrases
