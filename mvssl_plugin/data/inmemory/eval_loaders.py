"""Evaluation loaders of decoded labelled sets: the fast probe's feature pass
(:func:`probe_memory_loaders`) and pretraining's online validation
(:func:`val_memory_loader`), with solo-learn's linear-evaluation transforms
(:func:`eval_recipe`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import Subset

from mvssl_plugin.data.dataset_files import dataset_files, dataset_labels
from mvssl_plugin.data.inmemory.augment import BatchAugment, seeded_views, step_seed
from mvssl_plugin.data.inmemory.cache import check_fits, decode_to_uint8, default_cache_dir, memory_bytes_needed
from mvssl_plugin.data.inmemory.devices import moved, training_device
from mvssl_plugin.data.labelled_sets import classification_datasets
from mvssl_plugin.data.pipeline import ViewRecipe, process_group
from mvssl_plugin.data.pretrain_set import holdout_count, holdout_samples, pretrain_samples
from mvssl_plugin.errors import ConfigError


def eval_recipe(dataset: str) -> Optional[Tuple[ViewRecipe, int]]:
    """(augmented recipe, image size) of solo-learn's linear-evaluation transforms for
    ``dataset``, read off the transform objects solo-learn builds (its train transform:
    random resized crop + flip + normalize; its val transform: normalize, at most a resize
    to the same square size); None where the val transform does more (the ImageNet
    pipeline's resize of the shorter side + centre crop), which the in-memory format does
    not serve."""
    # local: solo-learn (all of it, torchvision and timm with it) loads when a recipe is read; data.loaders
    # imports this module for every format
    from solo.data.classification_dataloader import prepare_transforms
    from torchvision import transforms as T

    t_train, t_val = prepare_transforms(dataset)
    train_steps = {type(step): step for step in t_train.transforms}
    rrc, norm = train_steps.get(T.RandomResizedCrop), train_steps.get(T.Normalize)
    size = int(rrc.size[0]) if rrc is not None else None
    square = ((size, size), [size, size])
    plain_ok = all(
        isinstance(step, (T.ToTensor, T.Normalize)) or (isinstance(step, T.Resize) and step.size in square)
        for step in t_val.transforms
    )
    known = {T.RandomResizedCrop, T.RandomHorizontalFlip, T.ToTensor, T.Normalize}
    if rrc is None or norm is None or not plain_ok or set(train_steps) - known:
        return None
    flip = train_steps.get(T.RandomHorizontalFlip)
    recipe = ViewRecipe(
        crop_size=size,
        num_crops=1,
        rrc=True,
        scale=(float(rrc.scale[0]), float(rrc.scale[1])),
        jitter_prob=0.0,
        brightness=0.0,
        contrast=0.0,
        saturation=0.0,
        hue=0.0,
        grayscale_prob=0.0,
        blur_prob=0.0,
        solarization_prob=0.0,
        equalization_prob=0.0,
        flip_prob=float(flip.p) if flip is not None else 0.0,
        mean=tuple(float(v) for v in norm.mean),
        std=tuple(float(v) for v in norm.std),
    )
    return recipe, size


def probe_recipes(dataset: str) -> Tuple[ViewRecipe, int]:
    """:func:`eval_recipe`, or a ConfigError naming the fix where the format does not serve ``dataset``."""
    found = eval_recipe(dataset)
    if found is None:
        raise ConfigError(
            f"data.format=memory in the fast probe: solo-learn's {dataset} evaluation transforms resize or crop "
            "the test images; the in-memory probe serves cifar10, cifar100 and stl10: use data.format=image_folder"
        )
    return found


class MemoryEvalLoader:
    """``(images (B, 3, S, S) float, labels (B,))`` batches of a decoded labelled set, in
    its order: each image as solo-learn's linear-evaluation train transform makes it
    (``augment=True``: random resized crop + flip + normalize, new draws on every pass) or
    as its val transform does (normalized only).

    Pass ``p`` draws from seed (seed, p, 0, batch) (:func:`step_seed`), so a probe is
    reproducible and its passes differ. ``device``: where the images move before the first
    batch (a bare ``cuda``: the process's current GPU then), None to keep them where they
    are. ``shard``: each process of a torch.distributed job takes every world-th image from
    its rank on (pretraining's online validation under DDP)."""

    def __init__(
        self,
        images: torch.Tensor,
        labels: Sequence[int] | torch.Tensor,
        recipe: ViewRecipe,
        augment: bool,
        batch_size: int = 256,
        seed: int = 0,
        device: Optional[str | torch.device] = None,
        shard: bool = False,
    ) -> None:
        if images.shape[-2:] != (recipe.crop_size, recipe.crop_size):
            raise ValueError(f"images are {tuple(images.shape[-2:])}, the recipe wants {recipe.crop_size} px")
        self.images = images
        self.labels = torch.as_tensor(labels, dtype=torch.long).cpu()
        if len(self.labels) != len(images):
            raise ValueError(f"{len(images)} images but {len(self.labels)} labels")
        self.augment = BatchAugment(recipe) if augment else None
        self.recipe = recipe
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.device = device
        self.shard = shard
        self.passes = 0

    def _rows(self) -> slice:
        rank, world = process_group() if self.shard else (0, 1)
        return slice(rank, None, world)

    def __len__(self) -> int:
        return -(-len(self.labels[self._rows()]) // self.batch_size)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        if self.device is not None:
            self.images = moved(self.images, self.device)
        rows = self._rows()
        images, labels = self.images[rows], self.labels[rows]
        mean = torch.tensor(self.recipe.mean, device=images.device).view(1, 3, 1, 1)
        std = torch.tensor(self.recipe.std, device=images.device).view(1, 3, 1, 1)
        this_pass, self.passes = self.passes, self.passes + 1
        for step, first in enumerate(range(0, len(images), self.batch_size)):
            batch = images[first : first + self.batch_size]
            if self.augment is None:
                x = batch.float().div_(255.0).sub_(mean).div_(std)
            else:
                (x,) = seeded_views([(self.augment, 1)], batch, step_seed(self.seed, this_pass, 0, step))
            yield x, labels[first : first + self.batch_size]


def _decoded_labelled_set(cfg: DictConfig, key: str, dataset, size: int, device: str | torch.device):
    """(uint8 images, labels) of an ImageFolder dataset of solo-learn's, decoded at ``size``
    (cached beside the data path ``key`` names, or in ``memory.cache_dir``) after checking
    they fit ``device``."""
    files, labels = dataset_files(dataset), dataset_labels(dataset)
    if files is None or labels is None:
        raise ConfigError(f"{key}: data.format=memory reads ImageFolder trees: use data.format=image_folder")
    cache_dir = OmegaConf.select(cfg, "memory.cache_dir", default=None)
    cache = Path(cache_dir) if cache_dir else default_cache_dir(OmegaConf.select(cfg, key))

    def fits(shape: Tuple[int, int, int, int]) -> None:
        check_fits(memory_bytes_needed(shape[0], shape[2], shape[3]), device)

    notify = lambda text: print(f"mvssl: {key}: {text}")  # noqa: E731
    return decode_to_uint8(files, size, cache, check=fits, notify=notify), labels


def probe_memory_loaders(
    cfg: DictConfig, train_set, test_set, device: torch.device
) -> Tuple[MemoryEvalLoader, MemoryEvalLoader, MemoryEvalLoader]:
    """(augmented train, plain test, augmented test) loaders of the fast probe with
    ``data.format: memory``: the files of solo-learn's datasets (the same fraction and
    screened files as the image_folder path), decoded once at the evaluation size (cached
    beside each data path, or in ``memory.cache_dir``) and placed on ``device``."""
    recipe, size = probe_recipes(str(cfg.data.dataset))
    train_x, train_y = _decoded_labelled_set(cfg, "data.train_path", train_set, size, device)
    test_x, test_y = _decoded_labelled_set(cfg, "data.val_path", test_set, size, device)
    train_x, test_x = train_x.to(device), test_x.to(device)
    seed = int(cfg.seed)
    return (
        MemoryEvalLoader(train_x, train_y, recipe, augment=True, seed=seed),
        MemoryEvalLoader(test_x, test_y, recipe, augment=False, seed=seed),
        MemoryEvalLoader(test_x, test_y, recipe, augment=True, seed=seed + 1),
    )


def val_memory_loader(cfg: DictConfig, val_set) -> Optional[MemoryEvalLoader]:
    """Pretraining's online validation with ``data.format: memory``: ``val_set`` (solo-learn's,
    screened; a ``Subset`` of it with ``data.val_fraction``) decoded once and normalized on
    the training device, as solo-learn's val transform would; under DDP each process
    validates its share. None where :func:`eval_recipe` does not serve the dataset."""
    found = eval_recipe(str(cfg.data.dataset))
    if found is None:
        return None
    recipe, size = found
    rows = None
    if isinstance(val_set, Subset):
        val_set, rows = val_set.dataset, list(val_set.indices)
    device = training_device(cfg)
    images, labels = _decoded_labelled_set(cfg, "data.val_path", val_set, size, device)
    if rows is not None:
        images, labels = images[torch.as_tensor(rows)], [labels[i] for i in rows]
    return MemoryEvalLoader(
        images, labels, recipe, augment=False, batch_size=int(cfg.optimizer.batch_size), device=device, shard=True
    )


#: a decoded labelled set: (N, 3, S, S) uint8 images and their N class indexes
LabelledImages = Tuple[torch.Tensor, List[int]]


def epoch_knn_sets(cfg: DictConfig, screen=None) -> Tuple[ViewRecipe, LabelledImages, Dict[str, LabelledImages]]:
    """``(recipe, bank, queries)`` of the kNN after every epoch (``epoch_knn``), decoded once on
    the CPU at solo-learn's evaluation size (cached as the in-memory format caches): the bank is
    every labelled training image the run trains on (``data.fraction`` and ``data.holdout``
    applied), the queries every image of ``data.val_path`` (``val``) and of the ``data.holdout``
    split (``holdout``), each where the config has it. Any ``data.format``: the files are the ones
    its training reads.

    Raises:
        ConfigError: the dataset's evaluation transform is not served (ImageNet's resize + crop).
    """
    found = eval_recipe(str(cfg.data.dataset))
    if found is None:
        raise ConfigError(
            f"epoch_knn.enabled=true: the kNN after every epoch serves cifar10, cifar100 and stl10, not "
            f"{cfg.data.dataset}; set epoch_knn.enabled=false and run main_knn.py on the checkpoints"
        )
    recipe, size = found
    cache_dir = OmegaConf.select(cfg, "memory.cache_dir", default=None)

    def decoded(key: str, files: List[str], labels: List[int]) -> LabelledImages:
        labelled = [(f, y) for f, y in zip(files, labels) if y >= 0]
        if not labelled:
            raise ConfigError(f"epoch_knn.enabled=true: {key} holds no labelled image; set epoch_knn.enabled=false")
        cache = Path(cache_dir) if cache_dir else default_cache_dir(OmegaConf.select(cfg, key))
        notify = lambda text: print(f"mvssl: epoch_knn: {key}: {text}")  # noqa: E731
        images = decode_to_uint8([f for f, _ in labelled], size, cache, notify=notify)
        return images, [y for _, y in labelled]

    bank = decoded("data.train_path", *pretrain_samples(cfg, screen))
    queries: Dict[str, LabelledImages] = {}
    if OmegaConf.select(cfg, "data.val_path") is not None:
        _, val_set = classification_datasets(cfg, None, None, screen=screen)
        queries["val"] = decoded("data.val_path", dataset_files(val_set), dataset_labels(val_set))
    if holdout_count(cfg):
        queries["holdout"] = decoded("data.train_path", *holdout_samples(cfg, screen))
    return recipe, bank, queries
