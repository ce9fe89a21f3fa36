"""Which of an image's candidate views are the hardest to pull together: pure torch.

Hard positive mining (arXiv 2212.05611, WACV 2023, names it; arXiv 2310.03940's hard view
selection spells out a procedure: cut more views than are trained, forward them without
gradients, train on the ones the loss finds hardest). Here "hardest" is read off the losses
this plugin trains: each pulls an image's views toward their mean embedding, and for unit
vectors the pull's size is fixed by the mean's norm,

    sum_v || zhat_v - zbar ||^2 = k (1 - || zbar ||^2),   zbar = (1 / k) sum_v zhat_v,

so for each image the k views (of its C candidates) whose normalized embeddings have the
shortest mean are the ones with the largest invariance term (and, for MMCR, the smallest
centroid, the term its nuclear norm rewards). Every k-subset is scored: C choose k stays small
(70 at C = 8, k = 4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def hardest_subsets(z: torch.Tensor, k: int) -> torch.Tensor:
    """Per image, the ``k`` candidate views whose normalized embeddings have the shortest mean.

    Args:
        z: ``(C, N, D)``: C candidate views of N images, any float dtype (scored in float32).
        k: views to keep per image, ``1 <= k <= C``.

    Returns:
        ``(k, N)`` long: row ``v`` holds, for each image, the candidate index of its ``v``-th
        kept view (in increasing order of index, so the views keep their pipelines' order).
    """
    if z.dim() != 3:
        raise ValueError(f"z must be (candidates, images, dim), got shape {tuple(z.shape)}")
    candidates = z.shape[0]
    if not 1 <= k <= candidates:
        raise ValueError(f"k={k}: keep between 1 and the {candidates} candidate views")
    subsets = torch.combinations(torch.arange(candidates, device=z.device), r=k).view(-1, k)  # (S, k)
    zhat = F.normalize(z.float(), dim=-1)
    mean_norm = zhat[subsets].mean(dim=1).norm(dim=-1)  # (S, k, N, D) -> (S, N)
    return subsets[mean_norm.argmin(dim=0)].T.contiguous()  # (N, k) -> (k, N)


def gather_views(views: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """``views[chosen[v, i], i]`` for every kept view v and image i.

    Args:
        views: ``(C, N, ...)``: the candidate views, stacked.
        chosen: ``(k, N)`` long, as :func:`hardest_subsets` returns.

    Returns:
        ``(k, N, ...)``: each image's kept views.
    """
    images = torch.arange(views.shape[1], device=views.device)
    return views[chosen.to(views.device), images]
