"""Where the in-memory data lives: the device a config trains on, and moving the images there."""

from __future__ import annotations

import torch
from omegaconf import DictConfig, OmegaConf


def exact_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device; a bare ``cuda`` is the process's current GPU."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def moved(images: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """``images`` on ``device`` (a bare ``cuda``: the process's current GPU), copied only if elsewhere."""
    target = exact_device(device)
    return images if images.device == target else images.to(target)


def training_device(cfg: DictConfig) -> str:
    """``cuda`` when the config trains on a GPU and one is available, else ``cpu``."""
    accelerator = str(OmegaConf.select(cfg, "accelerator", default="cpu"))
    return "cuda" if accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available() else "cpu"
