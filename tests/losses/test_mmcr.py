"""The MMCR loss (losses/mmcr.py) against a plain transcription of the published equation, in value and gradient."""

from __future__ import annotations

import pytest
import torch

from mvssl_plugin.losses import mmcr_loss


def transcription(views: torch.Tensor, local_weight: float) -> torch.Tensor:
    """Yerxa et al.'s objective written out image by image: unit-normalize every view, average
    each image's views into its centroid, minus the nuclear norm (sum of singular values) of
    the N x D centroid matrix, plus lambda times each image's m x D nuclear norm; over N."""
    m, n, _ = views.shape
    centroids, local = [], 0.0
    for b in range(n):
        rows = [views[v, b] / views[v, b].norm() for v in range(m)]
        centroids.append(sum(rows) / m)
        local = local + torch.linalg.svdvals(torch.stack(rows)).sum()
    return (-torch.linalg.svdvals(torch.stack(centroids)).sum() + local_weight * local) / n


@pytest.mark.parametrize("m", [2, 4, 8])
@pytest.mark.parametrize("local_weight", [0.0, 0.5])
def test_the_loss_equals_the_published_equation_in_value_and_gradient(m, local_weight):
    gen = torch.Generator().manual_seed(m)
    base = torch.randn(1, 12, 6, generator=gen, dtype=torch.float64)
    z = (base + 0.3 * torch.randn(m, 12, 6, generator=gen, dtype=torch.float64)).requires_grad_()
    ours = mmcr_loss(list(z.unbind(0)), local_weight=local_weight)
    (grad,) = torch.autograd.grad(ours, z)
    reference = transcription(z, local_weight)
    (reference_grad,) = torch.autograd.grad(reference, z)
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, reference_grad, rtol=1e-9, atol=1e-12)
    # identical views of orthogonal directions: centroids = unit rows, ||C||_* = N -> loss -1
    eye = torch.eye(6, dtype=torch.float64)[:4].expand(m, 4, 6)
    assert mmcr_loss(eye).item() == pytest.approx(-1.0)


def test_the_gradient_is_the_loss_derivative():
    z = torch.randn(3, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: mmcr_loss(x, local_weight=0.2), (z,))


def test_half_precision_is_computed_in_float32_and_bad_input_is_refused():
    z = torch.randn(2, 8, 4).to(torch.bfloat16)
    assert mmcr_loss(z).dtype == torch.float32
    with pytest.raises(ValueError, match="m >= 2 views"):
        mmcr_loss(torch.randn(1, 8, 4))
    with pytest.raises(ValueError, match="local_weight must be >= 0"):
        mmcr_loss(torch.randn(2, 8, 4), local_weight=-1)
