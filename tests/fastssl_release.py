"""The authors' released losses (github.com/kumarkrishna/fastssl at commit 96dfa37), transcribed
loop by loop in float64: the reference the fastssl objective is checked against."""

from __future__ import annotations

import torch


def ref_off_diagonal_square_sum(matrix: torch.Tensor) -> torch.Tensor:
    """sum_{k != l} M[k, l]^2, with an explicit off-diagonal mask."""
    d = matrix.shape[0]
    mask = torch.ones(d, d, dtype=matrix.dtype) - torch.eye(d, dtype=matrix.dtype)
    return (matrix.pow(2) * mask).sum()


def ref_barlow_twins(views: list[torch.Tensor], lamb: float) -> torch.Tensor:
    """Released Barlow Twins: L2 per row, one standardization of all m x N rows, then the m = 2 / m > 2 forms."""
    m = len(views)
    n, d = views[0].shape
    normalized = [v / torch.sqrt((v * v).sum(dim=1, keepdim=True)) for v in views]
    rows = torch.cat(normalized, dim=0)  # (m N, D)
    columns = []
    for k in range(d):
        column = rows[:, k]
        mean = column.sum() / (m * n)
        std = torch.sqrt(((column - mean) ** 2).sum() / (m * n - 1))  # unbiased, no eps
        columns.append((column - mean) / std)
    s = list(torch.stack(columns, dim=1).split(n, dim=0))  # m tensors (N, D)

    if m == 2:
        total = 0.0
        for i, j in ((0, 1), (1, 0)):
            c = s[i].T @ s[j] / n
            on_diag = sum((c[k, k] - 1) ** 2 for k in range(d))
            total = total + on_diag + lamb * ref_off_diagonal_square_sum(c)
        return total / 2

    zbar = sum(s) / m  # the view itself included
    on_diag = 0.0
    for i in range(m):
        for k in range(d):
            on_diag = on_diag + ((s[i][:, k] * zbar[:, k]).mean() - 1) ** 2
    auto = zbar.T @ zbar / n
    return on_diag / m + lamb * ref_off_diagonal_square_sum(auto)


def ref_std_hinge(x: torch.Tensor) -> torch.Tensor:
    """h(x) = 1/D sum_d relu(1 - std_d(x)), unbiased std, no eps."""
    n, d = x.shape
    total = 0.0
    for k in range(d):
        mean = x[:, k].sum() / n
        std = torch.sqrt(((x[:, k] - mean) ** 2).sum() / (n - 1))
        total = total + torch.relu(1 - std)
    return total / d


def ref_covariance(x: torch.Tensor) -> torch.Tensor:
    """c(x) = 1/D sum_{k != l} Cov[k, l]^2, covariance over N - 1."""
    n, d = x.shape
    centered = x - x.mean(dim=0)
    cov = centered.T @ centered / (n - 1)
    return ref_off_diagonal_square_sum(cov) / d


def ref_vicreg(views: list[torch.Tensor], lam: float, mu: float) -> torch.Tensor:
    """Released VICReg with weights (lambda, mu, 1): view i against the mean of the other views."""
    m = len(views)

    def term(i: int) -> torch.Tensor:
        others = [views[j] for j in range(m) if j != i]
        target = sum(others) / (m - 1)
        mse = ((views[i] - target) ** 2).mean()
        hinge = (ref_std_hinge(views[i]) + ref_std_hinge(target)) / 2
        cov = ref_covariance(views[i]) + ref_covariance(target)
        return lam * mse + mu * hinge + cov

    if m == 2:
        return term(0)
    return sum(term(i) for i in range(m)) / m


# ----------------------------------------------------------------------------- data
