"""objective="fastssl" against a loop-by-loop reference of the authors' released equations.

The reference below is written from the equations of the release (github.com/kumarkrishna/fastssl,
``fastssl/models/barlow_twins.py`` and ``vicreg.py`` at commit 96dfa37), in float64, one view
and one dimension at a time where that keeps it obviously right; it shares no code with the
library. Value and gradient must agree to 1e-5.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fastssl_release import ref_barlow_twins, ref_vicreg

from mvssl_plugin.losses import multiview_barlow_loss, multiview_vicreg_loss
from mvssl_plugin.losses.objectives import OBJECTIVES, REDUNDANCY_MODES

# ----------------------------------------------------------------------------- reference


def make_views(m: int, d: int, n: int = 32, seed: int = 0) -> list[torch.Tensor]:
    """Correlated float64 views (m x (N, D)), per-dimension std about 0.2 to 2: the hinge is on in some dims."""
    gen = torch.Generator().manual_seed(seed)
    scale = 0.2 + 1.8 * torch.rand(d, generator=gen, dtype=torch.float64)
    base = torch.randn(n, d, generator=gen, dtype=torch.float64)
    mixing = torch.eye(d, dtype=torch.float64) + 0.1 * torch.randn(d, d, generator=gen, dtype=torch.float64)
    return [
        (((base + 0.5 * torch.randn(n, d, generator=gen, dtype=torch.float64)) @ mixing) * scale).requires_grad_()
        for _ in range(m)
    ]


def assert_same_value_and_gradient(ours: torch.Tensor, reference: torch.Tensor, inputs: list[torch.Tensor]) -> None:
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-8)
    for g_ours, g_ref in zip(torch.autograd.grad(ours, inputs), torch.autograd.grad(reference, inputs)):
        scale = g_ref.abs().max()
        torch.testing.assert_close(g_ours / scale, g_ref / scale, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- tests

SIZES = [(m, d) for m in (2, 3, 4, 8) for d in (32, 256)]


@pytest.mark.parametrize("m,d", SIZES)
def test_barlow_twins_equals_the_release(m, d):
    z = make_views(m, d, seed=m * d)
    lamb = 3.3 / d
    ours = multiview_barlow_loss(z, lamb=lamb, objective="fastssl")
    assert_same_value_and_gradient(ours, ref_barlow_twins(z, lamb), z)


@pytest.mark.parametrize("m,d", SIZES)
def test_vicreg_equals_the_release(m, d):
    z = make_views(m, d, seed=m * d + 1)
    ours = multiview_vicreg_loss(
        z, sim_loss_weight=25.0, var_loss_weight=25.0, cov_loss_weight=1.0, objective="fastssl"
    )
    assert_same_value_and_gradient(ours, ref_vicreg(z, 25.0, 25.0), z)


def test_weights_map_onto_the_release():
    """lambda = sim, mu = var, and cov_loss_weight multiplies the release's covariance term (1 there)."""
    z = make_views(4, 32, seed=7)
    for lam, mu in ((10.0, 3.0), (0.0, 1.0), (1.0, 0.0)):
        ours = multiview_vicreg_loss(z, lam, mu, 1.0, objective="fastssl")
        torch.testing.assert_close(ours, ref_vicreg(z, lam, mu), rtol=1e-10, atol=1e-12)
    without_cov = multiview_vicreg_loss(z, 10.0, 3.0, 0.0, objective="fastssl")
    doubled_cov = multiview_vicreg_loss(z, 10.0, 3.0, 2.0, objective="fastssl")
    torch.testing.assert_close(doubled_cov - without_cov, 2 * (ref_vicreg(z, 10.0, 3.0) - without_cov))


def test_barlow_scale_loss_is_an_overall_factor_defaulting_to_one():
    z = make_views(4, 32, seed=3)
    plain = multiview_barlow_loss(z, lamb=0.01, objective="fastssl")
    torch.testing.assert_close(plain, ref_barlow_twins(z, 0.01))
    torch.testing.assert_close(multiview_barlow_loss(z, lamb=0.01, scale_loss=0.5, objective="fastssl"), plain / 2)


def test_barlow_twins_ignores_the_norm_of_each_row():
    """The release L2-normalizes each sample first: rescaling a row changes nothing."""
    z = [v.detach() for v in make_views(3, 32, seed=4)]
    row_scales = torch.rand(3, 32, 1, dtype=torch.float64) + 0.5
    scaled = [v * s for v, s in zip(z, row_scales)]
    torch.testing.assert_close(
        multiview_barlow_loss(scaled, lamb=0.01, objective="fastssl"),
        multiview_barlow_loss(z, lamb=0.01, objective="fastssl"),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_lower_precisions_are_computed_in_float32(dtype):
    z = torch.stack([v.detach() for v in make_views(4, 32, seed=5)])
    for loss_fn in (multiview_barlow_loss, multiview_vicreg_loss):
        for objective in OBJECTIVES:
            low = loss_fn(z.to(dtype), objective=objective)
            assert low.dtype == torch.float32
            exact = loss_fn(z.to(dtype).double(), objective=objective)
            torch.testing.assert_close(low.double(), exact, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
@pytest.mark.parametrize("redundancy", ["mean_embedding", "mean"])
def test_redundancy_variants_are_rejected_with_fastssl(loss_fn, redundancy):
    z = make_views(4, 16)
    with pytest.raises(ValueError, match="redundancy") as err:
        loss_fn(z, redundancy=redundancy, objective="fastssl")
    assert "objective" in str(err.value) and "fastssl" in str(err.value)


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
def test_unknown_objective_is_rejected(loss_fn):
    with pytest.raises(ValueError, match="objective"):
        loss_fn(make_views(2, 16), objective="pairs")


def test_exported_names():
    assert OBJECTIVES == ("leave_one_out", "fastssl")
    assert REDUNDANCY_MODES == ("per_view", "mean_embedding")


# ----------------------------------------------------------------------------- DDP

WORLD = 2


def _full_batch() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(16, 8, generator=gen) + 0.5 * torch.randn(4, 16, 8, generator=gen)


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    results = {}
    for name, fn in (("barlow", multiview_barlow_loss), ("vicreg", multiview_vicreg_loss)):
        for m in (2, 4):
            shard = _full_batch()[:m].chunk(WORLD, dim=1)[rank].clone().requires_grad_()
            loss = fn(shard, objective="fastssl")
            loss.backward()
            results[(name, m)] = (loss.detach(), shard.grad)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_compute_the_loss_of_the_global_batch(tmp_path):
    """Every process holds the global loss; each shard's gradient / world size is the one-process gradient."""
    mp.spawn(_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    for name, fn in (("barlow", multiview_barlow_loss), ("vicreg", multiview_vicreg_loss)):
        for m in (2, 4):
            whole = _full_batch()[:m].requires_grad_()
            loss = fn(whole, objective="fastssl")
            loss.backward()
            for result in ranks:
                torch.testing.assert_close(result[(name, m)][0], loss.detach(), rtol=1e-5, atol=0)
            grads = torch.cat([result[(name, m)][1] for result in ranks], dim=1) / WORLD
            relative = (grads - whole.grad).abs().max() / whole.grad.abs().max()
            assert relative <= 1e-5, f"{name}, m={m}: gradient differs by {relative:.2e}"
