"""``method_kwargs.hard_views`` (methods/hard_views.py): the choosing pass, each method trained on the
chosen views the way solo-learn trains its methods, the beta rule counting them, and a user's run."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import run_entry, solo_shaped_cfg, tiny_overrides
from omegaconf import OmegaConf
from test_base import RandomImages, RandomViews, fast_dev_trainer, refused
from torch import nn
from torch.utils.data import DataLoader

import mvssl_plugin
from mvssl_plugin.methods.hard_views import hardest_views
from mvssl_plugin.registry import PLUGIN_METHODS, beta_slot


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.projector = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 3))


@pytest.fixture(scope="module")
def methods():
    return mvssl_plugin.register()


def test_the_choosing_pass_keeps_each_images_own_views_and_the_running_statistics():
    model = Tiny().train()
    views = [torch.randn(5, 3, 16, 16, generator=torch.Generator().manual_seed(v)) for v in range(4)]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    kept = hardest_views(model, views, keep=2, side=8)
    assert len(kept) == 2 and all(v.shape == (5, 3, 16, 16) for v in kept)
    for image in range(5):
        sources = [next(c for c in range(4) if torch.equal(view[image], views[c][image])) for view in kept]
        assert sources[0] < sources[1], "two distinct candidates of the same image, in order"
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "the running statistics moved"
    assert model.training and not any(v.requires_grad for v in kept)
    model.backbone(torch.randn(5, 3, 16, 16))  # a training forward still moves them: the check can fail
    assert not torch.equal(before["backbone.1.running_mean"], model.state_dict()["backbone.1.running_mean"])


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
def test_each_method_trains_on_the_chosen_views(methods, method, monkeypatch):
    cfg = solo_shaped_cfg(method, 4)
    OmegaConf.update(cfg, "method_kwargs.hard_views", 2, force_add=True)
    OmegaConf.update(cfg, "method_kwargs.hard_views_side", 16, force_add=True)
    model = methods[method](cfg)
    seen = []
    loss = type(model).multiview_loss
    monkeypatch.setattr(type(model), "multiview_loss", lambda self, z: seen.append(len(z)) or loss(self, z))
    before = [p.detach().clone() for p in model.projector.parameters()]
    train = DataLoader(RandomViews(4, 0), batch_size=4, drop_last=True)
    fast_dev_trainer(cfg).fit(model, train, DataLoader(RandomImages(), batch_size=4))
    assert seen == [2]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.projector.parameters())), "nothing trained"


@pytest.mark.parametrize("method", sorted(m for m in PLUGIN_METHODS if beta_slot(m) is not None))
def test_the_beta_rule_counts_the_views_trained_on(methods, method):
    chosen, plain = solo_shaped_cfg(method, 4), solo_shaped_cfg(method, 2)
    OmegaConf.update(chosen, "method_kwargs.hard_views", 2, force_add=True)
    methods[method].add_and_assert_specific_cfg(chosen)
    methods[method].add_and_assert_specific_cfg(plain)
    key = beta_slot(method).key
    assert chosen.method_kwargs[key] == plain.method_kwargs[key]


HARD_VIEW_CHECKS = [
    ({"method_kwargs.hard_views": 2}, r"hard_views=2 of data.num_views=2: keep at least 2 and fewer"),
    ({"method_kwargs.hard_views": 1, "data.num_large_crops": 4}, "keep at least 2"),
    ({"method_kwargs.hard_views": -1}, "hard_views=-1"),
    ({"method_kwargs.hard_views_side": 4}, "hard_views_side=4"),
    ({"method_kwargs.hard_views": 2, "data.num_large_crops": 4, "data.num_small_crops": 2}, "one resolution"),
]


@pytest.mark.parametrize("change,match", HARD_VIEW_CHECKS, ids=lambda v: str(v)[:50])
def test_the_checks_name_the_key_and_the_fix(methods, change, match):
    for method in sorted(PLUGIN_METHODS):
        refused(methods, method, change, match)


@pytest.mark.slow
def test_a_user_trains_on_the_hardest_views_from_the_entry_point(tiny_cifar, tmp_path):
    extra = {"data.num_views": 4, "+method_kwargs.hard_views": 2, "+method_kwargs.hard_views_side": 16}
    args = ["--config-name", "mmcr_cifar.yaml", *tiny_overrides(tiny_cifar, tmp_path, **extra)]
    result = run_entry("main_pretrain.py", args, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "mmcr").iterdir()
    saved = json.loads((run_dir / "args.json").read_text())
    assert saved["data"]["num_large_crops"] == 4 and saved["method_kwargs"]["hard_views"] == 2
    assert "train_mmcr_loss" in (run_dir / "metrics.csv").read_text()
    assert "4 x 32 px, the 2 hardest trained (chosen at 16 px)" in result.stdout  # the start block says so
    result = run_entry("main_export.py", [str(run_dir), "--out", str(tmp_path / "encoder")], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    train = json.loads((tmp_path / "encoder" / "config.json").read_text())["training"]
    assert (train["views"], train["views_trained"]) == (4, 2)
    assert "4 views per image (each image trained on its 2 hardest)" in (tmp_path / "encoder" / "README.md").read_text()

    bad = [
        "--config-name",
        "mmcr_cifar.yaml",
        *tiny_overrides(tiny_cifar, tmp_path / "bad", **{**extra, "+method_kwargs.hard_views": 4}),
    ]
    result = run_entry("main_pretrain.py", bad, tmp_path)
    assert result.returncode != 0 and "hard_views=4 of data.num_views=4" in result.stderr
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").rglob("*.ckpt"))
