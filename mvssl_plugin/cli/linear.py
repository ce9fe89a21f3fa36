"""``main_linear.py`` / ``mvssl-linear``: solo-learn's linear evaluation on any checkpoint
of the plugin (or of solo-learn), with the plugin's backbones, ImageFolder data and the CPU.

The backbone is built as solo-learn builds it, loaded from the checkpoint's
``backbone.*`` weights (all of them: solo-learn's own script loads with ``strict=False``,
so a mismatched backbone would silently evaluate a random network), and trained under
solo-learn's ``LinearModel``.
"""

from __future__ import annotations

from typing import Tuple

import torch
import torch.nn as nn
from omegaconf import DictConfig, OmegaConf

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


def checked_backbone(cfg: DictConfig) -> Tuple[DictConfig, nn.Module]:
    """Checks and completes a linear config as solo-learn's parser does; returns it with
    the pretrained backbone loaded."""
    from lightning.pytorch import seed_everything
    from solo.args.linear import parse_cfg
    from solo.methods.base import BaseMethod

    from mvssl_plugin.config import adapt_to_hardware, apply_backbone_defaults, check_linear_cfg, check_probe_cfg
    from mvssl_plugin.registry import BACKBONE_NAMES, register

    cfg = prepare_cfg(cfg)
    register()
    check_linear_cfg(cfg, BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
    check_probe_cfg(cfg)
    for notice in adapt_to_hardware(cfg):
        print(f"mvssl: {notice}")
    apply_backbone_defaults(cfg, BACKBONE_NAMES)
    cfg = parse_cfg(cfg)
    seed_everything(cfg.seed)
    backbone = build_backbone(cfg)
    load_backbone_weights(backbone, cfg.pretrained_feature_extractor)
    print(f"Loaded backbone weights from {cfg.pretrained_feature_extractor}")
    return cfg, backbone


def linear(cfg: DictConfig):
    """Trains a linear classifier on a frozen pretrained backbone; returns the Trainer
    (solo-learn's flow), or the fast probe's results when the recipe has a ``probe`` block."""
    from solo.methods.linear import LinearModel

    from mvssl_plugin.data.folders import classification_loaders

    if cfg.get("probe") is not None:
        return fast_probe(cfg)
    cfg, backbone = checked_backbone(cfg)
    model = LinearModel(backbone, loss_func=nn.CrossEntropyLoss(), mixup_func=None, cfg=cfg)
    train_loader, val_loader = classification_loaders(cfg, data_fraction=cfg.data.fraction)
    return fit(cfg, model, train_loader, val_loader, "linear")


def patch_features(backbone: nn.Module, dataset, patches: int, cfg: DictConfig, device) -> torch.Tensor:
    """``(patches, N, F)`` backbone features; each pass over the dataset draws new patches."""
    from torch.utils.data import DataLoader

    from mvssl_plugin.eval.features import extract_features

    def forward(images):
        return {"feats": backbone(images)}

    loader = DataLoader(dataset, batch_size=256, shuffle=False, num_workers=cfg.data.num_workers)
    passes = [extract_features(forward, loader, device) for _ in range(patches)]
    return torch.stack([p["backbone"] for p in passes]), passes[0]["labels"]


def fast_probe(cfg: DictConfig) -> dict:
    """The paper's probe on cached features; writes ``probe.json`` beside the checkpoint.

    Features of ``probe.train_patches`` augmented patches per training image (solo-learn's
    linear-eval train transform) and of the test set, plain (its val transform) and as
    ``probe.test_patches`` augmented patches, are computed once; the classifier then trains
    on them (:mod:`mvssl_plugin.eval.probe`)."""
    import json
    import time
    from pathlib import Path

    from solo.data.classification_dataloader import prepare_transforms

    from mvssl_plugin.data.folders import classification_datasets
    from mvssl_plugin.eval.features import resolve_device
    from mvssl_plugin.eval.probe import ProbeSettings, patch_accuracy, train_probe

    cfg, backbone = checked_backbone(cfg)
    device = resolve_device(str(cfg.probe.device))
    backbone = backbone.to(device).eval()
    t_train, t_val = prepare_transforms(cfg.data.dataset)
    augmented_train, augmented_test = classification_datasets(cfg, t_train, t_train, cfg.data.fraction)
    _, plain_test = classification_datasets(cfg, t_val, t_val, cfg.data.fraction)

    start = time.perf_counter()
    train_x, train_y = patch_features(backbone, augmented_train, cfg.probe.train_patches, cfg, device)
    plain_x, test_y = patch_features(backbone, plain_test, 1, cfg, device)
    patch_x, _ = patch_features(backbone, augmented_test, cfg.probe.test_patches, cfg, device)
    features_s = time.perf_counter() - start

    start = time.perf_counter()
    settings = ProbeSettings(
        epochs=cfg.probe.epochs,
        lr=cfg.probe.lr,
        batch_size=cfg.probe.batch_size,
        weight_decay=cfg.probe.weight_decay,
        seed=cfg.seed,
    )
    num_classes = int(max(train_y.max(), test_y.max())) + 1
    probe = train_probe(
        train_x.flatten(0, 1).to(device),
        train_y.repeat(len(train_x)).to(device),
        num_classes,
        settings,  # patch-major
    )
    probe_s = time.perf_counter() - start
    acc1, acc5 = patch_accuracy(probe, plain_x.to(device), test_y.to(device))
    patch_acc1, patch_acc5 = patch_accuracy(probe, patch_x.to(device), test_y.to(device))
    results = {
        "checkpoint": str(cfg.pretrained_feature_extractor),
        "acc1": acc1,
        "acc5": acc5,
        f"acc1_{cfg.probe.test_patches}patches": patch_acc1,
        f"acc5_{cfg.probe.test_patches}patches": patch_acc5,
        "train_images": len(train_y),
        "train_features": train_x.shape[0] * train_x.shape[1],
        "test_images": len(test_y),
        "features_seconds": round(features_s, 2),
        "probe_seconds": round(probe_s, 2),
        "device": str(device),
        "probe": OmegaConf.to_container(cfg.probe),
    }
    out = Path(cfg.pretrained_feature_extractor).parent / "probe.json"
    out.write_text(json.dumps(results, indent=2))
    print(
        f"mvssl probe: top-1 {acc1:.2f}% (plain test images), {patch_acc1:.2f}% "
        f"({cfg.probe.test_patches} patches averaged); features {features_s:.1f} s, probe {probe_s:.1f} s -> {out}"
    )
    return results


def main() -> None:
    run_hydra(linear, "linear")


if __name__ == "__main__":
    main()
