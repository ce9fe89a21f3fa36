"""The backbone of an evaluation comes from the pretraining run it loads, not from the
evaluation's YAML: a width-16 CIFAR run has a 3x3 stem whatever dataset the linear recipe
names, and solo-learn decides the stem by that dataset. Read from the run's ``args.json``
(beside its checkpoint), for the plugin's linear and probe flows and, through the autoregister
hook, for solo-learn's own ``main_linear.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig

from mvssl_plugin.config.values import select
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import read_json
from mvssl_plugin.runs import ARGS

CIFAR = ("cifar10", "cifar100")


def run_args(cfg: DictConfig) -> Optional[Dict[str, Any]]:
    """The args.json of the run ``pretrained_feature_extractor`` names (a run folder or a
    checkpoint in one); None when there is none."""
    ckpt = select(cfg, "pretrained_feature_extractor")
    if ckpt is None:
        return None
    path = Path(str(ckpt))
    args = read_json((path if path.is_dir() else path.parent) / ARGS)
    return args if isinstance(args, dict) and "backbone" in args else None


def backbone_from_run(cfg: DictConfig, plugin_backbones: Sequence[str]) -> List[str]:
    """Sets ``backbone.kwargs`` of the plugin's backbones (width, stem) from the pretraining run,
    in place; returns a notice for each key it changed.

    Raises:
        ConfigError: ``backbone.name`` is not the run's (naming the value to set), or the run
            has no args.json and the stem is not set (naming the keys to set).
    """
    name = select(cfg, "backbone.name")
    args = run_args(cfg)
    if args is None:
        if name in plugin_backbones and select(cfg, "backbone.kwargs.small_input") is None:
            raise ConfigError(
                f"pretrained_feature_extractor={select(cfg, 'pretrained_feature_extractor')} has no {ARGS} beside it "
                f"to read its backbone from: set +backbone.kwargs.width and +backbone.kwargs.small_input "
                "(true: the CIFAR stem) as in pretraining"
            )
        return []
    trained = args["backbone"].get("name")
    if name != trained:
        raise ConfigError(f"backbone.name={name}, but the pretraining run used {trained}: set backbone.name={trained}")
    if name not in plugin_backbones:
        return []
    kwargs = dict(args["backbone"].get("kwargs") or {})
    own = dict(select(cfg, "backbone.kwargs", {}) or {})
    changed = {k: v for k, v in kwargs.items() if own.get(k) != v}
    cfg.backbone.kwargs = {**own, **kwargs}
    return [f"backbone.kwargs.{k}={v} from the pretraining run's {ARGS}" for k, v in changed.items()]


def cifar_stem_of_run(cfg: DictConfig) -> bool:
    """Whether a torchvision ResNet gets solo-learn's CIFAR stem: as in the pretraining run where
    its args.json is found, else by the evaluation's own dataset (solo-learn's rule)."""
    args = run_args(cfg)
    dataset = (args or {}).get("data", {}).get("dataset") if args else select(cfg, "data.dataset")
    return dataset in CIFAR
