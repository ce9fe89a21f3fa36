"""Shared fixtures: tiny generated ImageFolder trees and composed recipes (no real data)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


def make_image_folder(root: Path, classes: int = 3, per_class: int = 8, size: int = 32, seed: int = 0) -> Path:
    """Writes ``classes`` folders of random ``size`` x ``size`` JPEGs under ``root``."""
    rng = np.random.default_rng(seed)
    for c in range(classes):
        folder = root / f"class_{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{i:04d}.jpg")
    return root


@pytest.fixture(scope="session")
def tiny_cifar(tmp_path_factory) -> dict:
    """A CIFAR-10-shaped ImageFolder copy: train (3 x 8 images) and test (3 x 4)."""
    root = tmp_path_factory.mktemp("tiny_cifar")
    return {
        "train": str(make_image_folder(root / "train", per_class=8)),
        "test": str(make_image_folder(root / "test", per_class=4, seed=1)),
    }


def tiny_overrides(data: dict, out_dir: Path, **extra) -> list[str]:
    """Overrides that shrink a CIFAR recipe to seconds on a CPU."""
    overrides = {
        "data.train_path": data["train"],
        "data.val_path": data["test"],
        "data.num_workers": 0,
        "backbone.name": "narrow_resnet18",
        "+backbone.kwargs.width": 4,
        "method_kwargs.proj_output_dim": 16,
        "optimizer.batch_size": 8,
        "max_epochs": 1,
        "checkpoint.dir": str(out_dir),
        "auto_resume.enabled": False,
        "accelerator": "cpu",
    }
    overrides.update(extra)
    return [f"{k}={v}" for k, v in overrides.items()]


def run_entry(script: str, args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs ``python <repo>/<script> args...`` as a user would, from ``cwd``."""
    # a wandb run made in this process leaves WANDB_SERVICE set: a child would attach to that
    # service and write its files elsewhere; each command gets its own, files under cwd
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    env.update(PYTHONWARNINGS="ignore", WANDB_DIR=str(cwd))
    return subprocess.run(
        [sys.executable, str(REPO / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
