"""``method_kwargs.hard_views``: each image trains on its k hardest views of the m the loader cuts.

Hard positive mining (arXiv 2212.05611; the procedure of arXiv 2310.03940's hard view selection):
the m candidate views go through the backbone and projector once without gradients, optionally
shrunk to ``hard_views_side`` pixels so the choice costs a fraction of a step, and each image keeps
the k whose embeddings lie farthest from agreeing (:func:`~mvssl_plugin.losses.hardest_subsets`).
The training step then runs on those k as if the loader had cut k.

The choosing pass runs in training mode (BatchNorm normalizes by the batch, as the step will) but
leaves the running statistics as they were: they stay the training views' alone, which is what
the per-epoch kNN and every evaluation normalize by.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, List, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from mvssl_plugin.losses.hard_views import gather_views, hardest_subsets


@contextlib.contextmanager
def running_stats_kept(model: nn.Module) -> Iterator[None]:
    """Restores every BatchNorm's running statistics (and step count) on leaving."""
    saved = [
        (module, [buffer.clone() for buffer in (module.running_mean, module.running_var, module.num_batches_tracked)])
        for module in model.modules()
        if isinstance(module, _BatchNorm) and module.track_running_stats and module.running_mean is not None
    ]
    try:
        yield
    finally:
        for module, (mean, var, count) in saved:
            module.running_mean.copy_(mean)
            module.running_var.copy_(var)
            module.num_batches_tracked.copy_(count)


def hardest_views(
    model: nn.Module, views: List[torch.Tensor], keep: int, side: Optional[int] = None
) -> List[torch.Tensor]:
    """The ``keep`` hardest of each image's views, as ``keep`` tensors shaped like one of ``views``.

    Args:
        model: a method with ``backbone`` and ``projector`` (the embeddings the loss reads).
        views: m tensors ``(N, 3, S, S)``, the candidates (one resolution).
        keep: views per image to train on, ``2 <= keep < m``.
        side: the side the choosing pass sees the views at (None or >= S: their own).
    """
    stacked = torch.stack(views)  # (m, N, 3, S, S)
    with torch.no_grad(), running_stats_kept(model):
        images = stacked.flatten(0, 1)
        if side is not None and side < images.shape[-1]:
            images = F.interpolate(images, size=(side, side), mode="bilinear", antialias=True, align_corners=False)
        z = model.projector(model.backbone(images))
        chosen = hardest_subsets(z.view(len(views), -1, z.shape[-1]), keep)
    return list(gather_views(stacked, chosen).unbind(0))
