"""A fixed, class-balanced validation split held out of the training images (``data.holdout``).

Choices (a learning rate, a lever) are made on it; the test set is read only for the results
reported. The split depends on the list of labels alone, not on the seed, the method or the
data fraction, so every run of a comparison holds out the same images. Pure Python: no torch.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Dict, List, Tuple

#: the split's own generator seed: fixed, so it never follows a run's ``seed``
HOLDOUT_SEED = 0


def holdout_positions(labels: Sequence[int], count: int) -> List[int]:
    """Sorted positions of ``count`` items of ``labels`` to hold out, as even across classes as
    ``count`` allows: ``count // C`` of every class and one more of the first ``count % C``
    classes (in label order), each class's drawn by a generator seeded with ``HOLDOUT_SEED``
    and the class.

    Raises:
        ValueError: ``count`` would leave some class with no training image.
    """
    by_class: Dict[int, List[int]] = {}
    for position, label in enumerate(labels):
        by_class.setdefault(int(label), []).append(position)
    classes = sorted(by_class)
    if count < 0:
        raise ValueError(f"count={count}: must be >= 0")
    if not classes:
        return []
    share, extra = divmod(count, len(classes))
    chosen: List[int] = []
    for rank, label in enumerate(classes):
        members = by_class[label]
        take = share + (rank < extra)
        if take >= len(members):
            raise ValueError(
                f"holding out {count} images takes {take} of class {label}'s {len(members)}: at most "
                f"{min(len(m) for m in by_class.values()) - 1} per class ({len(classes)} classes) leaves each class one"
            )
        chosen += random.Random(HOLDOUT_SEED * 1_000_003 + label).sample(members, take)
    return sorted(chosen)


def split_holdout(items: Sequence, labels: Sequence[int], count: int) -> Tuple[list, list]:
    """``(kept, held_out)``: ``items`` (in their order) without and with :func:`holdout_positions`."""
    held = set(holdout_positions(labels, count))
    kept = [item for i, item in enumerate(items) if i not in held]
    return kept, [item for i, item in enumerate(items) if i in held]
