"""The input every multi-view loss takes: m views of one batch, checked and stacked once.

Shapes: ``m`` views, a local batch of ``N`` images, embedding dimension ``D``. Views come
as a sequence of m tensors ``(N, D)`` or one tensor ``(m, N, D)``; row ``n`` of every view
must be the same image.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import torch

#: m tensors ``(N, D)`` or one ``(m, N, D)``
Views = Union[torch.Tensor, Sequence[torch.Tensor]]


def stack_views(views: Views) -> torch.Tensor:
    """Checks and stacks m view embeddings into one tensor ``(m, N, D)``, m >= 2 and N >= 2
    (every loss of the family uses batch statistics or a batch-wide matrix).

    float64 stays float64 (exact reference comparisons); every other dtype becomes float32
    (under mixed precision, half-precision sums lose the small terms the losses are about).

    Raises:
        ValueError: views of different shapes, not ``(N, D)``, fewer than 2 views or images.
    """
    if isinstance(views, torch.Tensor):
        stacked = views
    else:
        views = list(views)
        if len({tuple(v.shape) for v in views}) > 1:
            shapes = [tuple(v.shape) for v in views]
            raise ValueError(f"all views must have the same shape (N, D); got {shapes}")
        stacked = torch.stack(views) if views else torch.empty(0, 0, 0)
    if stacked.dim() != 3:
        raise ValueError(f"views must be m tensors (N, D) or one (m, N, D); got {tuple(stacked.shape)}")
    if stacked.shape[0] < 2:
        raise ValueError(f"a multi-view loss needs at least 2 views of each image (m >= 2 views), got {len(stacked)}")
    if stacked.shape[1] < 2:
        raise ValueError(f"batch statistics need at least 2 images per batch, got {stacked.shape[1]}")
    return stacked if stacked.dtype == torch.float64 else stacked.float()
