"""One view of every image of a batch per :class:`ViewRecipe` (:class:`BatchAugment`: crop and
flip, colour steps, normalization), and every view of a step drawn from one seed
(:func:`seeded_views`, :func:`step_seed`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Callable, List, Tuple

import numpy as np
import torch

from mvssl_plugin.data.inmemory.color import (
    ColorJitterPerImage,
    RandomPerImage,
    equalize,
    gaussian_blur,
    grayscale,
    solarize,
)
from mvssl_plugin.data.inmemory.crop import CropMatrices, random_resized_boxes, resize_matrix
from mvssl_plugin.data.inmemory.devices import to_device
from mvssl_plugin.data.pipeline import ViewRecipe


def _blur_kernel(crop_size: int) -> int:
    """23 taps (BYOL's 10% of 224 px, > 5 sigma at solo-learn's largest sigma 2 px), or the
    largest odd size the crop holds. Not scaled with the crop: solo-learn's sigma is in
    pixels whatever the image size."""
    return min(23, crop_size if crop_size % 2 else crop_size - 1)


class BatchAugment:
    """One view of every image of a batch following one :class:`ViewRecipe`, each image
    with its own random parameters. Randomness comes from torch's global generator (CPU):
    seed it, under ``torch.random.fork_rng``, for a reproducible stream."""

    def __init__(self, recipe: ViewRecipe) -> None:
        self.recipe = recipe
        steps: List[Callable[[torch.Tensor], torch.Tensor]] = []
        if recipe.jitter_prob > 0:
            steps.append(
                ColorJitterPerImage(
                    recipe.brightness, recipe.contrast, recipe.saturation, recipe.hue, recipe.jitter_prob
                )
            )
        if recipe.grayscale_prob > 0:
            steps.append(RandomPerImage(grayscale, recipe.grayscale_prob))
        if recipe.blur_prob > 0:  # sigma in pixels, 0.1 to 2, as solo-learn's
            blur = functools.partial(gaussian_blur, kernel=_blur_kernel(recipe.crop_size))
            steps.append(RandomPerImage(blur, recipe.blur_prob, parameters=(0.1, 2.0)))
        if recipe.solarization_prob > 0:
            steps.append(RandomPerImage(solarize, recipe.solarization_prob))
        if recipe.equalization_prob > 0:
            steps.append(RandomPerImage(equalize, recipe.equalization_prob))
        self.colour_steps = steps
        self._norm: dict = {}
        self._crops: dict = {}

    def _crop_matrices(self, in_size: int, device: torch.device) -> CropMatrices:
        key = (in_size, device)
        if key not in self._crops:
            self._crops[key] = CropMatrices(in_size, self.recipe.crop_size, device)
        return self._crops[key]

    def _normalization(self, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        if device not in self._norm:
            mean = torch.tensor(self.recipe.mean, device=device).view(1, 3, 1, 1)
            std = torch.tensor(self.recipe.std, device=device).view(1, 3, 1, 1)
            self._norm[device] = (mean, std)
        return self._norm[device]

    def _resize_then_centre_crop(self, batch: int, axis: int, resized: int, device: torch.device) -> torch.Tensor:
        """(B, S, axis) weights of PIL's resize of the whole axis to ``resized`` (torchvision's
        ``int()`` of the longer side), then torchvision's centred crop of S of them."""
        key = (axis, resized, device)
        if key not in self._crops:
            scale = axis / resized
            offset = round((resized - self.recipe.crop_size) / 2)
            start = torch.tensor([offset * scale], dtype=torch.float64)
            length = torch.tensor([self.recipe.crop_size * scale], dtype=torch.float64)
            self._crops[key] = resize_matrix(start, length, axis, self.recipe.crop_size, crop=False).float().to(device)
        return self._crops[key].expand(batch, -1, -1)

    def crop_and_flip(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 -> (B, 3, S, S) float in [0, 1]: random resized crop (or
        resize + centre crop), then the horizontal flip, as two batched matmuls. Like PIL,
        the horizontal pass is rounded to uint8 values before the vertical one, so the crop
        is PIL's to the grey level (fixed-point rounding aside)."""
        batch, _, height, width = images.shape
        size, device = self.recipe.crop_size, images.device
        if self.recipe.rrc:
            top, left, h, w = random_resized_boxes(batch, height, width, self.recipe.scale, device)
            wy = self._crop_matrices(height, device)(top, h)
            wx = self._crop_matrices(width, device)(left, w)
        else:  # torchvision's Resize(crop_size) keeps the aspect ratio; a centre crop makes views stackable
            short = min(height, width)
            wy, wx = (
                self._resize_then_centre_crop(batch, axis, int(size * axis / short), device) for axis in (height, width)
            )
        if self.recipe.flip_prob > 0:
            flip = to_device(torch.rand(batch) < self.recipe.flip_prob, device)
            wx = torch.where(flip.view(-1, 1, 1), wx.flip(1), wx)
        channels = 3 * batch
        x = torch.bmm(images.float().reshape(batch, 3 * height, width), wx.transpose(1, 2))  # (B, 3H, S)
        x = x.clamp_(0.0, 255.0).round_().view(channels, height, size)
        wy = wy.unsqueeze(1).expand(batch, 3, size, height).reshape(channels, size, height)
        x = torch.bmm(wy, x).view(batch, 3, size, size)  # contiguous, unlike einsum's
        return x.clamp_(0.0, 255.0).round_().div_(255.0)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 on any device -> (B, 3, S, S) float32, normalized."""
        x = self.crop_and_flip(images)
        for step in self.colour_steps:
            x = step(x)
        mean, std = self._normalization(x.device)
        return x.sub_(mean).div_(std)


def step_seed(seed: int, epoch: int, rank: int, step: int) -> int:
    """A well-mixed 63-bit seed for one step's augmentations. Shifted as a Python int: numpy 1
    reads ``uint64 >> 1`` as uint64 >> int64, which promotes to float64 and has no shift."""
    state = np.random.SeedSequence([int(seed), int(epoch), int(rank), int(step)]).generate_state(2, np.uint64)
    return int(state[0]) >> 1


#: Largest float batch (bytes) one augmentation call works on: the views of one recipe go
#: through together (B x views images) up to this size, so each of the ~50 tensor ops runs
#: once per recipe instead of once per view.
CALL_BYTES = 256 * 2**20


def seeded_views(augments: Sequence[Tuple[BatchAugment, int]], images: torch.Tensor, seed: int) -> List[torch.Tensor]:
    """Every view of ``images`` (B, 3, H, W) uint8: each ``BatchAugment`` ``num_crops``
    times -> list of (B, 3, S, S) float. Drawn from torch's generators seeded with ``seed``
    inside ``fork_rng``: reproducible, and the caller's global random state (CPU and the
    images' GPU) is left as it was."""
    devices = [images.device.index or 0] if images.device.type == "cuda" else []
    batch, _, height, width = images.shape
    views: List[torch.Tensor] = []
    with torch.random.fork_rng(devices=devices):
        # seed only the generators in play (torch.manual_seed would reseed every GPU, and
        # fork_rng restores the forked ones only)
        torch.default_generator.manual_seed(seed)
        for index in devices:
            torch.cuda.default_generators[index].manual_seed(seed)
        for augment, crops in augments:
            per_view = batch * 3 * max(height * width, augment.recipe.crop_size**2) * 4
            together = max(1, min(crops, CALL_BYTES // per_view))
            for first in range(0, crops, together):
                count = min(together, crops - first)
                stacked = images if count == 1 else images.repeat(count, 1, 1, 1)  # (count x B, 3, H, W)
                views.extend(augment(stacked).split(batch))
    return views
