"""Where the in-memory data lives: the device a config trains on, moving the images there, and
moving a step's small CPU-drawn tensors there without making the host wait."""

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


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU ``tensor`` (random parameters, indexes) on ``device`` without a host wait: on a GPU
    through pinned memory, non-blocking. A plain ``.to("cuda")`` synchronizes the stream, so the
    host stops at every parameter of every step until the GPU has caught up, and views cut ahead
    on a side stream no longer overlap the training step."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def training_device(cfg: DictConfig) -> str:
    """``cuda`` when the config trains on a GPU and one is available, else ``cpu``."""
    accelerator = str(OmegaConf.select(cfg, "accelerator", default="cpu"))
    return "cuda" if accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available() else "cpu"
