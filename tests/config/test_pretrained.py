"""The evaluation's backbone comes from the pretraining run's args.json (config/pretrained.py)."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from mvssl_plugin.config.pretrained import backbone_from_run, cifar_stem_of_run
from mvssl_plugin.errors import ConfigError

PLUGIN = ("narrow_resnet18",)


def _linear_cfg(ckpt, name="narrow_resnet18", kwargs=None, dataset="custom"):
    cfg = {"pretrained_feature_extractor": str(ckpt), "backbone": {"name": name}, "data": {"dataset": dataset}}
    if kwargs is not None:
        cfg["backbone"]["kwargs"] = kwargs
    return OmegaConf.create(cfg)


def _run(tmp_path, backbone, dataset="cifar10"):
    (tmp_path / "args.json").write_text(json.dumps({"backbone": backbone, "data": {"dataset": dataset}}))
    ckpt = tmp_path / "mabt-ep=0.ckpt"
    ckpt.write_bytes(b"")
    return ckpt


def test_width_and_stem_come_from_the_run_whatever_the_linear_dataset(tmp_path):
    ckpt = _run(tmp_path, {"name": "narrow_resnet18", "kwargs": {"width": 16, "small_input": True}})
    cfg = _linear_cfg(ckpt, kwargs={"width": 32})
    notices = backbone_from_run(cfg, PLUGIN)
    assert dict(cfg.backbone.kwargs) == {"width": 16, "small_input": True}
    assert notices == [
        "backbone.kwargs.width=16 from the pretraining run's args.json",
        "backbone.kwargs.small_input=True from the pretraining run's args.json",
    ]
    assert backbone_from_run(cfg, PLUGIN) == []  # nothing left to change
    # the run folder itself works as well as its checkpoint
    folder = _linear_cfg(tmp_path, kwargs={})
    backbone_from_run(folder, PLUGIN)
    assert folder.backbone.kwargs.width == 16


def test_another_backbone_name_stops_naming_the_value_to_set(tmp_path):
    ckpt = _run(tmp_path, {"name": "narrow_resnet18", "kwargs": {"width": 16, "small_input": True}})
    with pytest.raises(ConfigError, match="set backbone.name=narrow_resnet18"):
        backbone_from_run(_linear_cfg(ckpt, name="resnet18"), PLUGIN)


def test_without_args_json_the_stem_must_be_given(tmp_path):
    ckpt = tmp_path / "lone.ckpt"
    ckpt.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"\+backbone.kwargs.small_input"):
        backbone_from_run(_linear_cfg(ckpt), PLUGIN)
    assert backbone_from_run(_linear_cfg(ckpt, kwargs={"width": 8, "small_input": True}), PLUGIN) == []


def test_a_resnets_cifar_stem_follows_the_run_not_the_linear_dataset(tmp_path):
    ckpt = _run(tmp_path, {"name": "resnet18", "kwargs": {}}, dataset="cifar10")
    assert cifar_stem_of_run(_linear_cfg(ckpt, name="resnet18", dataset="custom")) is True
    _run(tmp_path, {"name": "resnet18", "kwargs": {}}, dataset="custom")
    assert cifar_stem_of_run(_linear_cfg(ckpt, name="resnet18", dataset="cifar10")) is False
    lone = tmp_path / "elsewhere" / "x.ckpt"
    assert cifar_stem_of_run(_linear_cfg(lone, name="resnet18", dataset="cifar10")) is True  # solo-learn's rule
