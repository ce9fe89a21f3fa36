"""Shared fixtures: tiny generated ImageFolder trees (no real data). Helpers: tests/helpers.py."""

from __future__ import annotations

import os

import pytest
from helpers import make_image_folder

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture(scope="session")
def tiny_cifar(tmp_path_factory) -> dict:
    """A CIFAR-10-shaped ImageFolder copy: train (3 x 8 images) and test (3 x 4)."""
    root = tmp_path_factory.mktemp("tiny_cifar")
    return {
        "train": str(make_image_folder(root / "train", per_class=8)),
        "test": str(make_image_folder(root / "test", per_class=4, seed=1)),
    }
