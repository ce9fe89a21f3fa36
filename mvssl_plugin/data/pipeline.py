"""What every m-view data format shares: the augmentation recipe, its normalization, and
the order of images per epoch and process.

Kept apart from the loaders so that a format imports none of the others' dependencies
(this module needs neither NVIDIA DALI nor kornia).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Tuple

import numpy as np
import torch
from omegaconf import DictConfig


@dataclass(frozen=True)
class ViewRecipe:
    """One augmentation pipeline of the YAML, as the DALI graph and the in-memory
    augmentation need it (plain numbers, no torchvision objects)."""

    crop_size: int
    num_crops: int
    rrc: bool
    scale: Tuple[float, float]
    jitter_prob: float
    brightness: float
    contrast: float
    saturation: float
    hue: float
    grayscale_prob: float
    blur_prob: float
    solarization_prob: float
    equalization_prob: float
    flip_prob: float
    mean: Tuple[float, float, float]
    std: Tuple[float, float, float]

    @classmethod
    def from_cfg(cls, dataset: str, aug: DictConfig) -> ViewRecipe:
        mean, std = normalization(dataset, aug)
        return cls(
            crop_size=int(aug.crop_size),
            num_crops=int(aug.num_crops),
            rrc=bool(aug.rrc.enabled),
            scale=(float(aug.rrc.crop_min_scale), float(aug.rrc.crop_max_scale)),
            jitter_prob=float(aug.color_jitter.prob),
            brightness=float(aug.color_jitter.brightness),
            contrast=float(aug.color_jitter.contrast),
            saturation=float(aug.color_jitter.saturation),
            hue=float(aug.color_jitter.hue),
            grayscale_prob=float(aug.grayscale.prob),
            blur_prob=float(aug.gaussian_blur.prob),
            solarization_prob=float(aug.solarization.prob),
            equalization_prob=float(aug.equalization.prob),
            flip_prob=float(aug.horizontal_flip.prob),
            mean=mean,
            std=std,
        )

    def at_strength(self, strength: float) -> ViewRecipe:
        """This recipe with its augmentation's magnitude scaled by ``strength`` in [0, 1]: the
        colour jitter's brightness, contrast, saturation and hue by ``strength``, and the random
        crop's smallest area moved toward its largest (``max - strength * (max - min)``: 0 keeps
        only the largest crops). How often each step fires (its probability) is unchanged."""
        if strength == 1.0:
            return self
        low, high = self.scale
        return dataclasses.replace(
            self,
            scale=(high - strength * (high - low), high),
            brightness=self.brightness * strength,
            contrast=self.contrast * strength,
            saturation=self.saturation * strength,
            hue=self.hue * strength,
        )


def normalization(dataset: str, aug: DictConfig) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """The mean/std (in [0, 1] units) solo-learn's torchvision pipeline normalizes with,
    read off the pipeline it builds, so every format feeds the network the same numbers."""
    # local: solo-learn (all of it, torchvision and timm with it) loads to read its normalization only;
    # every format imports this module
    from solo.data.pretrain_dataloader import build_transform_pipeline
    from torchvision import transforms

    pipeline = build_transform_pipeline(dataset, aug)
    norm = next(t for t in pipeline.transforms if isinstance(t, transforms.Normalize))
    return tuple(float(v) for v in norm.mean), tuple(float(v) for v in norm.std)


class EpochShards:
    """Per-epoch permutation of the dataset split over processes, as DistributedSampler:
    the same (seed, epoch) gives every process the same permutation, each takes every
    ``world``-th index from its rank; the tail is dropped so shards are equal."""

    def __init__(self, num_samples: int, seed: int) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def shard_size(self, world: int) -> int:
        return self.num_samples // world

    def indices(self, rank: int, world: int) -> np.ndarray:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.num_samples, generator=generator).numpy()
        return order[: self.shard_size(world) * world][rank::world]


def process_group() -> Tuple[int, int]:
    """(rank, world size) of the running job; (0, 1) outside torch.distributed."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def split_over(group: Tuple[int, int], shard: bool, built_for: int, loader: str) -> Tuple[int, int]:
    """(rank, number of processes the images are split over) for a loader built for
    ``built_for`` processes, given the running job's ``(rank, world size)``: 1 without
    ``shard`` (view-parallel: every process holds the same images); a job of another size
    than the loader was built for is an error, not a silent mis-shard."""
    rank, world = group
    if not shard:
        return rank, 1
    if world != built_for:
        raise RuntimeError(f"{loader} built for {built_for} process(es) runs in {world}")
    return rank, world
