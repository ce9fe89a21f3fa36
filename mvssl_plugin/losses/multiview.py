"""Multi-view Barlow Twins and VICReg in the O(m) form of Agrawal, Ghosh et al. (NeurIPS 2024).

"Harnessing small projectors and multiple views for efficient vision pretraining" rewrites
both losses so that each view of an image is pulled toward the mean embedding of the other
views of that image, next to a redundancy-reduction (orthogonality) term. With
``zbar_{-i} = (sum_j z_j - z_i) / (m - 1)`` the m targets cost one sum and m
subtractions, so a loss over m views costs O(m), never O(m^2) view pairs.

Shapes: ``m`` views, a local batch of ``N`` images, embedding dimension ``D``. Views come
as a sequence of m tensors ``(N, D)`` or one tensor ``(m, N, D)``; view ``i`` of every
tensor must be the same image ``n``.

With m = 2 both losses equal solo-learn's two-view functions (``barlow_loss_func``,
``vicreg_loss_func``) in value and gradient, so existing hyper-parameters carry over.

Everything is computed in float32: under mixed precision a D x D correlation summed in
half precision loses the small off-diagonal entries the orthogonality term is about.
"""

from __future__ import annotations

from typing import Literal, Sequence, Union

import torch
import torch.nn.functional as F

from mvssl_plugin.losses.distributed import all_reduce_sum, gather_batch, global_batch_size

Views = Union[torch.Tensor, Sequence[torch.Tensor]]
RedundancyMode = Literal["per_view", "mean"]
REDUNDANCY_MODES: tuple[str, ...] = ("per_view", "mean")


def stack_views(views: Views) -> torch.Tensor:
    """Checks and stacks m view embeddings into one float32 tensor ``(m, N, D)``."""
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
        raise ValueError(f"a multi-view loss needs at least 2 views of each image, got {stacked.shape[0]}")
    if stacked.shape[1] < 2:
        raise ValueError(f"batch statistics need at least 2 images per batch, got {stacked.shape[1]}")
    return stacked.float()


def leave_one_out_means(z: torch.Tensor) -> torch.Tensor:
    """``(m, N, D) -> (m, N, D)``: entry i is the mean of all views but view i.

    One sum over views and m subtractions: the O(m) target of the paper's rewrite.
    """
    m = z.shape[0]
    return (z.sum(dim=0, keepdim=True) - z) / (m - 1)


def standardize(z: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Zero mean, unit (biased) variance over the batch axis ``-2`` of the global batch.

    In one process these are the numbers of solo-learn's ``BatchNorm1d(D, affine=False)``
    in training mode. Across processes the statistics are those of the concatenated
    batch, as the original Barlow Twins gets from its synchronised BatchNorm (solo-learn's
    functional BatchNorm uses each process's own batch).
    """
    n = global_batch_size(z.shape[-2], z.device)
    mean = all_reduce_sum(z.sum(dim=-2, keepdim=True)) / n
    centered = z - mean
    var = all_reduce_sum(centered.pow(2).sum(dim=-2, keepdim=True)) / n
    return centered / torch.sqrt(var + eps)


def off_diagonal_square_sum(matrices: torch.Tensor) -> torch.Tensor:
    """``(..., D, D) -> (...)``: sum of the squared off-diagonal entries."""
    return matrices.pow(2).sum(dim=(-2, -1)) - torch.diagonal(matrices, dim1=-2, dim2=-1).pow(2).sum(-1)


def _check_redundancy(redundancy: str) -> None:
    if redundancy not in REDUNDANCY_MODES:
        raise ValueError(f"redundancy must be one of {REDUNDANCY_MODES}, got {redundancy!r}")


def multiview_barlow_loss(
    views: Views,
    lamb: float = 5.1e-3,
    scale_loss: float = 0.025,
    redundancy: RedundancyMode = "per_view",
) -> torch.Tensor:
    """Multi-view Barlow Twins loss.

    With ``s_i`` the batch-standardized view i and ``t_i`` the mean of the other
    standardized views, ``C_i = s_i^T t_i / N`` (D x D, over the global batch) and

        L = scale_loss * 1/m sum_i [ sum_k (1 - C_i[k,k])^2 + lamb * sum_{k != l} C_i[k,l]^2 ]

    ``redundancy="mean"`` is the authors' cheaper variant: each view keeps only its
    diagonal term (O(N D) per view) and a single redundancy matrix, the auto-correlation
    ``A`` of the re-standardized mean of all m views, carries the orthogonality term:

        L = scale_loss * [ 1/m sum_i sum_k (1 - C_i[k,k])^2 + lamb * sum_{k != l} A[k,l]^2 ]

    Args:
        views: m embeddings ``(N, D)`` or one tensor ``(m, N, D)``, m >= 2.
        lamb: off-diagonal weight beta (see ``mvssl_plugin.beta`` for the 1/D rule).
        scale_loss: overall factor, as solo-learn's ``scale_loss``.
        redundancy: ``"per_view"`` (exact rewrite) or ``"mean"`` (one matrix).

    Returns:
        Scalar loss.
    """
    _check_redundancy(redundancy)
    if lamb < 0:
        raise ValueError(f"lamb (beta) must be >= 0, got {lamb}")
    s = standardize(stack_views(views))
    n = global_batch_size(s.shape[1], s.device)
    targets = leave_one_out_means(s)
    if redundancy == "per_view":
        corr = all_reduce_sum(torch.einsum("mni,mnj->mij", s, targets)) / n  # (m, D, D)
        on_diag = (torch.diagonal(corr, dim1=-2, dim2=-1) - 1).pow(2).sum(-1)  # (m,)
        per_view = on_diag + lamb * off_diagonal_square_sum(corr)
        return scale_loss * per_view.mean()
    diag = all_reduce_sum((s * targets).sum(dim=1)) / n  # (m, D)
    mean_embedding = standardize(s.mean(dim=0))  # (N, D)
    auto_corr = all_reduce_sum(mean_embedding.T @ mean_embedding) / n  # (D, D)
    on_diag = (diag - 1).pow(2).sum(-1).mean()
    return scale_loss * (on_diag + lamb * off_diagonal_square_sum(auto_corr))


def _variance_hinge(z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """``(k, N, D) -> (k,)``: VICReg's mean hinge on the per-dimension std."""
    return F.relu(1 - torch.sqrt(z.var(dim=1) + eps)).mean(dim=-1)


def _covariance_penalty(z: torch.Tensor) -> torch.Tensor:
    """``(k, N, D) -> (k,)``: VICReg's squared off-diagonal covariance, divided by D."""
    n, d = z.shape[1], z.shape[2]
    centered = z - z.mean(dim=1, keepdim=True)
    cov = torch.einsum("kni,knj->kij", centered, centered) / (n - 1)
    return off_diagonal_square_sum(cov) / d


def multiview_vicreg_loss(
    views: Views,
    sim_loss_weight: float = 25.0,
    var_loss_weight: float = 25.0,
    cov_loss_weight: float = 1.0,
    redundancy: RedundancyMode = "per_view",
) -> torch.Tensor:
    """Multi-view VICReg loss.

    With ``t_i`` the mean of the views other than i (raw embeddings, as VICReg's MSE):

        L = sim * 1/m sum_i MSE(z_i, t_i) + 2 * [ var * 1/m sum_i v(z_i) + cov * 1/m sum_i c(z_i) ]

    ``v`` is the std hinge and ``c`` the off-diagonal covariance penalty over the batch
    gathered from all processes (the MSE stays local, as in solo-learn). The factor 2
    keeps solo-learn's two-view scale, where v and c are summed over the pair; the
    weights therefore mean the same thing for every m. ``redundancy="mean"`` applies
    v and c once, to the mean embedding of the m views.

    Args:
        views: m embeddings ``(N, D)`` or one tensor ``(m, N, D)``, m >= 2.
        sim_loss_weight: invariance weight.
        var_loss_weight: variance weight.
        cov_loss_weight: covariance weight (beta times ``sim_loss_weight`` under the rule).
        redundancy: ``"per_view"`` or ``"mean"``.

    Returns:
        Scalar loss.
    """
    _check_redundancy(redundancy)
    if cov_loss_weight < 0:
        raise ValueError(f"cov_loss_weight must be >= 0, got {cov_loss_weight}")
    z = stack_views(views)
    invariance = (z - leave_one_out_means(z)).pow(2).mean()
    z_global = gather_batch(z, dim=1)
    regularized = z_global if redundancy == "per_view" else z_global.mean(dim=0, keepdim=True)
    variance = _variance_hinge(regularized).mean()
    covariance = _covariance_penalty(regularized).mean()
    return sim_loss_weight * invariance + 2 * (var_loss_weight * variance + cov_loss_weight * covariance)
