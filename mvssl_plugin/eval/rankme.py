"""Effective rank of an embedding matrix: the dimensional-collapse signal.

RankMe (Garrido, Balestriero, Najman, LeCun, ICML 2023): with the singular values
sigma_k of the embeddings Z (N x d), p_k = sigma_k / ||sigma||_1 + eps and

    RankMe(Z) = exp(-sum_k p_k log p_k),

between 1 (all embeddings on a line) and min(N, d) (a flat spectrum). Pure torch.
"""

from __future__ import annotations

import torch


def rankme(embeddings: torch.Tensor, eps: float = 1e-7) -> float:
    """RankMe of ``embeddings`` ``(N, d)``, computed in float64."""
    if embeddings.ndim != 2 or min(embeddings.shape) < 1:
        raise ValueError(f"rankme needs an (N, d) matrix, got shape {tuple(embeddings.shape)}")
    singular = torch.linalg.svdvals(embeddings.detach().to(torch.float64))
    p = singular / singular.sum().clamp_min(torch.finfo(torch.float64).tiny) + eps
    return float(torch.exp(-(p * p.log()).sum()))
