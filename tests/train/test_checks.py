"""Many invalid configs through the pretraining entry point: each must stop with a
ConfigError that names the key, before any output, never an error from deep inside."""

from __future__ import annotations

import random

import pytest
from helpers import solo_shaped_cfg, tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.registry import PLUGIN_METHODS
from mvssl_plugin.train.pretrain import pretrain

# key -> values that must be refused (each a Hydra override value)
INVALID = {
    "method": ["'mabt '", "simclrr", "null"],
    "backbone.name": ["resnet9", "null"],
    "+backbone.kwargs.width": [0, -4, "wide"],
    "+backbone.kwargs.first_stage_width": [0, "wide"],
    "data.dataset": ["cifar11", "null"],
    "data.format": ["lmdb", "DALI"],
    "data.fraction": [0, 1, 1.5, -0.5, "half"],
    "data.num_workers": [-1, 1.5],
    "data.num_views": [0, 1, -3, 2.5],
    "method_kwargs.proj_output_dim": [0, -256, 2.5, "big"],
    "method_kwargs.proj_hidden_dim": [0, "wide"],
    "method_kwargs.lamb": [-0.1, "often"],
    "method_kwargs.scale_loss": [0, -1],
    "method_kwargs.redundancy": ["pairs", 1],
    "method_kwargs.fused_forward": ["yes", 2],
    "method_kwargs.view_parallel": ["yes", 1],
    "+method_kwargs.beta_c": [0, -3.3],
    "+method_kwargs.beta_multiview_factor": [0, -0.5, "half"],
    "method_kwargs.objective": ["paper", 2],
    "method_kwargs.projector": ["mlp"],
    "optimizer.name": ["rmsprop", "null"],
    "optimizer.lr": [0, -0.1, "fast"],
    "optimizer.classifier_lr": [-1],
    "optimizer.weight_decay": [-1e-6],
    "optimizer.batch_size": [0, 1, 2.5, 10000],
    "scheduler.name": ["cosine", "reduce"],
    "+scheduler.warmup_epochs": [-1],
    "max_epochs": [0, -1, 1.5],
    "precision": [8, "half"],
    "accelerator": ["tpu"],
    "devices": [0, -1],
    "seed": [1.5, "lucky"],
    "checkpoint.frequency": [0],
    "knn_eval.k": [0],
    "augmentations.0.crop_size": [0, -32],
    "augmentations.0.rrc.crop_min_scale": [0, -0.1, 1.5],
    "augmentations.0.rrc.crop_max_scale": [0.01, 2],
    "augmentations.0.color_jitter.prob": [-0.1, 1.1],
    "augmentations.0.color_jitter.brightness": [-0.4],
    "augmentations.0.color_jitter.hue": [0.9, -0.1],
    "augmentations.0.grayscale.prob": [2],
    "augmentations.0.horizontal_flip.prob": ["often"],
    "data.train_path": ["/no/such/folder", "null"],
    "data.val_path": ["/no/such/folder"],
}
CASES = [(key, value) for key, values in INVALID.items() for value in values]


def key_named_in(message: str, key: str) -> bool:
    bare = key.lstrip("+")
    if bare.startswith("augmentations.0."):
        leaf = bare.rsplit(".", 1)[1]
        return "augmentations[0]" in message and leaf in message
    if bare == "data.num_views":  # 1 is an integer the method refuses: it says what it needs
        return bare in message or "needs at least 2 views" in message
    return bare in message


@pytest.mark.parametrize("key,value", CASES, ids=[f"{k}={v}" for k, v in CASES])
def test_each_invalid_value_is_refused_by_name(key, value, tiny_cifar, tmp_path):
    overrides = [o for o in tiny_overrides(tiny_cifar, tmp_path / "runs") if o.split("=")[0] != key]
    if key == "+backbone.kwargs.width":
        overrides = [o for o in overrides if not o.startswith("+backbone.kwargs.width")]
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", [*overrides, f"{key}={value}"])
    with pytest.raises(ConfigError) as err:
        pretrain(cfg)
    assert key_named_in(str(err.value), key), str(err.value)
    assert not (tmp_path / "runs").exists()


def test_random_combinations_of_invalid_values(tiny_cifar, tmp_path):
    """Several bad keys at once: the first one found is named, still before any output."""
    rng = random.Random(0)
    for trial in range(25):
        picked = dict(rng.sample(CASES, k=3))
        overrides = [o for o in tiny_overrides(tiny_cifar, tmp_path / "runs") if o.split("=")[0] not in picked]
        if "+backbone.kwargs.width" in picked:
            overrides = [o for o in overrides if not o.startswith("+backbone.kwargs.width")]
        cfg = compose_recipe("mabt_cifar.yaml", "pretrain", [*overrides, *(f"{k}={v}" for k, v in picked.items())])
        with pytest.raises(ConfigError) as err:
            pretrain(cfg)
        assert any(key_named_in(str(err.value), key) for key in picked), (trial, picked, str(err.value))
    assert not (tmp_path / "runs").exists()


# solo-learn's own test configs (data.num_large_crops, no augmentations), built directly
METHOD_KEYS = [(k, v) for k, v in CASES if k.lstrip("+").startswith("method_kwargs.")] + [
    ("+method_kwargs.local_weight", -1),
    ("data.num_large_crops", 1),
    ("data.num_large_crops", 0),
]


def reads(method: str, key: str) -> bool:
    """Whether ``method`` reads ``key``: the shared keys, its defaults and its rules."""
    from mvssl_plugin.registry import method_class

    if not key.startswith("method_kwargs."):
        return True
    cls = method_class(method)
    name = key[len("method_kwargs.") :]
    ruled = {rule[0].split(".")[-1] for rule in cls.RULES}
    return name in ("proj_output_dim", "proj_hidden_dim") or name in cls.defaults() or name in ruled


@pytest.mark.parametrize("method", sorted(PLUGIN_METHODS))
@pytest.mark.parametrize("key,value", METHOD_KEYS, ids=[f"{k}={v}" for k, v in METHOD_KEYS])
def test_solo_shaped_configs_are_refused_by_name_when_built_directly(method, key, value):
    from omegaconf import OmegaConf

    import mvssl_plugin

    if not reads(method, key.lstrip("+")):
        pytest.skip(f"{method} does not read {key}")
    cfg = solo_shaped_cfg(method, num_large=4)
    OmegaConf.update(cfg, key.lstrip("+"), value, force_add=True)
    with pytest.raises(ConfigError) as err:
        mvssl_plugin.register()[method](cfg)
    message = str(err.value)
    assert key.lstrip("+") in message or (key == "data.num_large_crops" and "at least 2 views" in message), message
