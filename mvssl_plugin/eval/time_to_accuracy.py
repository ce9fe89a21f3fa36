"""When a noisy accuracy curve has reached a target: the first epoch after which it never falls
below it again. The curve of a pretraining run's kNN wobbles by 0.3-0.5 points from epoch to
epoch, so the first epoch at or above a target can be a lucky one; "stays at or above" is the
reading that a longer run cannot take back. Pure Python: no torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional


def stays_at_or_above(values: Sequence[float], target: float) -> Optional[int]:
    """The index of the first value after which every value (itself included) is ``>= target``;
    None when the last value is below it (or there is none).

    >>> stays_at_or_above([40, 51, 49, 52, 53], 50)
    3
    """
    first = None
    for i in range(len(values) - 1, -1, -1):
        if values[i] < target:
            break
        first = i
    return first


def first_at_or_above(values: Sequence[float], target: float) -> Optional[int]:
    """The index of the first value ``>= target``, or None (the reading of older tables)."""
    return next((i for i, v in enumerate(values) if v >= target), None)
