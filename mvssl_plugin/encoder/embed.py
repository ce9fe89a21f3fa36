"""Features of a folder of images from an exported encoder, fed as its run's evaluation fed it.

An ImageFolder tree (one sub-folder per class) gives labels and class names; any other folder
gives its images (at any depth) without labels. Torch, torchvision, safetensors and numpy only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from mvssl_plugin.data.imagefolder import class_folders, images_under, is_image_folder_tree
from mvssl_plugin.encoder.model import input_transform_of, load_encoder
from mvssl_plugin.errors import ConfigError, DataError
from mvssl_plugin.files import check_writable_folder
from mvssl_plugin.progress import progress
from mvssl_plugin.torch_device import eval_device


@dataclass
class Images:
    paths: List[str]
    labels: Optional[List[int]]  # None: not an ImageFolder tree
    classes: Optional[List[str]]


def find_images(root: str | Path) -> Images:
    """The images of ``root``, sorted; labelled by class folder where it is an ImageFolder tree."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder: name a folder of images (or an ImageFolder tree)")
    if is_image_folder_tree(root):
        classes = [e.name for e in class_folders(root)]
        paths, labels = [], []
        for label, name in enumerate(classes):
            found = images_under(root / name)
            paths += found
            labels += [label] * len(found)
        loose = [p for p in images_under(root) if Path(p).parent == root]
        if loose:
            raise ConfigError(
                f"{root} has class folders and {len(loose)} images beside them (e.g. {loose[0]}): "
                "move them into a class folder, or embed a folder without class folders"
            )
        return Images(paths, labels, classes)
    paths = images_under(root)
    if not paths:
        raise ConfigError(f"{root} holds no images ({', '.join(('.jpg', '.png', '...'))}): name a folder of images")
    return Images(paths, None, None)


class _Files(Dataset):
    def __init__(self, paths: Sequence[str], transform) -> None:
        self.paths, self.transform = paths, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        try:
            with Image.open(self.paths[i]) as image:
                return self.transform(image.convert("RGB"))
        except OSError as err:
            raise DataError(f"{self.paths[i]} cannot be read as an image ({err}): remove or replace it") from None


def transform_of(config: dict):
    resize, crop, mean, std = input_transform_of(config)
    return transforms.Compose(
        [transforms.Resize(resize), transforms.CenterCrop(crop), transforms.ToTensor(), transforms.Normalize(mean, std)]
    )


@torch.no_grad()
def embed_images(
    encoder: torch.nn.Module, paths: Sequence[str], batch_size: int = 256, num_workers: int = 0, device: str = "auto"
) -> np.ndarray:
    """``[len(paths), num_features]`` float32 features, in the order of ``paths``."""
    dev = eval_device(device, "--device")
    encoder = encoder.to(dev).eval()
    loader = DataLoader(
        _Files(paths, transform_of(encoder.mvssl_config)), batch_size=batch_size, num_workers=num_workers
    )
    feats = [encoder(x.to(dev)).float().cpu() for x in progress(loader, "mvssl: embedding batches")]
    return torch.cat(feats).numpy()


def embed(
    encoder_dir: str | Path,
    images: str | Path,
    out: str | Path,
    batch_size: int = 256,
    num_workers: int = 0,
    device: str = "auto",
    force: bool = False,
    notify=print,
) -> Path:
    """Writes ``out`` (.npz): ``features`` [N, D] float32, ``paths`` [N]; for an ImageFolder tree
    also ``labels`` [N] and ``classes``. Every input is checked before any image is read."""
    out = Path(out)
    if out.suffix != ".npz":
        raise ConfigError(f"--out {out}: name a .npz file")
    if out.exists() and not force:
        raise ConfigError(f"--out {out} exists: name a new file, or add --force to replace it")
    if batch_size < 1:
        raise ConfigError(f"--batch-size {batch_size}: must be >= 1")
    encoder = load_encoder(encoder_dir, "cpu")
    found = find_images(images)
    check_writable_folder(out.parent, f"--out {out}")
    eval_device(device, "--device")
    notify(
        f"mvssl: {len(found.paths)} images from {images}" + (f", {len(found.classes)} classes" if found.classes else "")
    )
    features = embed_images(encoder, found.paths, batch_size, num_workers, device)
    arrays = {"features": features, "paths": np.array(found.paths)}
    if found.labels is not None:
        arrays.update(labels=np.array(found.labels, dtype=np.int64), classes=np.array(found.classes))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part.npz")
    np.savez(partial, **arrays)
    os.replace(partial, out)
    notify(f"mvssl: features {tuple(features.shape)} written to {out}")
    return out
