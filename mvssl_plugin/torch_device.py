"""The device an evaluation or an embedding runs on, asked for by name. Torch only, so the
encoder's torch-only modules and the evaluations share it."""

from __future__ import annotations

import torch

from mvssl_plugin.errors import ConfigError


def eval_device(device: str, key: str = "device") -> torch.device:
    """``auto``: the GPU when there is one; ``cuda`` without one is an error naming ``key`` (the
    setting or flag the user wrote), not a crash."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{key}={device!r} but no CUDA device is visible: use {key}=cpu or auto")
    return torch.device(device)
