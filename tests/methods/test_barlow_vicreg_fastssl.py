"""The released objective through ``mabt`` / ``mavicreg`` built from the paper recipes: the
one-call forward of all views, the paper's projector, and the loss equal to the float64
reference of the released equations (tests/test_fastssl_reference.py)."""

from __future__ import annotations

import pytest
import torch
from fastssl_release import ref_barlow_twins, ref_vicreg
from helpers import tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.train.pretrain import build_pretrain_model


def build(recipe: str, m: int, tiny_cifar, tmp_path):
    overrides = tiny_overrides(tiny_cifar, tmp_path, **{"data.num_views": m, "backbone.name": "narrow_resnet18"})
    cfg, model = build_pretrain_model(compose_recipe(recipe, "pretrain", overrides))
    return cfg, model.double()


@pytest.mark.parametrize("m", [2, 3, 4, 8])
@pytest.mark.parametrize("recipe", ["mabt_paper_views_cifar.yaml", "mavicreg_paper_views_cifar.yaml"])
def test_the_training_step_computes_the_released_loss_on_one_forward_of_all_views(recipe, m, tiny_cifar, tmp_path):
    cfg, model = build(recipe, m, tiny_cifar, tmp_path)
    assert cfg.method_kwargs.objective == "fastssl" and model.fused_forward
    assert [type(layer).__name__ for layer in model.projector] == ["Linear", "BatchNorm1d", "ReLU", "Linear"]
    assert model.projector[0].bias is None
    gen = torch.Generator().manual_seed(m)
    views = [torch.randn(8, 3, 32, 32, generator=gen, dtype=torch.float64) for _ in range(m)]
    batch = [torch.arange(8), views, torch.randint(0, 3, (8,), generator=gen)]

    seen = {}
    loss_of = model.multiview_loss
    model.multiview_loss = lambda z: seen.setdefault("loss", loss_of(z))
    model.train()
    model.training_step(batch, 0)

    # what the released code does: one backbone + projector call on the m x N images (BatchNorm
    # statistics over all of them), split back into views
    model.train()
    z = model.projector(model.backbone(torch.cat(views))).chunk(m)
    if cfg.method == "mabt":
        reference = ref_barlow_twins(list(z), cfg.method_kwargs.lamb)
        assert cfg.method_kwargs.scale_loss == 1.0
    else:
        assert cfg.method_kwargs.sim_loss_weight == cfg.method_kwargs.var_loss_weight == 25.0
        reference = ref_vicreg(list(z), cfg.method_kwargs.sim_loss_weight, cfg.method_kwargs.var_loss_weight)
    torch.testing.assert_close(seen["loss"], reference, rtol=1e-5, atol=1e-8)


def test_the_paper_projector_is_in_the_checkpoint_and_loads_strictly(tiny_cifar, tmp_path):
    from mvssl_plugin.eval.features import load_pretrained
    from mvssl_plugin.train.pretrain import pretrain

    overrides = tiny_overrides(tiny_cifar, tmp_path, **{"backbone.name": "narrow_resnet18", "precision": 32})
    pretrain(compose_recipe("mabt_paper_views_cifar.yaml", "pretrain", overrides))
    (run,) = (tmp_path / "mabt").iterdir()
    model, cfg, _ = load_pretrained(run)  # strict: every weight of the 2-layer projector found
    assert cfg.method_kwargs.projector == "paper" and len(model.projector) == 4
