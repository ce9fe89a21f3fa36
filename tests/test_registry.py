"""register(): the plugin's names in solo-learn's own tables, once, without clobbering."""

from __future__ import annotations

import pytest
import solo.methods
import torch
from solo.methods.base import BaseMethod

import mvssl_plugin
from mvssl_plugin.backbones import NarrowResNet18
from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.data.key_checks import apply_backbone_defaults
from mvssl_plugin.methods import MultiAugBarlowTwins, MultiAugVICReg
from mvssl_plugin.registry import PLUGIN_BACKBONES, PLUGIN_METHODS, register


def test_register_adds_methods_and_backbones_idempotently():
    before = dict(solo.methods.METHODS)
    methods = register()
    assert methods is solo.methods.METHODS
    assert methods["mabt"] is MultiAugBarlowTwins and methods["mavicreg"] is MultiAugVICReg
    assert set(PLUGIN_METHODS) <= set(methods) and set(PLUGIN_BACKBONES) <= set(BaseMethod._BACKBONES)
    again = dict(mvssl_plugin.register())
    assert again == dict(solo.methods.METHODS)
    assert {k: v for k, v in again.items() if k in before} == before  # solo-learn's own untouched


def test_register_refuses_to_replace_someone_elses_method(monkeypatch):
    register()
    monkeypatch.setitem(solo.methods.METHODS, "mabt", solo.methods.BarlowTwins)
    with pytest.raises(RuntimeError, match="already has a different 'mabt'"):
        register()


@pytest.mark.parametrize("recipe,small_input,size", [("mabt_cifar.yaml", True, 32), ("mabt_stl10.yaml", False, 96)])
def test_narrow_backbone_gets_the_small_image_stem_on_cifar(recipe, small_input, size):
    cfg = compose_recipe(recipe, "pretrain", ["backbone.name=narrow_resnet18"])
    apply_backbone_defaults(cfg, tuple(PLUGIN_BACKBONES))
    assert cfg.backbone.kwargs.small_input is small_input
    net = NarrowResNet18(width=8, small_input=small_input)
    assert net(torch.randn(2, 3, size, size)).shape == (2, 64) and net.num_features == 64
    assert sum(p.numel() for p in NarrowResNet18(width=16).parameters()) == pytest.approx(0.7e6, rel=0.01)


def test_the_first_stage_can_be_wider_than_the_base_width():
    net = NarrowResNet18(width=16, small_input=True, first_stage_width=32)
    assert net.conv1.out_channels == net.bn1.num_features == 32
    assert [b.conv2.out_channels for b in net.layer1] == [32, 32] and net.layer2[0].conv1.in_channels == 32
    assert [net.layer2[0].conv2.out_channels, net.num_features] == [32, 128]
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 128)
    same = NarrowResNet18(width=16, first_stage_width=16)
    assert [tuple(t.shape) for t in same.state_dict().values()] == [
        tuple(t.shape) for t in NarrowResNet18(width=16).state_dict().values()
    ]
    with pytest.raises(ValueError, match="first_stage_width must be >= 1"):
        NarrowResNet18(width=16, first_stage_width=0)
