"""Each image's hardest views (losses/hard_views.py), against a brute force over every subset."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

import mvssl_plugin.losses as losses
from mvssl_plugin.losses.hard_views import gather_views, hardest_subsets


def invariance(zhat: torch.Tensor) -> torch.Tensor:
    """sum_v ||zhat_v - zbar||^2 per image, for (k, N, D) unit vectors."""
    return (zhat - zhat.mean(0, keepdim=True)).pow(2).sum(dim=(0, 2))


def test_the_kept_pair_is_the_one_that_agrees_least():
    z = torch.tensor([[[1.0, 0.0]], [[0.9, 0.1]], [[-1.0, 0.05]], [[0.8, 0.3]]])  # (4 views, 1 image, 2)
    assert hardest_subsets(z, 2).tolist() == [[0], [2]]


@pytest.mark.parametrize("candidates,k", [(4, 2), (5, 3), (8, 4), (3, 1), (4, 4)])
def test_the_kept_views_have_the_largest_invariance_term_of_any_subset(candidates, k):
    z = torch.randn(candidates, 6, 5, generator=torch.Generator().manual_seed(candidates + k))
    chosen = hardest_subsets(z, k)
    assert chosen.shape == (k, 6) and chosen.dtype == torch.long
    assert bool((chosen[1:] > chosen[:-1]).all()), "each image's views stay in the pipelines' order"
    zhat = F.normalize(z, dim=-1)
    kept = invariance(gather_views(zhat, chosen))
    best = torch.stack([invariance(zhat[list(s)]) for s in itertools.combinations(range(candidates), k)]).max(0).values
    torch.testing.assert_close(kept, best)


def test_scoring_ignores_the_embeddings_length_and_dtype():
    z = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(0))
    scaled = z * torch.rand(4, 5, 1, generator=torch.Generator().manual_seed(1)).add(0.5)
    assert torch.equal(hardest_subsets(z, 2), hardest_subsets(scaled, 2))
    assert torch.equal(hardest_subsets(z.double(), 2), hardest_subsets(z, 2))


def test_gather_views_takes_each_images_own_views():
    views = torch.arange(4 * 3).view(4, 3, 1).float()  # candidate v of image i holds 3 v + i
    chosen = torch.tensor([[0, 1, 2], [3, 2, 3]])
    assert gather_views(views, chosen).squeeze(-1).tolist() == [[0, 4, 8], [9, 7, 11]]


@pytest.mark.parametrize(
    "shape,k,match", [((4, 5), 2, "candidates, images, dim"), ((3, 2, 4), 4, "k=4"), ((3, 2, 4), 0, "k=0")]
)
def test_bad_input_is_named(shape, k, match):
    with pytest.raises(ValueError, match=match):
        hardest_subsets(torch.randn(*shape), k)


@pytest.mark.parametrize("name", losses.__all__)
def test_every_member_the_package_names_imports(name):
    assert getattr(losses, name) is not None
