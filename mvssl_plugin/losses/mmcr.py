"""Maximum Manifold Capacity Representations (MMCR) over m views.

Yerxa, Kuang, Simoncelli and Chung, "Learning efficient coding of natural images with maximum
manifold capacity representations", NeurIPS 2023. Each view's embedding is put on the unit
sphere; the views of one image average to its centroid; the loss rewards a centroid matrix
of large nuclear norm (centroids that are long, i.e. views that agree, and that spread over
many directions), optionally penalizing the spread of each image's own views:

    zhat_{b,v} = z_{b,v} / ||z_{b,v}||                         (views v = 1..m, images b = 1..N)
    c_b        = (1/m) sum_v zhat_{b,v},   C = [c_1; ...; c_N]  (N x D)
    Z_b        = [zhat_{b,1}; ...; zhat_{b,m}]                  (m x D)
    L          = ( -||C||_* + lambda * sum_b ||Z_b||_* ) / N

``||.||_*`` is the nuclear norm (the sum of singular values). lambda = 0 (the default)
keeps the global term alone. Dividing by N keeps the loss of order one whatever the batch.
Cost: one SVD of an N x D matrix (and N of m x D ones when lambda > 0): O(m N D) to build,
O(N D min(N, D)) for the SVD.

Under DDP the normalized views are gathered from every process along the batch axis (with
gradients flowing back to each process's share), so C is the centroid matrix of the global
batch, as in a single process holding all of it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mvssl_plugin.losses.distributed import gather_batch
from mvssl_plugin.losses.stacking import Views, stack_views


def mmcr_loss(views: Views, local_weight: float = 0.0) -> torch.Tensor:
    """MMCR loss of m views (see the module docstring for the equation).

    Args:
        views: m >= 2 tensors ``(N, D)`` or one ``(m, N, D)``, N >= 2; row ``n`` of every view
            is the same image (:func:`~mvssl_plugin.losses.stacking.stack_views`).
        local_weight: lambda, the weight of the per-image nuclear norms (>= 0).

    Returns:
        The scalar loss, float32 (float64 inputs stay float64); the SVD runs in full precision.

    Raises:
        ValueError: bad views, or a negative local_weight.
    """
    if local_weight < 0:
        raise ValueError(f"local_weight must be >= 0, got {local_weight}")
    z = stack_views(views)
    z = gather_batch(F.normalize(z, dim=-1), dim=1)  # (m, N_global, D), unit rows
    n = z.shape[1]
    loss = -torch.linalg.matrix_norm(z.mean(dim=0), ord="nuc")
    if local_weight > 0:
        loss = loss + local_weight * torch.linalg.matrix_norm(z.transpose(0, 1), ord="nuc").sum()
    return loss / n
