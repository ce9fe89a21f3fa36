"""solo-learn's method contract: every registered method built the way solo-learn's own tests
build its methods (a config with ``data.num_large_crops`` / ``num_small_crops`` and no
``augmentations``, the class called directly, Lightning ``fast_dev_run``), at m = 2 and 4.
Parametrized over the registry: a new method is covered without editing this file."""

from __future__ import annotations

import inspect

import pytest
import torch
from helpers import cpu_autocast_enabled, solo_shaped_cfg
from lightning.pytorch import Trainer
from omegaconf import OmegaConf
from torch.utils.data import DataLoader, Dataset

import mvssl_plugin
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.methods.barlow_vicreg import BarlowVICRegMethod
from mvssl_plugin.registry import PLUGIN_METHODS, beta_slot, method_class

#: the registered methods of the Barlow Twins / VICReg family (an orthogonality weight, objectives)
FAMILY = sorted(m for m in PLUGIN_METHODS if issubclass(method_class(m), BarlowVICRegMethod))


class RandomViews(Dataset):
    """``(index, [view_1..view_m], target)`` items, solo-learn's pretraining batch layout."""

    def __init__(self, num_large: int, num_small: int, size: int = 8, large: int = 32, small: int = 16):
        self.num_large, self.num_small, self.size, self.large, self.small = num_large, num_small, size, large, small

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        gen = torch.Generator().manual_seed(index)
        views = [torch.randn(3, self.large, self.large, generator=gen) for _ in range(self.num_large)]
        views += [torch.randn(3, self.small, self.small, generator=gen) for _ in range(self.num_small)]
        return index, views, index % 5


class RandomImages(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int):
        return torch.randn(3, 32, 32, generator=torch.Generator().manual_seed(100 + index)), index % 5


def fast_dev_trainer(cfg) -> Trainer:
    options = OmegaConf.to_container(cfg)
    valid = inspect.signature(Trainer.__init__).parameters
    kwargs = {k: options[k] for k in valid if k in options}
    kwargs.update(logger=None, enable_checkpointing=False, fast_dev_run=True, enable_progress_bar=False)
    return Trainer(**kwargs)


@pytest.fixture(scope="module")
def methods():
    return mvssl_plugin.register()


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
@pytest.mark.parametrize("num_large,num_small", [(2, 0), (4, 0), (2, 2)])
def test_built_and_trained_as_solo_learn_builds_its_methods(methods, method, num_large, num_small):
    cfg = solo_shaped_cfg(method, num_large, num_small)
    model = methods[method](cfg)  # BaseMethod.__init__ runs add_and_assert_specific_cfg
    model.add_and_assert_specific_cfg(cfg)  # solo-learn's tests call it again: it must be idempotent
    slot = beta_slot(method)
    if slot is not None:  # ``auto`` resolved to a number
        weight = cfg.method_kwargs[slot.key]
        assert isinstance(weight, float) and weight > 0
    # solo-learn's optimizer is built from these groups: the projector must train with the backbone
    groups = {group["name"]: list(group["params"]) for group in model.learnable_params}
    assert {"backbone", "classifier", "projector"} <= set(groups)
    assert [id(p) for p in groups["projector"]] == [id(p) for p in model.projector.parameters()]
    out = model(torch.randn(4, 3, 32, 32))
    assert out["logits"].shape == (4, 5) and out["z"].shape == (4, 32) and out["feats"].shape == (4, model.features_dim)

    train = DataLoader(RandomViews(num_large, num_small), batch_size=4, drop_last=True)
    val = DataLoader(RandomImages(), batch_size=4)
    before = [p.detach().clone() for p in model.projector.parameters()]
    fast_dev_trainer(cfg).fit(model, train, val)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.projector.parameters())), "nothing trained"


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
def test_same_config_same_beta_whichever_way_the_method_is_built(methods, method):
    """Direct construction and the entry point's early call resolve the same weights."""
    direct, early = solo_shaped_cfg(method, 4), solo_shaped_cfg(method, 4)
    methods[method](direct)
    methods[method].add_and_assert_specific_cfg(early)
    assert OmegaConf.to_container(direct.method_kwargs) == OmegaConf.to_container(early.method_kwargs)


SHARED_CHECKS = [
    ({"data.num_large_crops": 1}, "at least 2 views"),
    ({"method_kwargs.proj_output_dim": None}, "proj_output_dim is missing"),
    ({"method_kwargs.proj_hidden_dim": 0}, "proj_hidden_dim=0"),
    ({"method_kwargs.projector": "mlp"}, "projector='mlp'"),
    ({"method_kwargs.fused_forward": "yes"}, "fused_forward='yes'"),
    ({"method_kwargs.view_parallel": True}, "view_parallel=true spreads"),
]
FAMILY_CHECKS = [
    ({"method_kwargs.objective": "paper"}, "objective='paper'"),
    ({"method_kwargs.objective": "fastssl", "method_kwargs.fused_forward": False}, "one call"),
    ({"method_kwargs.objective": "fastssl", "data.num_small_crops": 2}, "one resolution"),
    ({"method_kwargs.beta_c": -1.0}, "beta_c"),
]


def refused(methods, method: str, change: dict, match: str) -> None:
    cfg = solo_shaped_cfg(method, 2)
    for key, value in change.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    with pytest.raises(ConfigError, match=match):
        methods[method].add_and_assert_specific_cfg(cfg)


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
@pytest.mark.parametrize("change,match", SHARED_CHECKS, ids=lambda v: str(v)[:40])
def test_the_shared_checks_name_the_key(methods, method, change, match):
    refused(methods, method, change, match)


@pytest.mark.parametrize("method", FAMILY)
@pytest.mark.parametrize("change,match", FAMILY_CHECKS, ids=lambda v: str(v)[:40])
def test_the_barlow_vicreg_family_checks_name_the_key(methods, method, change, match):
    refused(methods, method, change, match)


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
def test_fused_forward_null_is_the_methods_default(methods, method):
    """A recipe shared across methods may say null (the BT/VICReg recipes do): each method
    makes it a boolean, on only where its objective needs it."""
    cfg = solo_shaped_cfg(method, 4)
    OmegaConf.update(cfg, "method_kwargs.fused_forward", None, force_add=True)
    methods[method].add_and_assert_specific_cfg(cfg)
    assert cfg.method_kwargs.fused_forward is False


def test_a_method_without_an_orthogonality_weight_has_no_family_keys():
    """MMCR: no beta, no objective or redundancy among its defaults."""
    defaults = method_class("mmcr").defaults()
    assert beta_slot("mmcr") is None and not {"objective", "redundancy", "lamb"} & set(defaults)


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
def test_the_loss_runs_in_float32_outside_autocast_under_bf16(methods, method):
    """Under bf16 autocast the backbone and projector compute in bf16, but the loss's D x D
    products must not: the method hands its loss float32 views with autocast off."""
    model = methods[method](solo_shaped_cfg(method, 4))
    seen = []
    inner = model.multiview_loss

    def spy(z):
        seen.append(({v.dtype for v in z}, cpu_autocast_enabled()))
        return inner(z)

    model.multiview_loss = spy
    views = [torch.randn(4, 3, 32, 32) for _ in range(4)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model.training_step([torch.arange(4), views, torch.randint(0, 5, (4,))], 0)
    assert seen == [({torch.float32}, False)]
    assert torch.isfinite(loss)
