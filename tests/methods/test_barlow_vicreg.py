"""MultiAugBarlowTwins / MultiAugVICReg built from the recipes, against solo-learn's methods."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.methods import MultiAugBarlowTwins, MultiAugVICReg
from mvssl_plugin.train.pretrain import build_pretrain_model


def build(recipe: str, tiny_cifar, tmp_path, *extra: str):
    cfg = compose_recipe(recipe, "pretrain", tiny_overrides(tiny_cifar, tmp_path) + list(extra))
    return build_pretrain_model(cfg)


def batch(num_large: int, num_small: int = 0, n: int = 8, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    views = [torch.randn(n, 3, 32, 32, generator=gen) for _ in range(num_large)]
    views += [torch.randn(n, 3, 16, 16, generator=gen) for _ in range(num_small)]
    return [torch.arange(n), views, torch.randint(0, 3, (n,), generator=gen)]


def step_and_grads(model, data):
    model.zero_grad()
    loss = model.training_step(data, 0)
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    "recipe,builtin,extra,dtype",
    [
        # solo-learn's barlow_loss_func builds a float32 BatchNorm inside: float32 only
        (
            "mabt_cifar_2views_d8192.yaml",
            "barlow_twins",
            ["method_kwargs.lamb=0.01", "method_kwargs.scale_loss=0.1"],
            torch.float32,
        ),
        ("mavicreg_cifar_2views_d8192.yaml", "vicreg", ["method_kwargs.cov_loss_weight=0.5"], torch.float64),
    ],
)
def test_two_views_match_solo_learns_method(recipe, builtin, extra, dtype, tiny_cifar, tmp_path):
    """Same weights, same batch: same loss and the same gradient on every parameter. The biases
    ahead of a BatchNorm have a true gradient of 0: in float32 their rounding noise is all they
    show (VICReg's reached 4e-6 with the width-8 network and d = 8192), so VICReg runs in float64."""
    _, ours = build(recipe, tiny_cifar, tmp_path, *extra)
    _, solo = build(recipe, tiny_cifar, tmp_path, *extra, f"method={builtin}")
    assert type(solo).__name__ in ("BarlowTwins", "VICReg")
    solo.load_state_dict(ours.state_dict())
    ours, solo = ours.to(dtype), solo.to(dtype)
    indexes, views, targets = batch(2)
    data = [indexes, [v.to(dtype) for v in views], targets]
    loss_ours, grads_ours = step_and_grads(ours, data)
    loss_solo, grads_solo = step_and_grads(solo, data)
    torch.testing.assert_close(loss_ours, loss_solo, rtol=1e-5, atol=1e-6)
    assert grads_ours.keys() == grads_solo.keys() and len(grads_ours) > 10
    for name, expected in grads_solo.items():
        error = (grads_ours[name] - expected).abs().max()
        assert error <= 1e-4 * expected.abs().max() + 1e-6, f"{name}: {error} vs {expected.abs().max()}"


@pytest.mark.parametrize(
    "recipe,cls", [("mabt_cifar.yaml", MultiAugBarlowTwins), ("mavicreg_cifar.yaml", MultiAugVICReg)]
)
@pytest.mark.parametrize("m", [2, 4, 8])
def test_m_views_train(recipe, cls, m, tiny_cifar, tmp_path):
    cfg, model = build(recipe, tiny_cifar, tmp_path, f"data.num_views={m}")
    assert isinstance(model, cls) and model.num_crops == m
    loss, grads = step_and_grads(model, batch(m))
    assert torch.isfinite(loss)
    assert grads["backbone.conv1.weight"].abs().sum() > 0
    assert grads["projector.6.weight"].abs().sum() > 0


@pytest.mark.parametrize("large,small", [(2, 3), (1, 3)])
def test_mixed_resolution_views(large, small, tiny_cifar, tmp_path):
    views = f"data.num_views={large + small}", f"data.num_small_views={small}"  # m counts both kinds
    cfg, model = build("mabt_cifar_multicrop.yaml", tiny_cifar, tmp_path, *views)
    assert (cfg.data.num_large_crops, cfg.data.num_small_crops) == (large, small)
    loss, grads = step_and_grads(model, batch(large, small))
    assert torch.isfinite(loss) and grads["backbone.conv1.weight"].abs().sum() > 0


@pytest.mark.parametrize("recipe", ["mabt_cifar.yaml", "mabt_cifar_multicrop.yaml"])
def test_fused_forward_keeps_views_in_order(recipe, tiny_cifar, tmp_path):
    """With BatchNorm on running statistics (eval mode) one call per resolution must give
    exactly the per-view loss: any mix-up of views or images would change it."""
    _, per_view = build(recipe, tiny_cifar, tmp_path)
    _, fused = build(recipe, tiny_cifar, tmp_path, "method_kwargs.fused_forward=true")
    fused.load_state_dict(per_view.state_dict())
    per_view.eval(), fused.eval()
    data = batch(per_view.num_large_crops, per_view.num_small_crops)
    torch.testing.assert_close(per_view.training_step(data, 0), fused.training_step(data, 0), rtol=1e-5, atol=1e-6)
    assert (fused.num_large_crops, fused.num_small_crops) == (per_view.num_large_crops, per_view.num_small_crops)


def test_fused_forward_trains(tiny_cifar, tmp_path):
    _, model = build("mavicreg_cifar.yaml", tiny_cifar, tmp_path, "method_kwargs.fused_forward=true")
    loss, grads = step_and_grads(model, batch(4))
    assert torch.isfinite(loss) and grads["backbone.conv1.weight"].abs().sum() > 0


def test_mean_redundancy_variant_trains(tiny_cifar, tmp_path):
    _, model = build("mabt_cifar.yaml", tiny_cifar, tmp_path, "method_kwargs.redundancy=mean_embedding")
    loss, _ = step_and_grads(model, batch(4))
    assert torch.isfinite(loss)


def test_non_finite_loss_stops_with_a_clear_error(tiny_cifar, tmp_path):
    _, model = build("mabt_cifar.yaml", tiny_cifar, tmp_path)
    data = batch(4)
    data[1][0][0, 0, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="train_barlow_loss is nan.*lr"):
        model.training_step(data, 0)
