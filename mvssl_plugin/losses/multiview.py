"""Multi-view Barlow Twins and VICReg in their O(m) form.

"Harnessing small projectors and multiple views for efficient vision pretraining" (Agrawal,
Ghosh, Sodhani, Oberman, Richards; NeurIPS 2024) trains with m views per image, each view
pulled toward a mean embedding of the views of its image, next to a redundancy-reduction
(orthogonality) term. Two objectives are offered:

``objective="leave_one_out"`` (default, ours)
    view i against the mean of the *other* views,
    ``zbar_{-i} = (sum_j z_j - z_i) / (m - 1)``: one sum and m subtractions, so O(m),
    never O(m^2) view pairs. With m = 2 both losses equal solo-learn's two-view functions
    (``barlow_loss_func``, ``vicreg_loss_func``) in value and gradient, so solo-learn's
    hyper-parameters carry over.

``objective="fastssl"`` (the authors' released code, github.com/kumarkrishna/fastssl at
commit 96dfa37, ``fastssl/models/barlow_twins.py`` and ``vicreg.py``)
    reproduced equation for equation, including its normalization (Barlow Twins: L2 per
    sample, then one joint standardization of all m x N rows with the unbiased std and
    no eps) and its m > 2 form (Barlow Twins: each view against the mean of *all* views,
    the view included, and one auto-correlation of that mean for the off-diagonal term).

Shapes: ``m`` views, a local batch of ``N`` images, embedding dimension ``D``; the views
are checked and stacked by :func:`mvssl_plugin.losses.stacking.stack_views`.

Precision: float16 / bfloat16 inputs are computed in float32 (under mixed precision a
D x D correlation summed in half precision loses the small off-diagonal entries the
orthogonality term is about); float64 inputs stay float64.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch
import torch.nn.functional as F

from mvssl_plugin.losses.distributed import all_reduce_sum, gather_batch, global_batch_size
from mvssl_plugin.losses.objectives import LOSS_SCALE, check_pair
from mvssl_plugin.losses.stacking import Views, stack_views

Objective = Literal["leave_one_out", "fastssl"]


def leave_one_out_means(z: torch.Tensor) -> torch.Tensor:
    """``(m, N, D) -> (m, N, D)``: entry i is ``zbar_{-i} = (sum_j z_j - z_i) / (m - 1)``.

    One sum over views and m subtractions: the O(m) target of the paper's rewrite.
    """
    m = z.shape[0]
    return (z.sum(dim=0, keepdim=True) - z) / (m - 1)


def standardize(z: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``(..., N, D) -> (..., N, D)``: ``(z - mean) / sqrt(var + eps)`` over the batch axis ``-2``.

    Mean and biased variance are those of the global batch. In one process these are the
    numbers of solo-learn's ``BatchNorm1d(D, affine=False)`` in training mode. Across
    processes the statistics are those of the concatenated batch, as the original Barlow
    Twins gets from its synchronised BatchNorm (solo-learn's functional BatchNorm uses
    each process's own batch).
    """
    n = global_batch_size(z.shape[-2])
    mean = all_reduce_sum(z.sum(dim=-2, keepdim=True)) / n
    centered = z - mean
    var = all_reduce_sum(centered.pow(2).sum(dim=-2, keepdim=True)) / n
    return centered / torch.sqrt(var + eps)


def off_diagonal_square_sum(matrices: torch.Tensor) -> torch.Tensor:
    """``(..., D, D) -> (...)``: ``sum_{k != l} M[k, l]^2``."""
    return matrices.pow(2).sum(dim=(-2, -1)) - torch.diagonal(matrices, dim1=-2, dim2=-1).pow(2).sum(-1)


# ----------------------------------------------------------------------------- Barlow Twins


def _leave_one_out_barlow(z: torch.Tensor, lamb: float, redundancy: str) -> torch.Tensor:
    """``(m, N, D) -> ()``: the leave_one_out Barlow Twins loss before ``scale_loss``."""
    s = standardize(z)
    n = global_batch_size(s.shape[1])
    targets = leave_one_out_means(s)
    if redundancy == "per_view":
        corr = all_reduce_sum(torch.einsum("mni,mnj->mij", s, targets)) / n  # (m, D, D)
        on_diag = (torch.diagonal(corr, dim1=-2, dim2=-1) - 1).pow(2).sum(-1)  # (m,)
        return (on_diag + lamb * off_diagonal_square_sum(corr)).mean()
    diag = all_reduce_sum((s * targets).sum(dim=1)) / n  # (m, D)
    mean_embedding = standardize(s.mean(dim=0))  # (N, D)
    auto_corr = all_reduce_sum(mean_embedding.T @ mean_embedding) / n  # (D, D)
    on_diag = (diag - 1).pow(2).sum(-1).mean()
    return on_diag + lamb * off_diagonal_square_sum(auto_corr)


def _fastssl_barlow(z: torch.Tensor, lamb: float) -> torch.Tensor:
    """``(m, N, D) -> ()``: the released Barlow Twins loss, on the batch gathered from all processes."""
    z = gather_batch(F.normalize(z, dim=-1), dim=1)  # L2 per sample, then (m, N_global, D)
    m, n, d = z.shape
    rows = z.reshape(m * n, d)
    s = ((rows - rows.mean(dim=0)) / rows.std(dim=0)).reshape(m, n, d)  # joint, unbiased, no eps
    if m == 2:
        # the release sums the orderings (0, 1) and (1, 0) and halves; C and C^T give equal terms
        corr = s[0].T @ s[1] / n
        return (torch.diagonal(corr) - 1).pow(2).sum() + lamb * off_diagonal_square_sum(corr)
    zbar = s.mean(dim=0)  # (N, D), the view itself included, not re-standardized
    diag = (s * zbar).mean(dim=1)  # (m, D)
    auto_corr = zbar.T @ zbar / n
    return (diag - 1).pow(2).sum() / m + lamb * off_diagonal_square_sum(auto_corr)


def multiview_barlow_loss(
    views: Views,
    lamb: float = 5.1e-3,
    scale_loss: Optional[float] = None,
    redundancy: str = "per_view",
    objective: Objective = "leave_one_out",
) -> torch.Tensor:
    """Multi-view Barlow Twins loss.

    ``objective="leave_one_out"`` (ours): with ``s_i`` the batch-standardized view i
    (per view, biased variance, eps 1e-5: solo-learn's BatchNorm) and ``t_i`` the mean of
    the other standardized views, ``C_i = s_i^T t_i / N`` (D x D, over the global batch):

        L = scale_loss * 1/m sum_i [ sum_k (1 - C_i[k,k])^2 + lamb * sum_{k != l} C_i[k,l]^2 ]

    With m = 2 this is solo-learn's ``barlow_loss_func``. ``redundancy="mean_embedding"``
    (formerly ``"mean"``) is a cheaper variant of ours, not the authors': each view keeps
    its diagonal term (O(N D) per view) and a single D x D matrix, the auto-correlation
    ``A`` of the *re-standardized* mean of all m standardized views, carries the
    orthogonality term, so the D x D cost no longer grows with m:

        L = scale_loss * [ 1/m sum_i sum_k (1 - C_i[k,k])^2 + lamb * sum_{k != l} A[k,l]^2 ]

    ``objective="fastssl"`` (the authors' release, exactly): every row of the raw
    projector outputs is L2-normalized, ``u = z / ||z||``; all m x N rows are then
    standardized together, ``s = (u - mean) / std`` (unbiased std over the m N rows, no
    eps). For m = 2 it is standard Barlow Twins between the two views (the release sums
    both orderings and halves; C and C^T give the same value):

        C = s_1^T s_2 / N,   L = scale_loss * [ sum_k (1 - C[k,k])^2 + lamb * sum_{k != l} C[k,l]^2 ]

    For m > 2 each view meets the mean of *all* views, itself included, and one
    auto-correlation of that (not re-standardized) mean carries the off-diagonal term,
    with lamb not divided by m:

        zbar = 1/m sum_j s_j,   A = zbar^T zbar / N
        L = scale_loss * [ 1/m sum_i sum_k (mean_n s_i[n,k] zbar[n,k] - 1)^2 + lamb * sum_{k != l} A[k,l]^2 ]

    Because view i is part of zbar, its diagonal term is ((m-1)/m)^2 times a
    leave-one-out one; ``mvssl_plugin.beta_rule`` maps lamb between the objectives.

    Under DDP, leave_one_out all-reduces the batch statistics and the D x D matrices
    (each process computes its share); fastssl gathers the L2-normalized views
    ``(m, N, D)`` from every process along the batch axis and computes the loss of the
    global batch in every process (the gather costs m N D numbers per process; each
    process then repeats the D x D products of the whole global batch).

    Args:
        views: m embeddings ``(N, D)`` or one tensor ``(m, N, D)``, m >= 2.
        lamb: off-diagonal weight beta (see ``mvssl_plugin.beta_rule`` for the 1/D rule).
        scale_loss: overall factor. None: ``losses.objectives.LOSS_SCALE`` (0.025, as solo-learn's
            ``barlow_loss_func``, for leave_one_out; 1 for fastssl, whose release has none).
        redundancy: ``"per_view"`` or ``"mean_embedding"``, leave_one_out only.
        objective: ``"leave_one_out"`` or ``"fastssl"``.

    Returns:
        Scalar loss, float32 (float64 for float64 views).

    Raises:
        ValueError: bad views, a negative lamb, an unknown objective or redundancy, or a
            redundancy other than ``per_view`` with objective ``fastssl``.
    """
    mode = check_pair(objective, redundancy)
    if lamb < 0:
        raise ValueError(f"lamb (beta) must be >= 0, got {lamb}")
    scale = LOSS_SCALE[objective] if scale_loss is None else scale_loss
    z = stack_views(views)
    if objective == "fastssl":
        return scale * _fastssl_barlow(z, lamb)
    return scale * _leave_one_out_barlow(z, lamb, mode)


# ----------------------------------------------------------------------------- VICReg


def _variance_hinge(z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """``(k, N, D) -> (k,)``: ``h(x) = 1/D sum_d relu(1 - sqrt(var_d(x) + eps))``, unbiased var.

    eps = 1e-4 is solo-learn's and VICReg's; the release uses eps = 0 (``x.std(0)``).
    """
    return F.relu(1 - torch.sqrt(z.var(dim=1) + eps)).mean(dim=-1)


def _covariance_penalty(z: torch.Tensor) -> torch.Tensor:
    """``(k, N, D) -> (k,)``: ``c(x) = 1/D sum_{k != l} Cov(x)[k,l]^2``, covariance over N - 1."""
    n, d = z.shape[1], z.shape[2]
    centered = z - z.mean(dim=1, keepdim=True)
    cov = torch.einsum("kni,knj->kij", centered, centered) / (n - 1)
    return off_diagonal_square_sum(cov) / d


def _leave_one_out_vicreg(z: torch.Tensor, sim: float, var: float, cov: float, redundancy: str) -> torch.Tensor:
    """``(m, N, D) -> ()``: the leave_one_out VICReg loss."""
    invariance = (z - leave_one_out_means(z)).pow(2).mean()
    z_global = gather_batch(z, dim=1)
    regularized = z_global if redundancy == "per_view" else z_global.mean(dim=0, keepdim=True)
    variance = _variance_hinge(regularized).mean()
    covariance = _covariance_penalty(regularized).mean()
    return sim * invariance + 2 * (var * variance + cov * covariance)


def _fastssl_vicreg(z: torch.Tensor, sim: float, var: float, cov: float) -> torch.Tensor:
    """``(m, N, D) -> ()``: the released VICReg loss, on the batch gathered from all processes."""
    z = gather_batch(z, dim=1)
    targets = leave_one_out_means(z)
    if z.shape[0] == 2:  # the release computes view 0's term only (view 1's is its mirror)
        z, targets = z[:1], targets[:1]
    invariance = (z - targets).pow(2).mean(dim=(1, 2))  # (k,)
    variance = (_variance_hinge(z, eps=0.0) + _variance_hinge(targets, eps=0.0)) / 2
    covariance = _covariance_penalty(z) + _covariance_penalty(targets)
    return (sim * invariance + var * variance + cov * covariance).mean()


def multiview_vicreg_loss(
    views: Views,
    sim_loss_weight: float = 25.0,
    var_loss_weight: float = 25.0,
    cov_loss_weight: float = 1.0,
    redundancy: str = "per_view",
    objective: Objective = "leave_one_out",
) -> torch.Tensor:
    """Multi-view VICReg loss on raw (not normalized) embeddings.

    With ``t_i`` the mean of the views other than i, ``h(x) = 1/D sum_d relu(1 - std_d(x))``
    the std hinge and ``c(x) = 1/D sum_{k != l} Cov(x)[k,l]^2`` (covariance over N - 1):

    ``objective="leave_one_out"`` (ours; std = sqrt(unbiased var + 1e-4), as solo-learn):

        L = sim * 1/m sum_i MSE(z_i, t_i) + 2 * [ var * 1/m sum_i h(z_i) + cov * 1/m sum_i c(z_i) ]

    h and c see the batch gathered from all processes, the MSE stays local (as in
    solo-learn; with equal shards the mean of local MSEs is the global one). The factor
    2 keeps solo-learn's two-view scale, where h and c are summed over the pair; with
    m = 2 this is solo-learn's ``vicreg_loss_func``. ``redundancy="mean_embedding"``
    (formerly ``"mean"``, a cheaper variant of ours) applies h and c once, to the mean
    embedding of the m views.

    ``objective="fastssl"`` (the authors' release, exactly; std unbiased with no eps):

        l_i = lambda * MSE(z_i, t_i) + mu * [h(z_i) + h(t_i)] / 2 + [c(z_i) + c(t_i)]
        L = l_0 for m = 2 (t_0 = z_1),   L = 1/m sum_i l_i for m > 2

    The release is written with weights (lambda, mu, 1); here lambda = sim_loss_weight,
    mu = var_loss_weight and the covariance term is multiplied by cov_loss_weight (1 in
    the release). Note that with m = 2 the release's mu weighs the *mean* of the two
    hinges where solo-learn's var_loss_weight weighs their sum:
    ``mvssl_plugin.beta_rule.solo_vicreg_weights`` converts. Under DDP the views ``(m, N, D)``
    are gathered from every process along the batch axis (m N D numbers, cheap) and
    every term is computed on the global batch.

    Args:
        views: m embeddings ``(N, D)`` or one tensor ``(m, N, D)``, m >= 2.
        sim_loss_weight: invariance weight (fastssl's lambda).
        var_loss_weight: variance weight (fastssl's mu).
        cov_loss_weight: covariance weight (beta times ``sim_loss_weight`` under the rule).
        redundancy: ``"per_view"`` or ``"mean_embedding"``, leave_one_out only.
        objective: ``"leave_one_out"`` or ``"fastssl"``.

    Returns:
        Scalar loss, float32 (float64 for float64 views).

    Raises:
        ValueError: bad views, a negative cov_loss_weight, an unknown objective or
            redundancy, or a redundancy other than ``per_view`` with objective ``fastssl``.
    """
    mode = check_pair(objective, redundancy)
    if cov_loss_weight < 0:
        raise ValueError(f"cov_loss_weight must be >= 0, got {cov_loss_weight}")
    z = stack_views(views)
    if objective == "fastssl":
        return _fastssl_vicreg(z, sim_loss_weight, var_loss_weight, cov_loss_weight)
    return _leave_one_out_vicreg(z, sim_loss_weight, var_loss_weight, cov_loss_weight, mode)
