"""Progressive resolution: views smaller than the recipe's early in a run, its full size at
the end (FFCV's progressive resizing for ImageNet, here fitted to the run's epochs).

A view at half the side costs about a quarter of the backbone's work, so the early epochs,
whose features are coarse anyway, go faster; the last epochs, and every evaluation, see the
full size. Pure Python: the in-memory loader asks it for each epoch's size.

The largest pipeline's side at epoch ``e`` (0-based) of ``E``, with ``t = e / (E - 1)`` (the
last epoch is at t = 1, so it always trains at the full size; a 1-epoch run is all at it)::

    side(t) = start                                      t <= ramp_start
            = start + (full - start) * (t - ramp_start) / (ramp_end - ramp_start)
            = full                                       t >= ramp_end

rounded to the nearest multiple of ``multiple``; every other pipeline (small views) is scaled
by the same ``side / full``.

With ``strength_start`` s0 < 1 the augmentation's magnitude grows with the side (the "matching
progressive augmentation magnitude and image resolution" of Kocyigit, Hospedales and Bilen,
WACV 2023, arXiv 2212.05611; EfficientNetV2's progressive learning before it): small, early
views are augmented more gently, and the full side gets the recipe's own magnitude::

    strength(side) = s0 + (1 - s0) * (side - start) / (full - start)

read off the side actually trained, so each side has one magnitude
(:meth:`~mvssl_plugin.data.pipeline.ViewRecipe.at_strength` says what it scales).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List


@dataclass(frozen=True)
class ResolutionRamp:
    """The side of the largest pipeline's views per epoch (the module docstring's equation).

    Args:
        start: side in pixels at the run's start (<= full).
        full: the recipe's side (the largest pipeline's ``crop_size``).
        ramp_start: fraction of the run's epochs where the side starts to grow, in [0, 1).
        ramp_end: fraction where it reaches ``full``, in (ramp_start, 1].
        multiple: sides are multiples of this (8 on CIFAR: 16, 24, 32).
        strength_start: the augmentation's magnitude at ``start``, a fraction in [0, 1] of the
            recipe's; it grows with the side to 1 at ``full`` (1: the recipe's throughout).
    """

    start: int
    full: int
    ramp_start: float = 0.0
    ramp_end: float = 0.75
    multiple: int = 8
    strength_start: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.start <= self.full:
            raise ValueError(f"start={self.start}: must be between 1 and the full side {self.full}")
        if not 0.0 <= self.ramp_start < self.ramp_end <= 1.0:
            raise ValueError(f"ramp ({self.ramp_start}, {self.ramp_end}): need 0 <= ramp_start < ramp_end <= 1")
        if self.multiple < 1:
            raise ValueError(f"multiple={self.multiple}: must be >= 1")
        if not 0.0 <= self.strength_start <= 1.0:
            raise ValueError(f"strength_start={self.strength_start}: must be a fraction in [0, 1]")

    def side(self, epoch: int, epochs: int) -> int:
        """The largest pipeline's side (pixels) during ``epoch`` (0-based) of ``epochs``."""
        t = 1.0 if epochs <= 1 else epoch / (epochs - 1)
        grown = min(1.0, max(0.0, (t - self.ramp_start) / (self.ramp_end - self.ramp_start)))
        raw = self.start + (self.full - self.start) * grown
        return int(min(self.full, max(self.start, self.multiple * round(raw / self.multiple))))

    def strength(self, side: int) -> float:
        """The augmentation's magnitude at ``side`` px, a fraction of the recipe's (the module
        docstring's equation; 1 at the full side)."""
        if self.full == self.start:
            return 1.0
        grown = min(1.0, max(0.0, (side - self.start) / (self.full - self.start)))
        return self.strength_start + (1.0 - self.strength_start) * grown

    def sides(self, epochs: int) -> List[int]:
        """Every epoch's side, in order."""
        return [self.side(e, epochs) for e in range(epochs)]

    def cost(self, epochs: int) -> float:
        """The run's pixels per view over a full-size run's (sum of side^2 over full^2 x
        epochs): what the backbone's work shrinks to, before the per-step overheads that do
        not shrink with the image."""
        return sum(s * s for s in self.sides(epochs)) / (self.full * self.full * max(1, epochs))


def full_side(pipelines: Iterable[Any]) -> int:
    """The side a ramp ends at: the largest pipeline's ``crop_size`` (of the YAML's
    ``augmentations`` or of their :class:`~mvssl_plugin.data.pipeline.ViewRecipe`)."""
    return max(int(pipeline.crop_size) for pipeline in pipelines)


def scaled_side(side: int, largest: int, full: int) -> int:
    """A pipeline's side when the largest pipeline's is ``largest`` instead of ``full``
    (small views shrink in proportion, never below one pixel)."""
    return max(1, round(side * largest / full))
