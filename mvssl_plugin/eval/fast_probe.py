"""The fast probe end to end: features of a frozen backbone computed once, then
:mod:`mvssl_plugin.eval.probe` on them; ``probe.json`` beside the checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable, Optional, Tuple

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.data import DataLoader

from mvssl_plugin.data.dataset_files import Screen
from mvssl_plugin.data.formats import data_format
from mvssl_plugin.data.inmemory.eval_loaders import probe_memory_loaders
from mvssl_plugin.data.labelled_sets import classification_datasets
from mvssl_plugin.eval.features import extract_features
from mvssl_plugin.eval.probe import ProbeSettings, patch_accuracy, train_probe
from mvssl_plugin.files import write_json
from mvssl_plugin.runs import PROBE
from mvssl_plugin.torch_device import eval_device


def patch_features(
    backbone: nn.Module, loader: Iterable, patches: int, device, desc: str
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(patches, N, F)`` backbone features and ``(N,)`` labels; each pass over
    ``loader`` (batches of images and labels) draws new patches."""

    def forward(images):
        return {"feats": backbone(images)}

    passes = [
        extract_features(forward, loader, device, desc=f"{desc} {p + 1}/{patches}" if patches > 1 else desc)
        for p in range(patches)
    ]
    return torch.stack([p["backbone"] for p in passes]), passes[0]["labels"]


def probe_loaders(
    cfg: DictConfig, device: torch.device, screen: Optional[Screen]
) -> Tuple[Iterable, Iterable, Iterable]:
    """(augmented train, plain test, augmented test) batches: solo-learn's linear-eval
    transforms through torchvision workers, or, with ``data.format: memory``, the same
    files decoded once and transformed on ``device`` (:mod:`mvssl_plugin.data.inmemory.eval_loaders`)."""
    # local: solo-learn (all of it: seconds) loads when the probe runs; importing this module loads none of it
    from solo.data.classification_dataloader import prepare_transforms

    t_train, t_val = prepare_transforms(cfg.data.dataset)
    augmented_train, augmented_test = classification_datasets(cfg, t_train, t_train, cfg.data.fraction, screen)
    if data_format(cfg).decoded_once:
        return probe_memory_loaders(cfg, augmented_train, augmented_test, device)
    _, plain_test = classification_datasets(cfg, t_val, t_val, cfg.data.fraction, screen)
    return tuple(
        DataLoader(dataset, batch_size=256, shuffle=False, num_workers=cfg.data.num_workers)
        for dataset in (augmented_train, plain_test, augmented_test)
    )


def fast_probe(cfg: DictConfig, backbone: nn.Module, screen: Optional[Screen] = None) -> dict:
    """The paper's probe on cached features of a checked linear config's backbone.

    Features of ``probe.train_patches`` augmented patches per training image (solo-learn's
    linear-eval train transform) and of the test set, plain (its val transform) and as
    ``probe.test_patches`` augmented patches, are computed once; the classifier then
    trains on them. ``screen`` names or drops unusable image files first. Returns the
    results written to ``probe.json``."""
    device = eval_device(str(cfg.probe.device))
    backbone = backbone.to(device).eval()
    start = time.perf_counter()
    augmented_train, plain_test, augmented_test = probe_loaders(cfg, device, screen)
    train_x, train_y = patch_features(backbone, augmented_train, cfg.probe.train_patches, device, "train patches")
    plain_x, test_y = patch_features(backbone, plain_test, 1, device, "test images")
    patch_x, _ = patch_features(backbone, augmented_test, cfg.probe.test_patches, device, "test patches")
    features_s = time.perf_counter() - start

    start = time.perf_counter()
    settings = ProbeSettings(
        epochs=cfg.probe.epochs,
        lr=cfg.probe.lr,
        batch_size=cfg.probe.batch_size,
        weight_decay=cfg.probe.weight_decay,
        label_smoothing=float(cfg.probe.get("label_smoothing", 0.0) or 0.0),
        seed=cfg.seed,
    )
    num_classes = int(max(train_y.max(), test_y.max())) + 1
    print(f"mvssl probe: training a linear layer on {train_x.shape[0] * train_x.shape[1]} features", flush=True)
    probe = train_probe(
        train_x.flatten(0, 1).to(device), train_y.repeat(len(train_x)).to(device), num_classes, settings
    )  # patch-major
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
        "data_format": str(cfg.data.format),
        "probe": OmegaConf.to_container(cfg.probe),
    }
    out = write_json(Path(cfg.pretrained_feature_extractor).parent / PROBE, results)
    print(
        f"mvssl probe: top-1 {acc1:.2f}% (plain test images), {patch_acc1:.2f}% "
        f"({cfg.probe.test_patches} patches averaged); features {features_s:.1f} s, probe {probe_s:.1f} s -> {out}"
    )
    return results
