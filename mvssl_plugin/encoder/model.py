"""An exported encoder folder, read back with torch, safetensors and the plugin's backbones only.

The folder (written by :mod:`mvssl_plugin.encoder.export`) holds ``model.safetensors`` (the
backbone's weights in float32, nothing else), ``config.json`` (how to rebuild and feed it, and
how it was made) and ``README.md`` (a model card). Nothing here imports solo-learn, Lightning,
Hydra or OmegaConf: an encoder loads in a plain torch environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Tuple

import torch
import torchvision
from safetensors.torch import load_file
from torch import nn

from mvssl_plugin.backbones.narrow_resnet import NarrowResNet18
from mvssl_plugin.errors import ConfigError

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
CARD = "README.md"
#: ``config.json``'s ``format``: bumped when a reader of an older folder would misread a newer one
FORMAT = "mvssl-encoder/1"
#: the standard torchvision ResNets an export can name, with their feature size
STANDARD = {"resnet18": 512, "resnet50": 2048}


def build_encoder_network(arch: Dict[str, Any]) -> nn.Module:
    """The backbone ``config.json``'s ``architecture`` describes, randomly initialised.

    ``narrow_resnet18``: the plugin's ResNet-18 of base ``width``; ``resnet18`` / ``resnet50``:
    torchvision's, with ``fc`` removed and, with ``cifar_stem``, solo-learn's CIFAR stem (a 3x3
    stride-1 convolution with padding 2, no max-pool)."""
    name = arch.get("name")
    if name == "narrow_resnet18":
        first = arch.get("first_stage_width")
        return NarrowResNet18(
            width=int(arch["width"]),
            small_input=bool(arch["cifar_stem"]),
            first_stage_width=None if first is None else int(first),
        )
    if name in STANDARD:
        model = getattr(torchvision.models, name)()
        model.fc = nn.Identity()
        if arch.get("cifar_stem"):
            model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=2, bias=False)
            model.maxpool = nn.Identity()
        return model
    raise ConfigError(f"architecture {name!r} cannot be rebuilt here: known are narrow_resnet18, {', '.join(STANDARD)}")


def read_config(folder: str | Path) -> Dict[str, Any]:
    """``config.json`` of an encoder folder, checked to be one."""
    folder = Path(folder)
    path = folder / CONFIG
    if not path.is_file() or not (folder / WEIGHTS).is_file():
        raise ConfigError(
            f"{str(folder)!r} is not an exported encoder (no {CONFIG} and {WEIGHTS}): "
            "make one with mvssl-export RUN --out DIR"
        )
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path} is not readable JSON ({err}): export the run again") from None
    if config.get("format") != FORMAT:
        raise ConfigError(f"{path} has format {config.get('format')!r}, this plugin reads {FORMAT!r}")
    return config


def check_weights_fit(model: nn.Module, state: Dict[str, torch.Tensor], folder: Path, arch: Dict[str, Any]) -> None:
    """Raises ConfigError, in one line, where ``model.safetensors`` does not hold the weights of
    the network ``config.json`` describes: the tensors missing, left over, or of another shape."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    found = {name: tuple(t.shape) for name, t in state.items()}
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    shapes = [
        f"{n} {found[n]} where config.json's network has {expected[n]}"
        for n in expected
        if n in found and found[n] != expected[n]
    ]
    if not (missing or extra or shapes):
        return
    parts = []
    if shapes:
        parts.append(f"{len(shapes)} tensor(s) of another shape (first: {shapes[0]})")
    if missing:
        parts.append(f"{len(missing)} missing (first: {missing[0]})")
    if extra:
        parts.append(f"{len(extra)} not in the network (first: {extra[0]})")
    described = ", ".join(f"{k} {v}" for k, v in arch.items())
    raise ConfigError(
        f"{folder}: {WEIGHTS} does not fit {CONFIG}'s architecture ({described}): {'; '.join(parts)}; "
        "export the run again (mvssl-export RUN --out DIR)"
    )


def load_encoder(folder: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """The exported backbone as an ``nn.Module`` in eval mode: an image batch ``[B, 3, H, W]``,
    normalised as ``config.json``'s ``preprocessing`` says, to features ``[B, num_features]``.

    Every weight must match the rebuilt network by name and shape (``strict=True``); the
    folder's config is on the module as ``mvssl_config``."""
    config = read_config(folder)
    model = build_encoder_network(config["architecture"])
    try:
        state = load_file(str(Path(folder) / WEIGHTS))
    except Exception as err:  # safetensors raises its own error types for a damaged file
        raise ConfigError(f"{Path(folder) / WEIGHTS} is not a readable safetensors file ({err})") from None
    check_weights_fit(model, state, Path(folder), config["architecture"])
    model.load_state_dict(state, strict=True)
    model.mvssl_config = config
    return model.to(device).eval()


def input_transform_of(config: Dict[str, Any]) -> Tuple[int, int, Tuple[float, ...], Tuple[float, ...]]:
    """(resize, crop, mean, std) of ``config.json``: resize the shorter side, centre-crop, scale to
    [0, 1], normalise; as the run's evaluation fed its network."""
    p = config["preprocessing"]
    return int(p["resize"]), int(p["crop"]), tuple(p["mean"]), tuple(p["std"])
