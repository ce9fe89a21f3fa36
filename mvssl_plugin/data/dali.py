"""m-view pretraining data with NVIDIA DALI: each image is read and decoded once, m views cut from it.

With 4 or 8 views per image the torchvision loader (one PIL decode and one Python
transform chain per view) sets the pace of training. Here DALI decodes each file once,
on the CPU (``dali.device: cpu``, no GPU needed) or on the GPU (``gpu``: nvJPEG 'mixed'
decode, GPU augmentations), and every view draws its own random parameters from the
augmentation pipelines of the YAML, in torchvision's order: random resized crop, color
jitter, grayscale, blur, solarization, equalization, flip, normalization.

The order of images is ours, not DALI's reader's: each epoch is a permutation drawn from
(seed, epoch), split over the processes as torch's DistributedSampler would, and every
epoch's augmentations come from a pipeline seeded by (seed, epoch, rank). A run resumed
from a checkpoint therefore sees the very images and views the uninterrupted run would.
Lightning sets the epoch through ``loader.sampler.set_epoch`` as for any DataLoader.

Pixels: DALI decodes JPEGs and PNGs of at most 8 bits a sample from their bytes (the same
pixels as PIL's, tested); every other file (TIFF, 16-bit PNG, BMP, PNM, WebP) is decoded by
the shared decode of :mod:`mvssl_plugin.data.pixels`, which the other formats use, and
reaches DALI as an 8-bit RGB PNG. EXIF orientation is ignored, as torchvision's loader does.

Known differences from torchvision's transforms: DALI's contrast pivots on mid-grey (not
on the image's mean), and grayscale is applied as zero saturation inside the same color
twist (torchvision's luma weights).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator, Sequence
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import torch
from omegaconf import DictConfig
from PIL import Image

from mvssl_plugin.config import world_size
from mvssl_plugin.data.pipeline import (  # noqa: F401 (re-exported)
    EpochShards,
    ViewRecipe,
    normalization,
    process_group,
    split_over,
)
from mvssl_plugin.data.pixels import dali_reads_as_is, rgb_png_bytes
from mvssl_plugin.errors import ConfigError, DataError

# ----------------------------------------------------------------------------------------
# The DALI graph. Functions below run while DALI traces the pipeline definition.


def _jittered(low_high: Tuple[float, float], prob_coin):
    """1 where the coin says no, else a uniform draw: the color twist's identity when skipped."""
    # local: DALI is optional (the dali extra; data.checks.check_dali names it when absent), and
    # data.loaders imports this module for every format
    from nvidia.dali import fn

    return 1.0 + prob_coin * (fn.random.uniform(range=list(low_high)) - 1.0)


def _maybe(images, prob: float, op: Callable):
    """``op(images)`` with probability ``prob`` per sample (DALI conditionals: skipped
    samples cost nothing)."""
    from nvidia.dali import fn, types  # local: DALI is optional, as in _jittered

    if prob <= 0:
        return images
    if prob >= 1:
        return op(images)
    if fn.random.coin_flip(probability=prob, dtype=types.BOOL):
        out = op(images)
    else:
        out = images
    return out


def _solarize(images):
    from nvidia.dali import fn, types  # local: DALI is optional, as in _jittered

    bright = images >= 128
    return fn.cast(bright * (255 - images) + (True ^ bright) * images, dtype=types.UINT8)


def _gaussian_blur(images):
    from nvidia.dali import fn  # local: DALI is optional, as in _jittered

    return fn.gaussian_blur(images, sigma=fn.random.uniform(range=[0.1, 2.0]))


def one_view(images, recipe: ViewRecipe):
    """One view of every decoded image (HWC uint8) -> CHW float32, normalized."""
    from nvidia.dali import fn, types  # local: DALI is optional, as in _jittered

    size = [recipe.crop_size, recipe.crop_size]
    if recipe.rrc:
        x = fn.random_resized_crop(images, size=size, random_area=list(recipe.scale), interp_type=types.INTERP_CUBIC)
    else:  # torchvision's Resize(crop_size) keeps the aspect ratio; a center crop makes views stackable
        x = fn.resize(images, resize_shorter=recipe.crop_size, interp_type=types.INTERP_CUBIC)
        x = fn.crop(x, crop=size)
    if recipe.jitter_prob > 0 or recipe.grayscale_prob > 0:
        jitter = fn.random.coin_flip(probability=recipe.jitter_prob)
        gray = fn.random.coin_flip(probability=recipe.grayscale_prob)

        def around_one(spread: float) -> Tuple[float, float]:
            return max(0.0, 1.0 - spread), 1.0 + spread

        x = fn.color_twist(
            x,
            brightness=_jittered(around_one(recipe.brightness), jitter),
            contrast=_jittered(around_one(recipe.contrast), jitter),
            saturation=_jittered(around_one(recipe.saturation), jitter) * (1 - gray),
            hue=jitter * fn.random.uniform(range=[-360.0 * recipe.hue, 360.0 * recipe.hue]),  # DALI: degrees
        )
    x = _maybe(x, recipe.blur_prob, _gaussian_blur)
    x = _maybe(x, recipe.solarization_prob, _solarize)
    x = _maybe(x, recipe.equalization_prob, fn.equalize)
    return fn.crop_mirror_normalize(
        x,
        mirror=fn.random.coin_flip(probability=recipe.flip_prob),
        dtype=types.FLOAT,
        output_layout="CHW",
        mean=[255.0 * m for m in recipe.mean],
        std=[255.0 * s for s in recipe.std],
    )


def decode(encoded, device: str):
    """DALI's decode of the bytes :meth:`FileBatches.read` hands it -> HWC uint8 RGB, EXIF
    orientation ignored (as torchvision's loader)."""
    from nvidia.dali import fn, types  # local: DALI is optional, as in _jittered

    mode = "mixed" if device == "gpu" else "cpu"
    return fn.decoders.image(encoded, device=mode, output_type=types.RGB, adjust_orientation=False)


def build_pipeline(
    source: Callable[[], Tuple[List[np.ndarray], List[np.ndarray]]],
    recipes: Sequence[ViewRecipe],
    batch_size: int,
    device: str,
    num_threads: int,
    device_id: Optional[int],
    seed: int,
    prefetch: int = 2,
):
    """A DALI pipeline yielding ``(index, view_1, ..., view_m)`` per batch; ``source``
    returns one batch of (encoded file bytes, dataset index)."""
    from nvidia.dali import fn, pipeline_def  # local: DALI is optional, as in _jittered

    @pipeline_def(enable_conditionals=True)
    def multiview():
        encoded, index = fn.external_source(source=source, num_outputs=2, batch=True, no_copy=False)
        images = decode(encoded, device)
        views = [one_view(images, recipe) for recipe in recipes for _ in range(recipe.num_crops)]
        return (index, *views)

    return multiview(
        batch_size=batch_size,
        num_threads=num_threads,
        device_id=device_id,
        seed=seed,
        prefetch_queue_depth=prefetch,
        exec_dynamic=True,
    )


# ----------------------------------------------------------------------------------------
# Order of images and the Lightning-facing loader.


class FileBatches:
    """The external source: reads the files of one shard, a batch at a time, and keeps
    the last few batches' indexes to name the culprit if DALI fails to decode one."""

    def __init__(self, files: Sequence[str], order: np.ndarray, batch_size: int, remember: int) -> None:
        self.files, self.order, self.batch_size = files, order, batch_size
        self.position = 0
        self.recent: collections.deque = collections.deque(maxlen=remember)

    def __call__(self) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        if self.position + self.batch_size > len(self.order):
            raise StopIteration
        chosen = self.order[self.position : self.position + self.batch_size]
        self.position += self.batch_size
        self.recent.append(chosen)
        encoded = [self.read(self.files[i]) for i in chosen]
        return encoded, [np.array(i, dtype=np.int64) for i in chosen]

    @staticmethod
    def read(path: str) -> np.ndarray:
        """The bytes DALI decodes for ``path``: the file's own where DALI's decoder gives the
        shared decode's pixels (JPEG, PNG of <= 8 bits), else those pixels as an 8-bit RGB PNG
        (:mod:`mvssl_plugin.data.pixels`)."""
        data = np.fromfile(path, dtype=np.uint8)
        if dali_reads_as_is(data):
            return data
        try:
            return np.frombuffer(rgb_png_bytes(path), dtype=np.uint8)
        except Exception as err:
            reason = f"{type(err).__name__}: {err}"
            raise DataError(f"cannot read image {path} ({reason}): delete or replace the file") from None

    def recent_files(self) -> List[str]:
        return [self.files[i] for batch in self.recent for i in batch]


def find_undecodable(files: Sequence[str]) -> List[str]:
    """The files among ``files`` that PIL cannot fully decode."""
    bad = []
    for path in files:
        try:
            with Image.open(path) as image:
                image.load()
        except Exception:
            bad.append(path)
    return bad


class DaliMultiViewLoader:
    """An iterable Lightning trains from like a DataLoader: batches are solo-learn's
    ``[indexes, [view_1, ..., view_m], targets]``, ``drop_last`` as its loader.

    Args:
        files / targets: the dataset's image paths and class indexes (-1 without labels).
        recipes: the augmentation pipelines, in the order the views are returned.
        batch_size: images per process and step.
        device: ``cpu`` or ``gpu`` (decode and augment there).
        num_threads: DALI worker threads.
        seed: base seed of the image order and the augmentations.
        shard: split the images over processes (false in view-parallel runs, where
            every process holds the same images).
        world_size: the processes the run is configured for (for ``len`` before the
            process group exists; checked against it when iterating).
    """

    def __init__(
        self,
        files: Sequence[str],
        targets: Sequence[int],
        recipes: Sequence[ViewRecipe],
        batch_size: int,
        device: str = "cpu",
        num_threads: int = 2,
        seed: int = 0,
        shard: bool = True,
        world_size: int = 1,
        prefetch: int = 2,
    ) -> None:
        if device not in ("cpu", "gpu"):
            raise ConfigError(f"dali.device={device!r}: choose cpu or gpu")
        self.files = list(files)
        self.targets = torch.as_tensor(list(targets), dtype=torch.long)
        self.recipes = list(recipes)
        self.batch_size = batch_size
        self.device = device
        self.num_threads = max(1, int(num_threads))
        self.seed = seed
        self.shard = shard
        self.world_size = world_size if shard else 1
        self.prefetch = prefetch
        self.sampler = EpochShards(len(self.files), seed)

    def __len__(self) -> int:
        return self.sampler.shard_size(self.world_size) // self.batch_size

    def _rank_and_world(self) -> Tuple[int, int]:
        return split_over(process_group(), self.shard, self.world_size, "DALI loader")

    def _device_id(self) -> Optional[int]:
        if self.device == "cpu":
            return None
        if not torch.cuda.is_available():
            raise ConfigError("dali.device=gpu needs a CUDA GPU: set dali.device=cpu")
        return torch.cuda.current_device()

    def __iter__(self) -> Iterator[List[Any]]:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator  # local: DALI is optional, as in _jittered

        rank, world = self._rank_and_world()
        order = self.sampler.indices(0 if not self.shard else rank, world)
        source = FileBatches(self.files, order, self.batch_size, remember=self.prefetch + 2)
        # one pipeline per epoch, seeded by (seed, epoch, rank): resumed runs replay nothing
        seed = (self.seed * 1_000_003 + self.sampler.epoch * 1_009 + rank) % (2**31 - 1)
        pipeline = build_pipeline(
            source, self.recipes, self.batch_size, self.device, self.num_threads, self._device_id(), seed, self.prefetch
        )
        num_views = sum(r.num_crops for r in self.recipes)
        names = ["index"] + [f"view{v}" for v in range(num_views)]
        try:
            pipeline.build()
            iterator = DALIGenericIterator(pipeline, names, auto_reset=False, prepare_first_batch=False)
            for step, (batch,) in enumerate(_decode_guard(iterator, source)):
                if step >= len(self):
                    break
                index = batch["index"].view(-1).cpu()
                yield [index, [batch[name] for name in names[1:]], self.targets[index]]
        finally:
            del pipeline


def _decode_guard(iterator, source: FileBatches):
    """Re-raises DALI's decode failure as a :class:`DataError` naming the bad file."""
    try:
        yield from iterator
    except RuntimeError as err:
        if "decoders.image" not in str(err) and "nvImageCodec" not in str(err):
            raise
        bad = find_undecodable(source.recent_files())
        which = ", ".join(bad) if bad else "one of the files just read (PIL decodes them all)"
        raise DataError(
            f"DALI could not decode {which}: delete or replace the file (or train with data.format=image_folder, "
            "which raises on it too)"
        ) from None


# ----------------------------------------------------------------------------------------
# From a composed config.


def pretrain_dali_loader(cfg: DictConfig, files: Sequence[str], targets: Sequence[int]) -> DaliMultiViewLoader:
    """The DALI loader a composed pretraining config asks for (checked by
    :func:`mvssl_plugin.config.check_pretrain_cfg`, which resolves ``dali.device``)."""
    threads = cfg.dali.get("num_threads") or max(1, min(int(cfg.data.num_workers), os.cpu_count() or 1))
    return DaliMultiViewLoader(
        files,
        targets,
        [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations],
        batch_size=int(cfg.optimizer.batch_size),
        device=str(cfg.dali.device),
        num_threads=int(threads),
        seed=int(cfg.seed),
        shard=not bool(cfg.method_kwargs.get("view_parallel", False)),
        world_size=world_size(cfg),
    )
