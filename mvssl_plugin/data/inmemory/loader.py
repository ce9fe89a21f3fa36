"""The Lightning-facing pretraining loader: batches of m views cut from the decoded images
on their device, sharded over processes, each step seeded from (seed, epoch, rank, step).

With ``prefetch`` the views of step n + 1 are cut before step n is handed to training; on a
GPU they are cut on a side CUDA stream, so that their kernels run while step n trains on the
default one (the GPU otherwise waits for them at every step). Every step is seeded by its own
number, so the views, the step count and the resume points are those of the loader without
it.

With ``resolution`` (a :class:`~mvssl_plugin.data.resolution.ResolutionRamp`) each epoch's views
are cut at the ramp's side for that epoch, read off the epoch Lightning sets, so a resumed run
goes on at the size it stopped at.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any, Dict, List, Optional, Tuple

import torch

from mvssl_plugin.data.inmemory.augment import BatchAugment, seeded_views, step_seed
from mvssl_plugin.data.inmemory.devices import moved, to_device
from mvssl_plugin.data.pipeline import EpochShards, ViewRecipe, process_group, split_over
from mvssl_plugin.data.resolution import ResolutionRamp, full_side, scaled_side


class MemoryMultiViewLoader:
    """An iterable Lightning trains from like a DataLoader: batches are solo-learn's
    ``[indexes (B,) long, [view_1 (B, 3, S, S) float, ..., view_m], targets (B,) long]``,
    ``drop_last`` as its loader; views on ``device``, indexes and targets on the CPU.

    Args:
        images: (N, 3, H, W) uint8, the decoded data set (:func:`decode_to_uint8`).
        targets: (N,) class indexes (-1 without labels).
        recipes: the augmentation pipelines, in the order the views are returned.
        batch_size: images per process and step.
        device: where the images live and views are computed; a bare ``cuda`` means the
            process's current GPU when iterating (Lightning sets it per rank by then).
        seed: base seed of the image order and the augmentations.
        shard: split the images over processes (false in view-parallel runs, where every
            process holds the same images).
        world_size: the processes the run is configured for (for ``len`` before the
            process group exists; checked against it when iterating).
        rank: this process's rank, for tests; None reads it from torch.distributed.
        prefetch: cut the next step's views before handing out this one's (see the module
            docstring); None: on a GPU only, where it overlaps the training step.
        resolution: the side of the largest pipeline's views per epoch (the others scale
            with it); None: every recipe's own ``crop_size`` throughout.
        epochs: the run's epochs, which ``resolution`` is fitted to (needed with it).
    """

    def __init__(
        self,
        images: torch.Tensor,
        targets: Sequence[int] | torch.Tensor,
        recipes: Sequence[ViewRecipe],
        batch_size: int,
        device: str | torch.device = "cpu",
        seed: int = 0,
        shard: bool = True,
        world_size: int = 1,
        rank: Optional[int] = None,
        prefetch: Optional[bool] = None,
        resolution: Optional[ResolutionRamp] = None,
        epochs: Optional[int] = None,
    ) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be (N, 3, H, W) uint8, got {tuple(images.shape)} {images.dtype}")
        self.targets = torch.as_tensor(targets, dtype=torch.long).cpu()
        if len(self.targets) != len(images):
            raise ValueError(f"{len(images)} images but {len(self.targets)} targets")
        self.images = images
        self.device = device
        self.recipes = list(recipes)
        self.augments = [(BatchAugment(recipe), recipe.num_crops) for recipe in self.recipes]
        self.full = full_side(self.recipes)
        if resolution is not None and (epochs is None or epochs < 1):
            raise ValueError(f"a resolution ramp needs the run's epochs (got {epochs!r})")
        if resolution is not None and resolution.full != self.full:
            raise ValueError(f"the ramp ends at {resolution.full} px, the largest recipe is {self.full} px")
        self.resolution, self.epochs = resolution, epochs
        self._augments_by_side: Dict[int, List[Tuple[BatchAugment, int]]] = {}
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shard = shard
        self.world_size = world_size if shard else 1
        self.rank = rank
        self.prefetch = prefetch
        self.sampler = EpochShards(len(images), self.seed)
        torch_device = torch.device(device)
        if torch_device.type == "cpu" or torch_device.index is not None:
            self._place()

    def _place(self) -> torch.Tensor:
        """The images on the device, moved there once."""
        self.images = moved(self.images, self.device)
        return self.images

    def side(self, epoch: int) -> int:
        """The largest pipeline's side during ``epoch``."""
        return self.full if self.resolution is None else self.resolution.side(epoch, int(self.epochs or 1))

    def augments_at(self, epoch: int) -> List[Tuple[BatchAugment, int]]:
        """(augmentation, views) per pipeline for ``epoch``'s side, at the ramp's magnitude for
        that side (built once per side)."""
        side = self.side(epoch)
        if side == self.full or self.resolution is None:
            return self.augments
        if side not in self._augments_by_side:
            strength = self.resolution.strength(side)
            recipes = [
                dataclasses.replace(r.at_strength(strength), crop_size=scaled_side(r.crop_size, side, self.full))
                for r in self.recipes
            ]
            self._augments_by_side[side] = [(BatchAugment(r), r.num_crops) for r in recipes]
        return self._augments_by_side[side]

    def __len__(self) -> int:
        return self.sampler.shard_size(self.world_size) // self.batch_size

    def _rank_and_world(self) -> Tuple[int, int]:
        group = process_group() if self.rank is None else (self.rank, self.world_size)
        return split_over(group, self.shard, self.world_size, "memory loader")

    def __iter__(self) -> Iterator[List[Any]]:
        images = self._place()
        rank, world = self._rank_and_world()
        epoch = self.sampler.epoch
        augments = self.augments_at(epoch)
        order = torch.from_numpy(self.sampler.indices(rank if self.shard else 0, world))
        steps = len(self)
        ahead = self.prefetch if self.prefetch is not None else images.device.type == "cuda"
        side = torch.cuda.Stream(device=images.device) if ahead and images.device.type == "cuda" else None

        def cut(step: int) -> Tuple[torch.Tensor, List[torch.Tensor]]:
            index = order[step * self.batch_size : (step + 1) * self.batch_size]
            with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
                batch = images.index_select(0, to_device(index, images.device))
                return index, seeded_views(augments, batch, step_seed(self.seed, epoch, rank, step))

        ready = cut(0) if ahead and steps else None
        for step in range(steps):
            index, views = ready if ahead else cut(step)
            if side is not None:  # training waits for the side stream's views, which stay alive for it
                current = torch.cuda.current_stream(images.device)
                current.wait_stream(side)
                for view in views:
                    view.record_stream(current)
            if ahead and step + 1 < steps:
                ready = cut(step + 1)  # enqueued now: it runs while this step trains
            yield [index, views, self.targets[index]]
