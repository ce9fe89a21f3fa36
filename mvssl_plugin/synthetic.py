"""Tiny generated data and recipe overrides for smoke runs: the tests, the benchmarks and
the GPU kit's dry run use these to run any recipe end to end in seconds on a CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np
from PIL import Image


def write_image_folder(root: str | Path, classes: int = 3, per_class: int = 8, size: int = 32, seed: int = 0) -> Path:
    """Writes ``classes`` folders of ``per_class`` random ``size`` x ``size`` JPEGs under ``root``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    for c in range(classes):
        folder = root / f"class_{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)).save(folder / f"{i:04d}.jpg")
    return root


def tiny_overrides(data: Dict[str, str], out_dir: str | Path, **extra) -> List[str]:
    """Hydra overrides that shrink a CIFAR recipe to seconds on a CPU: ``data`` holds the
    ``train`` and ``test`` folders, ``out_dir`` receives the run folders; ``extra`` adds or
    replaces keys."""
    overrides = {
        "data.train_path": data["train"],
        "data.val_path": data["test"],
        "data.num_workers": 0,
        "backbone.name": "narrow_resnet18",
        "+backbone.kwargs.width": 8,
        "method_kwargs.proj_output_dim": 16,
        "optimizer.batch_size": 8,
        "max_epochs": 1,
        "checkpoint.dir": str(out_dir),
        "auto_resume.enabled": False,
        "accelerator": "cpu",
    }
    overrides.update(extra)
    return [f"{k}={v}" for k, v in overrides.items()]
