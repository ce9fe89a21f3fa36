"""``main_linear.py`` / ``mvssl-linear``: solo-learn's linear evaluation on any checkpoint
of the plugin (or of solo-learn), with the plugin's backbones, ImageFolder data and the CPU.

The backbone is built as solo-learn builds it, loaded from the checkpoint's
``backbone.*`` weights (all of them: solo-learn's own script loads with ``strict=False``,
so a mismatched backbone would silently evaluate a random network), and trained under
solo-learn's ``LinearModel``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from omegaconf import DictConfig

from mvssl_plugin.cli.common import fit, prepare_cfg, run_hydra
from mvssl_plugin.errors import ConfigError


def build_backbone(cfg: DictConfig) -> nn.Module:
    """solo-learn's backbone for ``cfg.backbone``, with its CIFAR stem for ResNets."""
    from solo.methods.base import BaseMethod

    backbone = BaseMethod._BACKBONES[cfg.backbone.name](method=cfg.pretrain_method, **cfg.backbone.kwargs)
    if cfg.backbone.name.startswith("resnet"):
        backbone.fc = nn.Identity()
        if cfg.data.dataset in ("cifar10", "cifar100"):
            backbone.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=2, bias=False)
            backbone.maxpool = nn.Identity()
    return backbone


def load_backbone_weights(backbone: nn.Module, ckpt_path: str) -> None:
    """Loads ``backbone.*`` from a solo-learn checkpoint; every tensor must match by name and shape."""
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)["state_dict"]
    weights = {k[len("backbone.") :]: v for k, v in state.items() if k.startswith("backbone.")}
    own = backbone.state_dict()
    wrong = [k for k in own if k not in weights or weights[k].shape != own[k].shape]
    wrong += [k for k in weights if k not in own]
    if not weights or wrong:
        raise ConfigError(
            f"pretrained_feature_extractor={ckpt_path!r} does not hold this backbone's weights "
            f"({len(wrong) or 'all'} missing or of another shape, e.g. {wrong[:3]}): set backbone.name, "
            "backbone.kwargs and data.dataset as in pretraining"
        )
    backbone.load_state_dict(weights)


def linear(cfg: DictConfig):
    """Trains a linear classifier on a frozen pretrained backbone; returns the Trainer."""
    from lightning.pytorch import seed_everything
    from solo.args.linear import parse_cfg
    from solo.methods.base import BaseMethod
    from solo.methods.linear import LinearModel

    from mvssl_plugin.config import adapt_to_hardware, apply_backbone_defaults, check_linear_cfg
    from mvssl_plugin.data.folders import classification_loaders
    from mvssl_plugin.registry import BACKBONE_NAMES, register

    cfg = prepare_cfg(cfg)
    register()
    check_linear_cfg(cfg, BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
    for notice in adapt_to_hardware(cfg):
        print(f"mvssl: {notice}")
    apply_backbone_defaults(cfg, BACKBONE_NAMES)
    cfg = parse_cfg(cfg)
    seed_everything(cfg.seed)

    backbone = build_backbone(cfg)
    load_backbone_weights(backbone, cfg.pretrained_feature_extractor)
    print(f"Loaded backbone weights from {cfg.pretrained_feature_extractor}")
    model = LinearModel(backbone, loss_func=nn.CrossEntropyLoss(), mixup_func=None, cfg=cfg)
    train_loader, val_loader = classification_loaders(cfg, data_fraction=cfg.data.fraction)
    return fit(cfg, model, train_loader, val_loader, "linear")


def main() -> None:
    run_hydra(linear, "linear")


if __name__ == "__main__":
    main()
